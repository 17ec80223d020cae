#include "driver/debug.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "codegen/codegen.h"
#include "graph/printer.h"

namespace kiln::driver {
namespace {

// Whether KILN_DEBUG_GRAPH ("1", "all" or a comma-separated list of steps)
// selects `step`.
bool graph_step_selected(const std::string& step) {
  const char* v = std::getenv("KILN_DEBUG_GRAPH");
  if (!v || !*v || std::string(v) == "0") return false;
  std::string list = v;
  if (list == "1" || list == "all") return true;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (item == step) return true;
  return false;
}

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

}  // namespace

void debug_graph(const std::string& step, const graph::Graph& g,
                 const std::vector<graph::FusedGroup>& groups) {
  if (!graph_step_selected(step)) return;
  std::fprintf(stderr, "// ---- kiln build: graph after %s\n%s", step.c_str(),
               graph::print_graph(g, groups).c_str());
}

void dump_kernels(const std::vector<ir::LoweredFunc>& funcs, const codegen::Target& target,
                  const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error("cannot create " + dir + ": " + ec.message());
  for (const ir::LoweredFunc& f : funcs) {
    std::filesystem::path base = std::filesystem::path(dir) / f.name;
    write_text(base.string() + ".ll", codegen::emit_llvm_ir({f}, target));
    write_text(base.string() + ".s", codegen::emit_assembly({f}, target));
  }
}

}  // namespace kiln::driver
