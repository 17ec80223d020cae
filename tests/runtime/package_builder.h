// Hand-made kiln packages for the runtime tests: kernels compiled by kiln's
// compiler (tar flavour) or by the C compiler (self-contained flavour), a
// mod.json written here, params as npz, all put into a tar with libarchive.
//
// The graph ("addrelu"), over x and the param p of shape [3, 12345]:
//   t1 = x + p          kiln_add   (storage 2)
//   t2 = relu(t1)       kiln_relu  (storage 3)
//   t3 = t2 + x         kiln_add   (storage 2 again: t1 is dead)
//   y  = relu(t3)       kiln_relu  output 0
//   z  = t2 + t2        kiln_add   output 1
#pragma once

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "codegen/codegen.h"
#include "ops/generic_schedule.h"
#include "runtime/ndarray.h"
#include "runtime/npz.h"
#include "schedule/lower.h"

namespace kiln::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

class TempDir {
 public:
  TempDir() {
    static int n = 0;
    path_ = fs::temp_directory_path() /
            ("kiln-runtime-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A ustar archive of (member name, bytes), in order.
inline void write_tar(const std::string& path,
                      const std::vector<std::pair<std::string, std::string>>& members) {
  struct archive* a = archive_write_new();
  ASSERT_EQ(archive_write_set_format_ustar(a), ARCHIVE_OK);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, bytes] : members) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
    ASSERT_EQ(archive_write_data(a, bytes.data(), bytes.size()),
              static_cast<la_ssize_t>(bytes.size()));
    archive_entry_free(e);
  }
  ASSERT_EQ(archive_write_close(a), ARCHIVE_OK);
  archive_write_free(a);
}

constexpr int64_t kRows = 3, kCols = 12345, kNumel = kRows * kCols;

// kiln_add(a, b, out) and kiln_relu(a, out) over kNumel float32s, compiled by
// kiln (generic schedule: vectorized, parallel through kiln_parallel_for).
inline std::string build_kernel_library(const std::string& path) {
  auto a = ir::placeholder({ir::Expr(kNumel)}, ir::DataType::f32(), "a");
  auto b = ir::placeholder({ir::Expr(kNumel)}, ir::DataType::f32(), "b");
  auto sum = ir::compute(
      {ir::Expr(kNumel)},
      [&](const std::vector<ir::Var>& i) { return ir::at(a, i[0]) + ir::at(b, i[0]); }, "sum");
  auto relu = ir::compute(
      {ir::Expr(kNumel)},
      [&](const std::vector<ir::Var>& i) { return ir::max(ir::at(a, i[0]), ir::Expr(0.0f)); },
      "relu");
  auto add_f = schedule::lower(ops::schedule_generic({sum}, codegen::Target::host().float_lanes()),
                               {a, b, sum}, "kiln_add");
  auto relu_f = schedule::lower(
      ops::schedule_generic({relu}, codegen::Target::host().float_lanes()), {a, relu}, "kiln_relu");
  codegen::build_shared_library({add_f, relu_f}, codegen::Target::host(), path);
  return read_file(path);
}

// The same kernels in C.
inline std::string c_kernels_source() {
  return "#include <stdint.h>\n"
         "#define N " +
         std::to_string(kNumel) +
         "\n"
         "int32_t kiln_add(void** args) {\n"
         "  const float* a = args[0]; const float* b = args[1]; float* o = args[2];\n"
         "  for (int64_t i = 0; i < N; ++i) o[i] = a[i] + b[i];\n"
         "  return 0;\n"
         "}\n"
         "int32_t kiln_relu(void** args) {\n"
         "  const float* a = args[0]; float* o = args[1];\n"
         "  for (int64_t i = 0; i < N; ++i) o[i] = a[i] > 0 ? a[i] : 0;\n"
         "  return 0;\n"
         "}\n"
         // Each kernel's argument signature, as kiln's code generator emits it
         // (codegen::kernel_signature): the loader checks mod.json against it.
         "const char kiln_add_signature[] = \"float32:" +
         std::to_string(kNumel) + ";float32:" + std::to_string(kNumel) +
         ";float32:" + std::to_string(kNumel) +
         "\";\n"
         "const char kiln_relu_signature[] = \"float32:" +
         std::to_string(kNumel) + ";float32:" + std::to_string(kNumel) + "\";\n";
}

