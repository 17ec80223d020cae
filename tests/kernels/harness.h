// Helpers shared by the kernel tests: random data, and compile-and-run
// through both the JIT and an emitted shared library.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ir/function.h"
#include "ops/kernel.h"
#include "runtime/module.h"
#include "schedule/config_space.h"
#include "schedule/lower.h"

namespace kiln::test {

inline std::vector<float> random_floats(size_t n, std::mt19937_64& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Random configs drawn per shape: `fallback`, or KILN_TEST_CONFIGS when set
// (a nightly job can sweep many more than CI does).
inline int configs_per_shape(int fallback) {
  const char* env = std::getenv("KILN_TEST_CONFIGS");
  int n = env ? std::atoi(env) : 0;
  return n > 0 ? n : fallback;
}

// `cfg`'s JSON (without its flat index) with the integer knob `name` set to
// `value`, or without the knob when `value` is empty (a config stored before
// an "added later" knob existed).
inline std::string config_json_with_knob(const schedule::Config& cfg, const std::string& name,
                                         std::optional<int64_t> value) {
  std::string j = cfg.to_json();
  j = "{" + j.substr(j.find("\"knobs\""));
  const std::string key = "\"" + name + "\": ";
  size_t at = j.find(key);
  EXPECT_NE(at, std::string::npos) << name << " in " << j;
  if (at == std::string::npos) return j;
  size_t end = j.find_first_of(",}", at + key.size());
  if (value) return j.substr(0, at + key.size()) + std::to_string(*value) + j.substr(end);
  if (j.compare(end, 2, ", ") == 0) return j.substr(0, at) + j.substr(end + 2);
  return j.substr(0, at - 2) + j.substr(end);  // the last knob: drop the ", " before it
}

// `cfg` with the integer knob `name` (a knob of `space`) set to `value`.
inline schedule::Config with_knob(const schedule::ConfigSpace& space, const schedule::Config& cfg,
                                  const std::string& name, int64_t value) {
  return schedule::Config::from_json(space, config_json_with_knob(cfg, name, value));
}

inline const codegen::Target& host_target() {
  static const codegen::Target t = codegen::Target::host();
  return t;
}

inline int64_t element_count(const ir::Tensor& t) {
  int64_t n = 1;
  for (auto& d : t->shape) n *= *ir::as_const_int(d);
  return n;
}

// Lowers the kernel and runs it once on the given buffers through the JIT;
// then builds it as a shared library, loads that through the runtime, runs
// it on copies of the same inputs and expects bit-identical buffers: the two
// deployment paths must not differ.
inline void run_jit(const ops::Kernel& k, const std::vector<float*>& buffers) {
  ir::LoweredFunc f = schedule::lower(k.sch, k.args, k.name);
  ASSERT_EQ(buffers.size(), k.args.size());
  std::vector<std::vector<float>> copies;
  for (size_t i = 0; i < buffers.size(); ++i)
    copies.emplace_back(buffers[i], buffers[i] + element_count(k.args[i]));

  auto mod = codegen::jit_compile({f}, host_target());
  std::vector<void*> args(buffers.begin(), buffers.end());
  ASSERT_EQ(mod->get_function(k.name)(args.data()), 0);

  static int counter = 0;
  auto so = std::filesystem::temp_directory_path() /
            ("kiln-kernel-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".so");
  codegen::build_shared_library({f}, host_target(), so.string());
  {
    auto lib = runtime::Module::load(so.string());
    std::vector<void*> copy_args;
    for (auto& c : copies) copy_args.push_back(c.data());
    ASSERT_EQ(lib.get_function(k.name)(copy_args.data()), 0);
  }
  std::filesystem::remove(so);
  for (size_t i = 0; i < buffers.size(); ++i)
    EXPECT_EQ(0, std::memcmp(copies[i].data(), buffers[i], copies[i].size() * sizeof(float)))
        << "buffer " << k.args[i]->name << " differs between the JIT and the shared library";
}

// The lines of each innermost loop of an assembly listing (a .LBB label and a
// later jump back to it, holding no other such loop): where a kernel's time
// goes, for tests that count its spills.
inline std::vector<std::vector<std::string>> innermost_loops(const std::string& assembly) {
  std::vector<std::string> lines;
  std::istringstream in(assembly);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::map<std::string, size_t> label_at;
  std::vector<std::pair<size_t, size_t>> loops;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    if (l.rfind(".LBB", 0) == 0 && l.back() == ':') label_at[l.substr(0, l.size() - 1)] = i;
    size_t j = l.find("\tj");
    if (j == std::string::npos) continue;
    size_t t = l.find(".LBB", j);
    if (t == std::string::npos) continue;
    auto it = label_at.find(l.substr(t));
    if (it != label_at.end()) loops.push_back({it->second, i});
  }
  std::vector<std::vector<std::string>> inner;
  for (auto [b, e] : loops) {
    bool innermost = true;
    for (auto [b2, e2] : loops)
      if ((b2 > b && e2 <= e) || (b2 >= b && e2 < e)) innermost = false;
    if (innermost) inner.emplace_back(lines.begin() + b, lines.begin() + e + 1);
  }
  return inner;
}

// Whether an assembly line stores a vector register to a fixed stack slot
// (`vmovups %ymm3, 96(%rsp)`): a spill, or a register tile's stack buffer.
inline bool is_vector_spill_store(const std::string& line) {
  if (line.find("vmov") == std::string::npos) return false;
  size_t reg = std::string::npos;
  for (const char* v : {"%xmm", "%ymm", "%zmm"}) reg = std::min(reg, line.find(v));
  size_t slot = std::min(line.find("(%rsp)"), line.find("(%rbp)"));
  return reg != std::string::npos && slot != std::string::npos && reg < slot;
}

}  // namespace kiln::test
