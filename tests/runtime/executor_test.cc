// The graph executor on hand-made packages: both flavours run and match the
// host reference; bad inputs are rejected with the expected names; every kind
// of corrupt package fails with one message naming the file and the culprit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>

#include "package_builder.h"
#include "runtime/cpu_features.h"
#include "runtime/graph_executor.h"

namespace kiln::test {
namespace {

using runtime::DType;
using runtime::GraphExecutor;
using runtime::NDArray;

// The kernel library, compiled once for all tests.
const std::string& kernel_library() {
  static const std::string so = [] {
    TempDir dir;
    return build_kernel_library(dir.file("kernels.so"));
  }();
  return so;
}

PackageParts good_parts(std::mt19937_64& rng) {
  PackageParts parts;
  parts.so = kernel_library();
  parts.params.push_back({"p", random_f32({kRows, kCols}, rng)});
  return parts;
}

void expect_close(const float* got, const std::vector<float>& want, const std::string& what) {
  int64_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i)
    if (std::abs(got[i] - want[i]) > 1e-6f * (1 + std::abs(want[i]))) ++bad;
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << want.size() << " elements differ";
}

// Runs the addrelu graph on a fresh x and checks both outputs.
void check_runs(GraphExecutor& ex, const NDArray& p, std::mt19937_64& rng) {
  ASSERT_EQ(ex.inputs().size(), 1u);
  EXPECT_EQ(ex.inputs()[0].name, "x");
  EXPECT_EQ(ex.inputs()[0].dtype, DType::f32());
  EXPECT_EQ(ex.inputs()[0].shape, (std::vector<int64_t>{kRows, kCols}));
  ASSERT_EQ(ex.outputs().size(), 2u);
  EXPECT_EQ(ex.outputs()[0].name, "y");
  EXPECT_EQ(ex.outputs()[1].name, "z");
  EXPECT_EQ(ex.num_kernels(), 5u);
  for (int round = 0; round < 3; ++round) {
    NDArray x = random_f32({kRows, kCols}, rng);
    ex.set_input("x", x);
    ex.run();
    auto [y, z] = addrelu_reference(x.data_as<float>(), p.data_as<float>());
    NDArray y_out = ex.output(0);
    EXPECT_EQ(y_out.shape(), (std::vector<int64_t>{kRows, kCols}));
    expect_close(y_out.data_as<float>(), y, "y");
    expect_close(static_cast<const float*>(ex.output_data(1)), z, "z");
  }
}

TEST(GraphExecutor, TarPackageRunsAndMatchesReference) {
  std::mt19937_64 rng(1);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  parts.write(dir.file("model.tar"));
  // mod.so is extracted under TMPDIR: point it at an empty directory of our
  // own to see that nothing is left behind.
  TempDir tmp;
  const char* old_tmpdir = std::getenv("TMPDIR");
  std::string saved = old_tmpdir ? old_tmpdir : "";
  setenv("TMPDIR", tmp.path().c_str(), 1);
  GraphExecutor ex = GraphExecutor::load(dir.file("model.tar"));
  if (old_tmpdir)
    setenv("TMPDIR", saved.c_str(), 1);
  else
    unsetenv("TMPDIR");
  EXPECT_TRUE(fs::is_empty(tmp.path())) << "the extracted mod.so was left behind";
  EXPECT_EQ(ex.kiln_version(), "0.1.0");
  EXPECT_EQ(ex.target(), "llvm");
  EXPECT_EQ(ex.storage_bytes(), 6 * kNumel * 4);
  check_runs(ex, parts.params[0].array, rng);

  // Profiled runs time every kernel once, in order, and compute the same.
  auto profile = ex.run_profiled();
  ASSERT_EQ(profile.size(), 5u);
  EXPECT_EQ(profile[0].name, "fused_add_0");
  EXPECT_EQ(profile[1].func, "kiln_relu");
  EXPECT_EQ(profile[1].op_types, std::vector<std::string>{"Relu"});
  EXPECT_EQ(profile[4].flops, kNumel);
  for (auto& k : profile) {
    EXPECT_EQ(k.calls, 1);
    EXPECT_GT(k.total_ms, 0.0);
  }
}

TEST(GraphExecutor, MembersMayComeInAnyOrderWithDotSlashNames) {
  std::mt19937_64 rng(2);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  write_tar(dir.file("m.tar"), {{"./mod.params", parts.params_npz()},
                                {"README", "ignored"},
                                {"./mod.json", parts.graph.dump()},
                                {"./mod.so", parts.so}});
  GraphExecutor ex = GraphExecutor::load(dir.file("m.tar"));
  check_runs(ex, parts.params[0].array, rng);
}

TEST(GraphExecutor, SelfContainedLibraryRunsAndMatchesReference) {
  std::mt19937_64 rng(3);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  std::string so = dir.file("model.so");
  std::string err =
      build_self_contained(dir.path().string(), so, parts.graph.dump(), parts.params_npz());
  ASSERT_EQ(err, "");
  GraphExecutor ex = GraphExecutor::load(so);
  check_runs(ex, parts.params[0].array, rng);
}

TEST(GraphExecutor, SelfContainedLibraryWithoutParamsIsCorrupt) {
  std::mt19937_64 rng(4);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  std::string so = dir.file("noparams.so");
  ASSERT_EQ(build_self_contained(dir.path().string(), so, parts.graph.dump(), parts.params_npz(),
                                 /*with_params_symbol=*/false),
            "");
  try {
    GraphExecutor::load(so);
    FAIL() << "loaded";
  } catch (const runtime::CorruptPackage& e) {
    EXPECT_STREQ(e.what(), ("corrupt package '" + so +
                            "': kiln_params: symbol missing (a self-contained package exports "
                            "kiln_graph_json, kiln_params and kiln_params_size)")
                               .c_str());
  }
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(GraphExecutor, SetInputRejectsWrongNameShapeAndDtype) {
  std::mt19937_64 rng(5);
  TempDir dir;
  good_parts(rng).write(dir.file("model.tar"));
  GraphExecutor ex = GraphExecutor::load(dir.file("model.tar"));
  NDArray x = random_f32({kRows, kCols}, rng);
  std::string e = error_of([&] { ex.set_input("input", x); });
  EXPECT_EQ(e, "the model has no input 'input'; its inputs are: 'x' float32 [3, 12345]");
  NDArray wrong_shape = random_f32({kCols, kRows}, rng);
  e = error_of([&] { ex.set_input("x", wrong_shape); });
  EXPECT_EQ(e,
            "input 'x' is float32 [12345, 3] but the model expects float32 [3, 12345]; its "
            "inputs are: 'x' float32 [3, 12345]");
  NDArray wrong_type = NDArray::empty({kRows, kCols}, DType::f64());
  e = error_of([&] { ex.set_input("x", wrong_type); });
  EXPECT_NE(e.find("input 'x' is float64 [3, 12345] but the model expects float32"),
            std::string::npos)
      << e;
  EXPECT_EQ(ex.input_index("x"), 0);
  EXPECT_EQ(ex.input_index("nope"), -1);
  EXPECT_THROW(ex.output(2), std::out_of_range);
}

// Each corruption of a good package and the message it must produce (after
// "corrupt package '<file>': ").
struct Corruption {
  std::string name;
  std::function<void(PackageParts&)> apply;
  std::string message;
};

TEST(GraphExecutor, CorruptPackagesFailWithOneMessageNamingTheCulprit) {
  const std::vector<Corruption> cases = {
      {"format_version", [](PackageParts& p) { p.graph["format_version"] = 2; },
       "mod.json: format_version: 2 is not supported (this runtime reads 1)"},
      {"no tensors", [](PackageParts& p) { p.graph.erase("tensors"); },
       "mod.json: top level: missing \"tensors\""},
      {"bad dtype", [](PackageParts& p) { p.graph["tensors"][2]["dtype"] = "float33"; },
       "mod.json: tensors[2] ('t1'): unknown dtype \"float33\""},
      {"storage index", [](PackageParts& p) { p.graph["tensors"][3]["storage"] = 6; },
       "mod.json: tensors[3] ('t2'): \"storage\" = 6 is out of range [0, 5]"},
      {"tensor beyond storage", [](PackageParts& p) { p.graph["tensors"][4]["offset"] = 4; },
       "mod.json: tensors[4] ('t3'): needs bytes [4, 4 + 148140) of storage 2, which has "
       "148140 bytes"},
      {"negative dim",
       [](PackageParts& p) {
         p.graph["tensors"][0]["shape"] = {3, -1};
       },
       "mod.json: tensors[0] ('x'): bad dimension -1 in shape [3,-1]"},
      {"output index", [](PackageParts& p) { p.graph["outputs"][1]["tensor"] = 7; },
       "mod.json: outputs[1] ('z'): \"tensor\" = 7 is out of range [0, 6]"},
      {"kernel arg", [](PackageParts& p) { p.graph["kernels"][2]["args"][1] = 70; },
       "mod.json: kernels[2] ('fused_add_2'): argument 70 is not a tensor index (there are 7 "
       "tensors)"},
      // Edited but self-consistent: each kernel's arguments are checked against the
      // signature compiled with it (a kernel given fewer or smaller buffers than it was
      // compiled for would write past them).
      {"fewer args",
       [](PackageParts& p) {
         p.graph["kernels"][2]["args"] = {3, 0};
       },
       "mod.json: kernels[2] ('fused_add_2'): passes 2 arguments (float32:37035;float32:37035) "
       "but mod.so's kiln_add was compiled for 3 "
       "(float32:37035;float32:37035;float32:37035)"},
      {"swapped kernel", [](PackageParts& p) { p.graph["kernels"][3]["func"] = "kiln_add"; },
       "mod.json: kernels[3] ('fused_relu_3'): passes 2 arguments (float32:37035;float32:37035) "
       "but mod.so's kiln_add was compiled for 3 "
       "(float32:37035;float32:37035;float32:37035)"},
      {"shrunk together",
       [](PackageParts& p) {
         p.graph["storages"][2]["bytes"] = 120;
         p.graph["tensors"][2]["shape"] = {3, 10};
         p.graph["tensors"][4]["shape"] = {3, 10};
       },
       "mod.json: kernels[0] ('fused_add_0'): passes 3 arguments "
       "(float32:37035;float32:37035;float32:30) but mod.so's kiln_add was compiled for 3 "
       "(float32:37035;float32:37035;float32:37035)"},
      {"missing symbol", [](PackageParts& p) { p.graph["kernels"][3]["func"] = "kiln_gelu"; },
       "mod.json: kernels[3] ('fused_relu_3'): mod.so has no symbol 'kiln_gelu'"},
      {"param shape",
       [](PackageParts& p) {
         p.params[0].array = NDArray::empty({kCols, kRows}, DType::f32());
       },
       "mod.params: array 'p': is float32 [12345, 3] but mod.json's tensor 'p' is float32 [3, "
       "12345]"},
      {"param dtype",
       [](PackageParts& p) {
         p.params[0].array = NDArray::empty({kRows, kCols}, DType::i32());
       },
       "mod.params: array 'p': is int32 [3, 12345] but mod.json's tensor 'p' is float32 [3, "
       "12345]"},
      {"missing param", [](PackageParts& p) { p.params[0].name.assign(1, 'q'); },
       "mod.params: array 'p': missing (mod.json lists it as a param of float32 [3, 12345])"},
      {"extra param",
       [](PackageParts& p) {
         p.params.push_back({"extra", NDArray::empty({1}, DType::f32())});
       },
       "mod.params: array 'extra': is not a param of the graph"},
  };
  std::mt19937_64 rng(6);
  TempDir dir;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    PackageParts parts = good_parts(rng);
    c.apply(parts);
    std::string path = dir.file("bad.tar");
    parts.write(path);
    std::string e = error_of([&] { GraphExecutor::load(path); });
    EXPECT_EQ(e, "corrupt package '" + path + "': " + c.message);
  }
}

// A sound package whose intermediate tensors need more memory than the
// process can allocate (here: a storage of 4 EiB, consistent with its tensors,
// which need less) is "too large", not "corrupt": nothing in it is damaged.
TEST(GraphExecutor, APackageTooLargeForMemoryIsNotCalledCorrupt) {
  std::mt19937_64 rng(8);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  parts.graph["storages"][2]["bytes"] = int64_t{1} << 62;
  std::string path = dir.file("huge.tar");
  parts.write(path);
  std::string e = error_of([&] { GraphExecutor::load(path); });
  EXPECT_EQ(e.rfind("package '" + path + "' does not fit in memory: ", 0), 0u) << e;
  EXPECT_NE(e.find(" MiB) for the intermediate tensors (6 storages), more than this process can "
                   "allocate"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("corrupt package"), std::string::npos) << e;
}

// A kernel library cut short (a copy interrupted, a disk full) maps without
// complaint and would die with SIGBUS on first touch: it is corrupt instead,
// in a tar (mod.so) and as a self-contained --output-format so file, at any
// cut from 10 % to 99 % of its length.
TEST(GraphExecutor, TruncatedKernelLibrariesAreCorruptNotABusError) {
  std::mt19937_64 rng(11);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  std::string so = dir.file("whole.so");
  ASSERT_EQ(build_self_contained(dir.path().string(), so, parts.graph.dump(), parts.params_npz()),
            "");
  std::string whole_so = read_file(so), library = parts.so;
  for (int percent : {10, 25, 50, 75, 90, 99}) {
    SCOPED_TRACE(percent);
    parts.so = library.substr(0, library.size() * percent / 100);
    std::string tar = dir.file("cut" + std::to_string(percent) + ".tar");
    parts.write(tar);
    std::string e = error_of([&] { GraphExecutor::load(tar); });
    EXPECT_EQ(
        e.rfind("corrupt package '" + tar + "': mod.so: truncated or damaged shared object", 0), 0u)
        << e;
    std::string lib = dir.file("cut" + std::to_string(percent) + ".so");
    write_file(lib, whole_so.substr(0, whole_so.size() * percent / 100));
    e = error_of([&] { GraphExecutor::load(lib); });
    EXPECT_EQ(
        e.rfind("corrupt package '" + lib + "': shared library: truncated or damaged shared object",
                0),
        0u)
        << e;
  }
  // The whole ones still load.
  EXPECT_NO_THROW(GraphExecutor::load(so));
}

TEST(GraphExecutor, BrokenTarsFailWithOneMessageNamingTheMember) {
  std::mt19937_64 rng(7);
  TempDir dir;
  PackageParts parts = good_parts(rng);
  std::string good = dir.file("good.tar");
  parts.write(good);
  std::string bytes = read_file(good);
  auto load_error = [&](const std::string& name, const std::string& content) {
    std::string path = dir.file(name);
    write_file(path, content);
    return error_of([&] { GraphExecutor::load(path); });
  };
  auto prefix = [&](const std::string& name) {
    std::string file = dir.file(name);
    return "corrupt package '" + file + "': ";
  };

  // Truncated in mod.so's data (first member): libarchive reports the truncation.
  std::string e = load_error("cut.tar", bytes.substr(0, 4096));
  EXPECT_EQ(e.rfind(prefix("cut.tar") + "mod.so: cannot read member:", 0), 0u) << e;
  EXPECT_NE(e.find("runcated"), std::string::npos) << e;
  // Truncated after the last member's header.
  e = load_error("cut2.tar", bytes.substr(0, bytes.size() - 5000));
  EXPECT_EQ(e.rfind(prefix("cut2.tar"), 0), 0u) << e;

  std::string path = dir.file("missing.tar");
  write_tar(path, {{"mod.so", parts.so}, {"mod.params", parts.params_npz()}});
  EXPECT_EQ(error_of([&] { GraphExecutor::load(path); }),
            prefix("missing.tar") +
                "mod.json: missing from the tar (a package holds mod.so, mod.json, mod.params)");

  path = dir.file("badjson.tar");
  write_tar(path, {{"mod.so", parts.so},
                   {"mod.json", "{\"format_version\": 1, \"storages\": ["},
                   {"mod.params", parts.params_npz()}});
  e = error_of([&] { GraphExecutor::load(path); });
  EXPECT_EQ(e.rfind(prefix("badjson.tar") + "mod.json: not valid JSON: ", 0), 0u) << e;

  path = dir.file("badparams.tar");
  write_tar(path, {{"mod.so", parts.so},
                   {"mod.json", parts.graph.dump()},
                   {"mod.params", parts.params_npz().substr(0, 100)}});
  e = error_of([&] { GraphExecutor::load(path); });
  EXPECT_EQ(e.rfind(prefix("badparams.tar") + "mod.params", 0), 0u) << e;

  path = dir.file("badso.tar");
  write_tar(path, {{"mod.so", "not an ELF file"},
                   {"mod.json", parts.graph.dump()},
                   {"mod.params", parts.params_npz()}});
  e = error_of([&] { GraphExecutor::load(path); });
  EXPECT_EQ(e.rfind(prefix("badso.tar") + "mod.so: does not load: ", 0), 0u) << e;

  path = dir.file("twice.tar");
  write_tar(path, {{"mod.so", parts.so},
                   {"mod.json", parts.graph.dump()},
                   {"mod.json", parts.graph.dump()},
                   {"mod.params", parts.params_npz()}});
  EXPECT_EQ(error_of([&] { GraphExecutor::load(path); }),
            prefix("twice.tar") + "mod.json: appears twice in the tar");

  e = load_error("text.tar", "hello, this is not a package");
  EXPECT_EQ(
      e.rfind(prefix("text.tar") + "tar: not a kiln package (neither a tar nor a shared library)",
              0),
      0u)
      << e;
  std::string nope = dir.file("nope.tar");
  EXPECT_EQ(error_of([&] { GraphExecutor::load(nope); }), "package '" + nope + "': no such file");
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

using runtime::checkable_cpu_features;
using runtime::host_arch;
using runtime::host_has_cpu_feature;

// A checkable CPU feature this machine lacks, or "" when it has them all.
std::string a_missing_feature() {
  for (const std::string& f : checkable_cpu_features(host_arch()))
    if (!host_has_cpu_feature(f)) return f;
  return "";
}

// mod.json's "requires" is checked before any kernel can run: a package for
// another architecture or for CPU features this machine lacks is refused
// with one message naming them (never SIGILL); one this machine satisfies,
// or an old one without "requires", loads and runs.
TEST(GraphExecutor, RefusesPackagesThisMachineCannotRun) {
  std::mt19937_64 rng(9);
  TempDir dir;
  std::string path = dir.file("p.tar");

  PackageParts ok = good_parts(rng);
  std::vector<std::string> have;
  for (const std::string& f : checkable_cpu_features(host_arch()))
    if (host_has_cpu_feature(f)) have.push_back(f);
  ok.graph["requires"] = {{"arch", host_arch()}, {"cpu_features", have}};
  ok.write(path);
  EXPECT_NO_THROW(GraphExecutor::load(path));

  PackageParts other_arch = good_parts(rng);
  std::string arch = host_arch() == "aarch64" ? "x86_64" : "aarch64";
  other_arch.graph["requires"] = {{"arch", arch}, {"cpu_features", json::array()}};
  other_arch.write(path);
  EXPECT_EQ(error_of([&] { GraphExecutor::load(path); }),
            "package '" + path + "' cannot run on this machine: it is built for " + arch +
                "; this machine is " + host_arch());

  std::string missing = a_missing_feature();
  if (missing.empty()) GTEST_SKIP() << "this machine has every feature kiln checks";
  PackageParts lacking = good_parts(rng);
  lacking.graph["requires"] = {{"arch", host_arch()}, {"cpu_features", {have.at(0), missing}}};
  lacking.graph["target"] = "llvm -mattr=+" + missing;
  lacking.write(path);
  std::string e = error_of([&] { GraphExecutor::load(path); });
  EXPECT_EQ(e, "package '" + path + "' cannot run on this machine: it needs CPU features this " +
                   "machine lacks: " + missing + " (built for llvm -mattr=+" + missing +
                   "); rebuild it with --target for this machine");
  EXPECT_THROW(GraphExecutor::load(path), runtime::IncompatiblePackage);
}

}  // namespace
}  // namespace kiln::test