inline json addrelu_graph() {
  const int64_t bytes = kNumel * 4;
  json shape = {kRows, kCols};
  auto tensor = [&](const char* name, int storage) {
    return json{{"name", name},
                {"dtype", "float32"},
                {"shape", shape},
                {"storage", storage},
                {"offset", 0}};
  };
  auto kernel = [](const char* name, const char* func, std::vector<int> args, const char* op) {
    return json{{"name", name},     {"func", func},   {"args", args},
                {"op_types", {op}}, {"workload", ""}, {"flops", kNumel}};
  };
  return json{
      {"format_version", 1},
      {"kiln_version", "0.1.0"},
      {"target", "llvm"},
      {"storages",
       {{{"bytes", bytes}},
        {{"bytes", bytes}},
        {{"bytes", bytes}},
        {{"bytes", bytes}},
        {{"bytes", bytes}},
        {{"bytes", bytes}}}},
      {"tensors",
       {tensor("x", 0), tensor("p", 1), tensor("t1", 2), tensor("t2", 3), tensor("t3", 2),
        tensor("y", 4), tensor("z", 5)}},
      {"inputs", {{{"name", "x"}, {"tensor", 0}}}},
      {"outputs", {{{"name", "y"}, {"tensor", 5}}, {{"name", "z"}, {"tensor", 6}}}},
      {"params", {{{"name", "p"}, {"tensor", 1}}}},
      {"kernels",
       {kernel("fused_add_0", "kiln_add", {0, 1, 2}, "Add"),
        kernel("fused_relu_1", "kiln_relu", {2, 3}, "Relu"),
        kernel("fused_add_2", "kiln_add", {3, 0, 4}, "Add"),
        kernel("fused_relu_3", "kiln_relu", {4, 5}, "Relu"),
        kernel("fused_add_4", "kiln_add", {3, 3, 6}, "Add")}},
  };
}

inline runtime::NDArray random_f32(std::vector<int64_t> shape, std::mt19937_64& rng) {
  runtime::NDArray a = runtime::NDArray::empty(std::move(shape), runtime::DType::f32());
  std::uniform_real_distribution<float> d(-1, 1);
  for (int64_t i = 0; i < a.numel(); ++i) a.data_as<float>()[i] = d(rng);
  return a;
}

// y and z of the addrelu graph, computed on the host.
inline std::pair<std::vector<float>, std::vector<float>> addrelu_reference(const float* x,
                                                                           const float* p) {
  std::vector<float> y(kNumel), z(kNumel);
  for (int64_t i = 0; i < kNumel; ++i) {
    float t2 = std::max(x[i] + p[i], 0.0f);
    y[i] = std::max(t2 + x[i], 0.0f);
    z[i] = t2 + t2;
  }
  return {y, z};
}

// The pieces of a package, to be changed by a test before writing.
struct PackageParts {
  std::string so;
  json graph = addrelu_graph();
  std::vector<runtime::NamedArray> params;

  std::string params_npz() const {
    std::vector<runtime::NamedArrayRef> refs;
    for (auto& p : params) refs.push_back({p.name, &p.array});
    return runtime::write_npz_memory(refs);
  }
  void write(const std::string& path) const {
    write_tar(path, {{"mod.so", so}, {"mod.json", graph.dump(1)}, {"mod.params", params_npz()}});
  }
};

// Runs a shell command; returns its exit status and combined output.
inline std::pair<int, std::string> run_command(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return {-1, "popen failed"};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

// A self-contained library: the C kernels plus the graph and params as data
// symbols, compiled with the C compiler. Returns "" on success, else the
// compiler's output.
inline std::string build_self_contained(const std::string& dir, const std::string& so_path,
                                        const std::string& graph_json, const std::string& params,
                                        bool with_params_symbol = true) {
  std::string src = c_kernels_source();
  std::string lit;
  for (unsigned char c : graph_json) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "\\%03o", c);
    lit += buf;
  }
  src += "const char kiln_graph_json[] = \"" + lit + "\";\n";
  if (with_params_symbol) {
    src += "const unsigned char kiln_params[] = {";
    for (unsigned char c : params) src += std::to_string(c) + ",";
    src += "0};\n";
  }
  src += "const uint64_t kiln_params_size = " + std::to_string(params.size()) + ";\n";
  std::string c_path = dir + "/self_contained.c";
  write_file(c_path, src);
  auto [rc, out] = run_command(std::string(KILN_C_COMPILER) + " -O1 -shared -fPIC -o '" + so_path +
                               "' '" + c_path + "'");
  return rc == 0 ? "" : out;
}

}  // namespace kiln::test
