// Helpers the AMX build tests share (amx_build_test, amx_conv_build_test,
// amx_bmm_build_test): the targets with and without the tile features, the
// switch that runs an AMX build's tiles emulated here, and what a package's
// kernels used.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "driver_harness.h"

namespace kiln::test {

inline graph::Graph import_built(const OnnxBuilder& b, const ScratchDir& dir) {
  std::string path = dir.file("m.onnx");
  write_bytes(path, b.bytes());
  return frontend::import_onnx(path, {});
}

// Template name -> number of kernels of mod.json that use it.
inline std::map<std::string, size_t> templates_of(const nlohmann::json& mod) {
  std::map<std::string, size_t> r;
  for (const auto& k : mod.at("kernels"))
    for (const auto& t : k.at("op_types")) {
      std::string s = t.get<std::string>();
      if (s.find(".x86") != std::string::npos) ++r[s];
    }
  return r;
}

inline codegen::Target sapphire_rapids() {
  return codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
}

// This machine's target with AMX's int8 features: the strategy takes the
// tile templates, codegen emulates the tiles (under EmulateTiles).
inline codegen::Target host_with_amx() {
  codegen::Target t = codegen::Target::host();
  t.features.push_back("+amx-tile");
  t.features.push_back("+amx-int8");
  return t;
}

// This machine's target without AMX (what it is on CPUs without AMX): the
// VNNI / AVX2 templates.
inline codegen::Target host_without_amx() {
  codegen::Target t = codegen::Target::host();
  std::erase(t.features, "+amx-tile");
  std::erase(t.features, "+amx-int8");
  t.features.push_back("-amx-tile");
  t.features.push_back("-amx-int8");
  return t;
}

// KILN_DEBUG_AMX_EMULATE=1 for the scope of one test.
struct EmulateTiles {
  EmulateTiles() { setenv("KILN_DEBUG_AMX_EMULATE", "1", 1); }
  ~EmulateTiles() { unsetenv("KILN_DEBUG_AMX_EMULATE"); }
};

}  // namespace kiln::test
