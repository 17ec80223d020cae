// `kiln build` (the built binary) on good and bad input. Bad input must end
// with a non-zero exit, one clear message on stderr naming the file, node or
// tensor at fault, and no output file and no temporary file left behind
// (design invariant 5). A good build leaves exactly the requested file, which
// `kiln run` executes; a failed build leaves an existing package untouched.
#include <gtest/gtest.h>

#include <random>
#include <regex>

#include "driver_harness.h"
#include "ops/op_template.h"
#include "runtime/cpu_features.h"
#include "runtime/npz.h"
#include "runtime/package.h"

namespace kiln::test {
namespace {

// x[N, 3, 7, 9] (N dynamic) -> Conv 3x3 -> Relu -> Add bias -> y.
OnnxBuilder small_model(float bias = 0.25f, const std::string& batch = "N") {
  std::mt19937 rng(7);
  OnnxBuilder b;
  b.input("x", {batch, "3", "7", "9"});
  b.output("y", {batch, "4", "7", "9"});
  conv(b, "conv1", "x", "c", {3, 4}, rng);
  b.node("Relu", "relu1", {"c"}, {"r"});
  b.init_f32("bias", {}, {bias});
  b.node("Add", "add1", {"r", "bias"}, {"y"});
  return b;
}

class KilnBuild : public ::testing::Test {
 protected:
  // Runs `kiln ARGS`; TMPDIR points at tmp_ so leftovers are visible.
  CommandResult kiln(const std::string& args, const std::string& env = "") {
    return run_kiln(args, tmp_, capture_, env);
  }

  std::string write_model(const std::string& name, const OnnxBuilder& b) {
    std::string path = work_.file(name);
    write_bytes(path, b.bytes());
    return path;
  }

  // The message of a failed command: a non-zero exit (not a crash), and
  // stderr holding exactly one "kiln build: error: " message.
  void expect_one_error(const CommandResult& r, const std::vector<std::string>& needles) {
    EXPECT_NE(r.status, 0) << "stdout: " << r.out;
    EXPECT_NE(r.status, -1) << "killed by a signal; stderr: " << r.err;
    EXPECT_EQ(r.err.rfind("kiln build: error: ", 0), 0u) << r.err;
    size_t n = 0;
    for (size_t p = r.err.find("error:"); p != std::string::npos; p = r.err.find("error:", p + 1))
      ++n;
    EXPECT_EQ(n, 1u) << "more than one error message: " << r.err;
    for (const std::string& s : needles)
      EXPECT_NE(r.err.find(s), std::string::npos) << "stderr lacks '" << s << "': " << r.err;
  }

  // The work directory holds exactly `files` and TMPDIR is empty.
  void expect_files(std::vector<std::string> files) {
    std::sort(files.begin(), files.end());
    EXPECT_EQ(work_.entries(), files);
    EXPECT_TRUE(tmp_.entries().empty()) << "left in TMPDIR: " << tmp_.entries().front();
  }

  // A failed build of `model` (named `file` in the work dir) with `extra`
  // options: one message holding `needles`, and no output.
  void expect_build_fails(const std::string& file, const std::string& extra,
                          const std::vector<std::string>& needles) {
    SCOPED_TRACE(file + " " + extra);
    std::string out = work_.file("out.tar");
    CommandResult r = kiln("build " + quote(work_.file(file)) + " -o " + quote(out) + " " + extra);
    expect_one_error(r, needles);
    EXPECT_FALSE(fs::exists(out));
  }

  ScratchDir work_, tmp_, capture_;
};

// ---- malformed model files ----------------------------------------------------

TEST_F(KilnBuild, TruncatedOnnx) {
  std::string bytes = small_model().bytes();
  ASSERT_GT(bytes.size(), 200u);
  for (size_t cut : {size_t{1}, size_t{20}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 40,
                     bytes.size() - 1}) {
    std::string path = work_.file("cut.onnx");
    write_bytes(path, bytes.substr(0, cut));
    SCOPED_TRACE("cut at " + std::to_string(cut) + " of " + std::to_string(bytes.size()));
    expect_build_fails("cut.onnx", "", {path});
  }
  expect_files({"cut.onnx"});
}

TEST_F(KilnBuild, NotOnnx) {
  std::mt19937 rng(3);
  std::string random_bytes(4096, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng());
  write_bytes(work_.file("random.onnx"), random_bytes);
  write_bytes(work_.file("empty.onnx"), "");
  write_bytes(work_.file("text.onnx"), "ir_version: 8\ngraph { name: \"not binary\" }\n");
  write_bytes(work_.file("model.tar.onnx"), std::string("\x7f"
                                                        "ELF\x02\x01\x01",
                                                        7));
  for (const char* f : {"random.onnx", "empty.onnx", "text.onnx", "model.tar.onnx"})
    expect_build_fails(f, "", {work_.file(f)});
  expect_files({"empty.onnx", "model.tar.onnx", "random.onnx", "text.onnx"});
}

TEST_F(KilnBuild, MissingFileAndDirectory) {
  expect_build_fails("missing.onnx", "", {work_.file("missing.onnx")});
  fs::create_directory(work_.file("dir.onnx"));
  expect_build_fails("dir.onnx", "", {work_.file("dir.onnx"), "directory"});
  expect_files({"dir.onnx"});
}

// Every unsupported node is named with its type, in one message.
TEST_F(KilnBuild, UnknownOperatorsAreAllNamed) {
  OnnxBuilder b;
  b.input("x", {"1", "4"});
  b.output("y", {"1", "4"});
  b.node("Relu", "fine", {"x"}, {"a"});
  b.node("FrobnicateV2", "mystery", {"a"}, {"b"});
  b.node("FrobnicateV3", "roi_1", {"b"}, {"c"});
  b.node("Frob", "custom", {"c"}, {"y"})->set_domain("com.example");
  auto* op = b.model().add_opset_import();
  op->set_domain("com.example");
  op->set_version(1);
  write_model("unknown.onnx", b);
  expect_build_fails("unknown.onnx", "",
                     {work_.file("unknown.onnx"), "3 node(s)", "'mystery' (FrobnicateV2)",
                      "'roi_1' (FrobnicateV3)", "'custom' (com.example.Frob)"});
  EXPECT_EQ(std::string::npos, run_kiln("build " + quote(work_.file("unknown.onnx")) + " -o " +
                                            quote(work_.file("o.tar")),
                                        tmp_, capture_)
                                   .err.find("'fine'"));
  expect_files({"unknown.onnx"});
}

// ---- --input-shapes -------------------------------------------------------------

TEST_F(KilnBuild, InputShapesErrors) {
  const std::string f = write_model("dyn.onnx", small_model());
  expect_build_fails("dyn.onnx", "--input-shapes 'z:[1,3,7,9]'", {f, "'z'", "'x'", "not an input"});
  expect_build_fails("dyn.onnx", "--input-shapes 'x:[1,3,7]'", {f, "'x'", "rank 4", "rank 3"});
  expect_build_fails("dyn.onnx", "--input-shapes 'x:[2,3,7,10]'", {f, "'x'", "axis 3", "9", "10"});
  expect_build_fails("dyn.onnx", "", {f, "'x'", "axis 0", "'N'", "dynamic", "--input-shapes"});
  expect_build_fails("dyn.onnx", "--input-shapes 'x:1,3,7,9'", {"--input-shapes", "'['"});
  expect_build_fails("dyn.onnx", "--input-shapes 'x:[1,-3,7,9]'", {"--input-shapes", "-3"});
  expect_files({"dyn.onnx"});
}

// ---- --config ----------------------------------------------------------------------

TEST_F(KilnBuild, MalformedConfigFile) {
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string cfg = work_.file("configs.jsonl");
  write_bytes(cfg, "\n{\"workload\": \"dense.x86(a=[1])\", \"config\": {}}\n{not json\n");
  expect_build_fails("m.onnx", "--config " + quote(cfg), {cfg + ":3", "bad config line"});
  write_bytes(cfg, "{\"workload\": \"dense.x86(a=[1])\"}\n");  // no "config"
  expect_build_fails("m.onnx", "--config " + quote(cfg), {cfg + ":1", "config"});
  write_bytes(cfg, "[1, 2]\n");
  expect_build_fails("m.onnx", "--config " + quote(cfg), {cfg + ":1"});
  expect_build_fails("m.onnx", "--config " + quote(work_.file("nope.jsonl")),
                     {work_.file("nope.jsonl")});
  expect_files({"configs.jsonl", "m.onnx"});
}

// A config line for a workload of the model whose config is not in the
// template's space: the build fails naming the workload and the knob.
TEST_F(KilnBuild, IllegalConfigForAWorkload) {
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string pkg = work_.file("m.tar");
  CommandResult ok = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg));
  ASSERT_EQ(ok.status, 0) << ok.err;
  // The model's workload keys, from the package's mod.json.
  runtime::Package p = runtime::load_package(pkg);
  nlohmann::json mod = nlohmann::json::parse(p.graph_json);
  std::string key;
  for (const auto& k : mod.at("kernels"))
    if (!k.at("workload").get<std::string>().empty()) key = k.at("workload");
  fs::remove(pkg);
  ASSERT_FALSE(key.empty()) << "the conv of the model was built without a template: " << mod.dump();
  std::string cfg = work_.file("bad.jsonl");
  nlohmann::json line = {{"workload", key}, {"config", {{"knobs", {{"no_such_knob", 3}}}}}};
  write_bytes(cfg, line.dump() + "\n");
  expect_build_fails("m.onnx", "--config " + quote(cfg), {key, "no_such_knob"});
  expect_files({"bad.jsonl", "m.onnx"});
}

// ---- output paths ----------------------------------------------------------------------

TEST_F(KilnBuild, UnwritableOutputPath) {
  write_model("m.onnx", small_model(0.25f, "1"));
  write_bytes(work_.file("plain_file"), "x");
  fs::create_directory(work_.file("a_dir"));
  for (const char* format : {"tar", "so"}) {
    SCOPED_TRACE(format);
    const std::string fmt = std::string(" --output-format ") + format;
    for (const std::string& out :
         {work_.file("no_such_dir/m.out"), work_.file("plain_file/m.out"), work_.file("a_dir")}) {
      CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(out) + fmt);
      expect_one_error(r, {out});
    }
  }
  EXPECT_TRUE(fs::is_empty(work_.file("a_dir")));
  expect_files({"a_dir", "m.onnx", "plain_file"});
}

// A failure while the package is being written (here: linking, with a
// failing linker) leaves no partial package and no temporary file.
TEST_F(KilnBuild, FailedLinkLeavesNothing) {
  write_model("m.onnx", small_model(0.25f, "1"));
  for (const char* format : {"tar", "so"}) {
    SCOPED_TRACE(format);
    std::string out = work_.file(std::string("m.") + format);
    CommandResult r = kiln(
        "build " + quote(work_.file("m.onnx")) + " -o " + quote(out) + " --output-format " + format,
        "CC=false");
    expect_one_error(r, {"linking", out});
  }
  expect_files({"m.onnx"});
}

TEST_F(KilnBuild, BadOptions) {
  write_model("m.onnx", small_model(0.25f, "1"));
  for (const std::string& args : {std::string("--output-format zip"), std::string("--frobnicate"),
                                  std::string("-o"), std::string("--input-shapes")}) {
    CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " " + args);
    EXPECT_NE(r.status, 0) << args;
    EXPECT_NE(r.err.find("error"), std::string::npos) << args << ": " << r.err;
  }
  CommandResult r = kiln("build");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("no model"), std::string::npos) << r.err;
  expect_files({"m.onnx"});
}

// ---- successful builds ---------------------------------------------------------------

// Reads a package's output 0 after `kiln run` on input x.
class KilnBuildAndRun : public KilnBuild {
 protected:
  // Random x[1, 3, 7, 9] written to in.npz; returns it as an Initializer.
  graph::Initializer write_input() {
    std::mt19937 rng(5);
    graph::Initializer x = random_input({"float32", {1, 3, 7, 9}}, {}, rng);
    std::vector<runtime::NamedArray> arrays;
    arrays.push_back({"x", to_ndarray(x)});
    runtime::write_npz(inputs_.file("in.npz"), arrays);
    return x;
  }

  // y of the model with `bias` on x, by the interpreter.
  graph::Initializer reference(const graph::Initializer& x, float bias) {
    ScratchDir d;
    std::string path = d.file("m.onnx");
    write_bytes(path, small_model(bias, "1").bytes());
    graph::Graph g = frontend::import_onnx(path);
    return graph::run_graph(g, {{"x", x}}).at("y");
  }

  // `kiln run PKG` on in.npz; compares output_0 with `want`.
  void run_and_compare(const std::string& pkg, const graph::Initializer& want) {
    std::string out = inputs_.file("out.npz");
    CommandResult r = kiln("run " + quote(pkg) + " --inputs " + quote(inputs_.file("in.npz")) +
                           " --output " + quote(out));
    ASSERT_EQ(r.status, 0) << r.err;
    std::vector<runtime::NamedArray> outs = runtime::read_npz(out);
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].name, "output_0");
    expect_close(want, outs[0].array, pkg);
    fs::remove(out);
  }

  ScratchDir inputs_;
};

TEST_F(KilnBuildAndRun, LeavesExactlyTheRequestedFile) {
  graph::Initializer x = write_input();
  graph::Initializer want = reference(x, 0.25f);
  write_model("m.onnx", small_model());
  for (const char* format : {"tar", "so"}) {
    SCOPED_TRACE(format);
    std::string pkg = work_.file(std::string("model.") + format);
    CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg) +
                           " --input-shapes 'x:[1,3,7,9]' --output-format " + format);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("kiln build:"), std::string::npos) << r.out;
    run_and_compare(pkg, want);
  }
  expect_files({"m.onnx", "model.so", "model.tar"});
}

// An output that is one of the command's inputs (the same file through a
// symlink too) is refused before anything is written: the model, the
// package, the inputs and the database stay as they were.
TEST_F(KilnBuildAndRun, AnOutputThatIsAnInputIsRefused) {
  write_input();
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string model = work_.file("m.onnx"), pkg = work_.file("p.tar");
  std::string in = inputs_.file("in.npz");
  ASSERT_EQ(kiln("build " + quote(model) + " -o " + quote(pkg)).status, 0);
  std::string model_bytes = read_bytes(model), pkg_bytes = read_bytes(pkg),
              in_bytes = read_bytes(in);
  fs::create_symlink(model, work_.file("link.onnx"));
  for (const std::string& out : {model, work_.file("link.onnx")}) {
    CommandResult r = kiln("build " + quote(model) + " -o " + quote(out));
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("is the model"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("refusing to overwrite it"), std::string::npos) << r.err;
  }
  for (const std::string& out : {pkg, in}) {
    CommandResult r =
        kiln("run " + quote(pkg) + " --inputs " + quote(in) + " --output " + quote(out));
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find("refusing to overwrite it"), std::string::npos) << r.err;
  }
  std::string db = work_.file("r.db"), none = work_.file("none.jsonl");
  std::ofstream(none).close();
  ASSERT_EQ(kiln("records import " + quote(db) + " " + quote(none)).status, 0);
  std::string db_bytes = read_bytes(db);
  CommandResult r = kiln("records export " + quote(db) + " -o " + quote(db));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is the database"), std::string::npos) << r.err;
  EXPECT_EQ(read_bytes(model), model_bytes);
  EXPECT_EQ(read_bytes(pkg), pkg_bytes);
  EXPECT_EQ(read_bytes(in), in_bytes);
  EXPECT_EQ(read_bytes(db), db_bytes);
  EXPECT_EQ(kiln("records export " + quote(db) + " -o -").status, 0);  // still a database
}

// A read-only output is refused by every command that writes one, before any
// work: its bytes and its mode stay as they were (a temporary renamed into
// place would otherwise replace it with a writable file, even for root).
TEST_F(KilnBuildAndRun, AReadOnlyOutputIsRefusedAndKeepsItsBytesAndMode) {
  write_input();
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string model = work_.file("m.onnx"), pkg = work_.file("p.tar");
  std::string in = inputs_.file("in.npz");
  ASSERT_EQ(kiln("build " + quote(model) + " -o " + quote(pkg)).status, 0);
  std::string db = work_.file("r.db"), none = work_.file("none.jsonl");
  std::ofstream(none).close();
  ASSERT_EQ(kiln("records import " + quote(db) + " " + quote(none)).status, 0);
  const std::string ro = work_.file("read-only.out");
  const std::vector<std::string> commands = {
      "build " + quote(model) + " -o " + quote(ro),
      "build " + quote(model) + " --output-format so -o " + quote(ro),
      "run " + quote(pkg) + " --inputs " + quote(in) + " --output " + quote(ro),
      "records export " + quote(db) + " -o " + quote(ro),
      "tune " + quote(model) + " --tuning-log " + quote(db) + " --trials 1 --report " + quote(ro),
  };
  for (const std::string& cmd : commands) {
    SCOPED_TRACE(cmd);
    std::ofstream(ro) << "keep me";
    fs::permissions(ro, fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    CommandResult r = kiln(cmd);
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("'" + ro + "' exists and is read-only"), std::string::npos) << r.err;
    EXPECT_EQ(read_bytes(ro), "keep me");
    EXPECT_EQ(fs::status(ro).permissions(),
              fs::perms::owner_read | fs::perms::group_read | fs::perms::others_read);
    fs::permissions(ro, fs::perms::owner_write, fs::perm_options::add);
    fs::remove(ro);
  }
}

// Small usage errors get one clear message: an empty -o, --inputs naming a
// folder, a --repeat nobody waits for, kiln tasks with a missing database
// (no table header printed before the error).
TEST_F(KilnBuildAndRun, SmallUsageErrorsSayWhatIsWrong) {
  write_input();
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string model = work_.file("m.onnx"), pkg = work_.file("p.tar");
  CommandResult r = kiln("build " + quote(model) + " -o ''");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("-o needs a non-empty path"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(work_.file("m.tar")));
  ASSERT_EQ(kiln("build " + quote(model) + " -o " + quote(pkg)).status, 0);
  r = kiln("run " + quote(pkg) + " --inputs " + quote(work_.path().string()));
  EXPECT_EQ(r.status, 1);
  EXPECT_NE(r.err.find("is a directory, not an .npz file"), std::string::npos) << r.err;
  r = kiln("run " + quote(pkg) + " --inputs " + quote(inputs_.file("in.npz")) +
           " --repeat 1000000000 --print-time");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("is more than the 1000000 runs"), std::string::npos) << r.err;
  r = kiln("tasks " + quote(model) + " --tuning-log " + quote(work_.file("missing.db")));
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out.find("task"), std::string::npos) << r.out;
}

// A package for CPU features this machine lacks builds (cross-compiling is
// legitimate, and the build says the package cannot run here), but `kiln run`
// refuses it naming the missing features, before any kernel runs and without
// writing an output; `kiln tune` for that target refuses to measure (each
// candidate would die with SIGILL) and creates no database.
TEST_F(KilnBuildAndRun, PackageForFeaturesThisMachineLacksIsRefused) {
  std::string missing;
  for (const std::string& f : runtime::checkable_cpu_features(runtime::host_arch()))
    if (!runtime::host_has_cpu_feature(f) && missing.empty()) missing = f;
  if (missing.empty()) GTEST_SKIP() << "this machine has every CPU feature kiln checks";
  write_input();
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string target = "--target 'llvm -mcpu=x86-64-v3 -mattr=+" + missing + "'";
  for (const char* format : {"tar", "so"}) {
    SCOPED_TRACE(format);
    std::string pkg = work_.file(std::string("foreign.") + format);
    CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg) + " " +
                           target + " --output-format " + format);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("note: this machine cannot run the package; it lacks: " + missing),
              std::string::npos)
        << r.out;
    std::string out = inputs_.file("foreign_out.npz");
    r = kiln("run " + quote(pkg) + " --inputs " + quote(inputs_.file("in.npz")) + " --output " +
             quote(out));
    EXPECT_EQ(r.status, 1) << r.err;
    EXPECT_NE(r.err.find("cannot run on this machine: it needs CPU features this machine lacks: " +
                         missing),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
  std::string db = work_.file("foreign.db");
  CommandResult r = kiln("tune " + quote(work_.file("m.onnx")) + " --tuning-log " + quote(db) +
                         " --trials 2 " + target);
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("cannot measure kernels for"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("it lacks " + missing), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(db));
}

// `kiln target` prints the per-ISA row kiln derives kernels from; a mistyped
// CPU is one error with near matches and exit 1, not LLVM's warnings and an
// abort (also for kiln build).
TEST_F(KilnBuild, TargetCommandAndMistypedCpu) {
  CommandResult r = kiln("target --target 'llvm -mtriple=x86_64-linux-gnu -mcpu=haswell'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("isa class         x86_64-avx2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("256 bits, 8 fp32 lanes, 16 registers"), std::string::npos) << r.out;
  r = kiln("target --target 'llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("aarch64-neon"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("runs here         no (another architecture)"), std::string::npos) << r.out;
  r = kiln("target");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("runs here         yes"), std::string::npos) << r.out;
  write_model("m.onnx", small_model(0.25f, "1"));
  expect_build_fails("m.onnx", "--target 'llvm -mcpu=skylake_avx512'",
                     {"unknown -mcpu \"skylake_avx512\"", "did you mean: skylake-avx512"});
  r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(work_.file("x.tar")) +
           " --target 'llvm -mcpu=skylake_avx512'");
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err.find("not a recognized processor"), std::string::npos) << r.err;
}

// Cross-compiled packages: aarch64 (Raspberry Pi 4, 64-bit) and armv7 with
// NEON (32-bit) build, linked by ld.lld with no cross toolchain, hold kernels
// of that architecture (ELF machine), and `kiln run` here refuses them naming
// the architecture instead of failing in dlopen. The armv7 "gnueabihf" package
// is hard-float (ELF flag EF_ARM_ABI_FLOAT_HARD): a soft-float mod.so does not
// load into a Raspberry Pi OS process.
TEST_F(KilnBuildAndRun, ArmPackagesBuildAndAreRefusedHere) {
  if (std::system("command -v ld.lld >/dev/null 2>&1 || command -v ld.lld-16 >/dev/null 2>&1"))
    GTEST_SKIP() << "no ld.lld (Debian package lld) to link Arm packages";
  write_input();
  write_model("m.onnx", small_model(0.25f, "1"));
  struct Case {
    const char* target;
    int elf_class, elf_machine;
    const char* arch;
    uint32_t required_flags;  // bits of e_flags that must be set
  };
  for (const Case& c :
       {Case{"llvm -mtriple=aarch64-linux-gnu -mcpu=cortex-a72", 2, 183, "aarch64", 0},
        Case{"llvm -mtriple=armv7a-linux-gnueabihf -mcpu=cortex-a7 -mattr=+neon", 1, 40, "arm",
             0x400}}) {
    SCOPED_TRACE(c.target);
    std::string pkg = work_.file(std::string("arm_") + c.arch + ".so");
    CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg) +
                           " --output-format so --target '" + c.target + "'");
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.err.find("not a recognized"), std::string::npos) << r.err;
    std::string elf = read_bytes(pkg).substr(0, 64);
    ASSERT_EQ(elf.substr(0, 4),
              "\x7f"
              "ELF");
    EXPECT_EQ(elf[4], c.elf_class);
    EXPECT_EQ(static_cast<unsigned char>(elf[18]) | static_cast<unsigned char>(elf[19]) << 8,
              c.elf_machine);
    size_t flags_at = c.elf_class == 1 ? 36 : 48;  // e_flags in ELF32 / ELF64
    uint32_t flags = 0;
    for (int i = 3; i >= 0; --i) flags = flags << 8 | static_cast<unsigned char>(elf[flags_at + i]);
    EXPECT_EQ(flags & c.required_flags, c.required_flags) << std::hex << flags;
    std::string out = inputs_.file("arm_out.npz");
    r = kiln("run " + quote(pkg) + " --inputs " + quote(inputs_.file("in.npz")) + " --output " +
             quote(out));
    EXPECT_EQ(r.status, 1);
    EXPECT_NE(r.err.find(std::string("its kernels are built for ") + c.arch), std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(out));
  }
}

// The debug switches of README's "Debugging": KILN_DEBUG_GRAPH prints the
// graph after the named build steps (node, op, template, shape, layout,
// fused group), --dump-kernels and KILN_DUMP_KERNELS=1 write every kernel's
// LLVM IR and assembly, and the package is the same as without them.
TEST_F(KilnBuildAndRun, DebugGraphAndDumpKernels) {
  graph::Initializer x = write_input();
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string pkg = work_.file("m.tar"), dump = work_.file("kernels");
  CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg) +
                             " --dump-kernels " + quote(dump),
                         "KILN_DEBUG_GRAPH=layout,fusion");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("graph after layout"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("graph after fusion"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("graph after import"), std::string::npos) << "a step not asked for";
  EXPECT_NE(r.err.find("kiln.Template conv2d_NCHWc.x86"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(\[1,1,7,9,4\] float32 NCHW4c  group \d)")))
      << r.err;
  runtime::Package p = runtime::load_package(pkg);
  size_t kernels = 0;
  const nlohmann::json mod = nlohmann::json::parse(p.graph_json);
  for (const auto& k : mod.at("kernels")) {
    ++kernels;
    std::string f = k["func"];
    ASSERT_TRUE(fs::exists(dump + "/" + f + ".ll")) << f;
    ASSERT_TRUE(fs::exists(dump + "/" + f + ".s")) << f;
    std::ifstream ll(dump + "/" + f + ".ll");
    std::string text((std::istreambuf_iterator<char>(ll)), {});
    EXPECT_NE(text.find("define"), std::string::npos) << f << ".ll holds no function";
  }
  EXPECT_GT(kernels, 0u);
  run_and_compare(pkg, reference(x, 0.25f));

  std::string pkg2 = work_.file("n.tar");
  r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg2), "KILN_DUMP_KERNELS=1");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(fs::exists(pkg2 + ".kernels/kiln_k0.s"));
  EXPECT_TRUE(r.err.find("graph after") == std::string::npos) << "KILN_DEBUG_GRAPH unset";
}

// Without -o the package is written next to the model, named after it.
TEST_F(KilnBuildAndRun, DefaultOutputName) {
  graph::Initializer x = write_input();
  write_model("net.onnx", small_model(0.25f, "1"));
  CommandResult r = kiln("build " + quote(work_.file("net.onnx")));
  ASSERT_EQ(r.status, 0) << r.err;
  r = kiln("build " + quote(work_.file("net.onnx")) + " --output-format so");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_files({"net.onnx", "net.so", "net.tar"});
  run_and_compare(work_.file("net.tar"), reference(x, 0.25f));
  run_and_compare(work_.file("net.so"), reference(x, 0.25f));
}

// Configs given with --config are applied: random legal configs of the
// model's conv workload build, are reported as configured, and compute the
// same result.
TEST_F(KilnBuildAndRun, ConfigsFromFileAreApplied) {
  graph::Initializer x = write_input();
  graph::Initializer want = reference(x, 0.25f);
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string pkg = work_.file("m.tar");
  ASSERT_EQ(kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg)).status, 0);
  std::string key;
  nlohmann::json mod = nlohmann::json::parse(runtime::load_package(pkg).graph_json);
  for (const auto& k : mod.at("kernels"))
    if (!k.at("workload").get<std::string>().empty()) key = k.at("workload");
  ASSERT_FALSE(key.empty()) << "the conv of the model was built without a template: " << mod.dump();
  ops::Workload w = ops::Workload::parse(key);
  schedule::ConfigSpace space = ops::get_template(w.template_name).space(w);
  std::mt19937_64 rng(9);
  for (int i = 0; i < 3; ++i) {
    schedule::Config cfg = space.get(static_cast<int64_t>(rng() % space.size()));
    SCOPED_TRACE(cfg.to_json());
    std::string cfg_file = inputs_.file("cfg.jsonl");
    nlohmann::json line = {{"workload", key}, {"config", nlohmann::json::parse(cfg.to_json())}};
    write_bytes(cfg_file, line.dump() + "\n");
    CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg) +
                           " --config " + quote(cfg_file));
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("1 of 1 workloads configured"), std::string::npos) << r.out;
    run_and_compare(pkg, want);
  }
  expect_files({"m.onnx", "m.tar"});
}

// --channel-splits (every kernel shares its work by channel blocks: the
// A/B baseline of the build's parallel splits) computes the same output.
TEST_F(KilnBuildAndRun, ChannelSplitsComputeTheSameOutput) {
  graph::Initializer x = write_input();
  graph::Initializer want = reference(x, 0.25f);
  write_model("m.onnx", small_model(0.25f, "1"));
  std::string pkg = work_.file("m.tar");
  for (const char* flag : {"", " --channel-splits"}) {
    SCOPED_TRACE(flag);
    CommandResult r = kiln("build " + quote(work_.file("m.onnx")) + " -o " + quote(pkg) + flag);
    ASSERT_EQ(r.status, 0) << r.err;
    run_and_compare(pkg, want);
  }
  expect_files({"m.onnx", "m.tar"});
}

// A second build over an existing package replaces it; a failed one leaves
// it as it was.
TEST_F(KilnBuildAndRun, ReplacesOnSuccessKeepsOnFailure) {
  graph::Initializer x = write_input();
  write_model("a.onnx", small_model(0.25f, "1"));
  write_model("b.onnx", small_model(-0.5f, "1"));
  write_bytes(work_.file("bad.onnx"), "garbage");
  for (const char* format : {"tar", "so"}) {
    SCOPED_TRACE(format);
    std::string pkg = work_.file(std::string("out.") + format);
    std::string fmt = std::string(" --output-format ") + format + " -o " + quote(pkg);
    ASSERT_EQ(kiln("build " + quote(work_.file("a.onnx")) + fmt).status, 0);
    run_and_compare(pkg, reference(x, 0.25f));
    CommandResult r = kiln("build " + quote(work_.file("b.onnx")) + fmt);
    ASSERT_EQ(r.status, 0) << r.err;
    run_and_compare(pkg, reference(x, -0.5f));
    std::string before = read_bytes(pkg);
    // Failures at import, at --input-shapes, at --config, and at the output path.
    expect_one_error(kiln("build " + quote(work_.file("bad.onnx")) + fmt), {"bad.onnx"});
    expect_one_error(kiln("build " + quote(work_.file("a.onnx")) + fmt + " --input-shapes 'q:[1]'"),
                     {"'q'"});
    expect_one_error(
        kiln("build " + quote(work_.file("a.onnx")) + fmt + " --config " + quote(work_.file("x"))),
        {work_.file("x")});
    // A failure while linking the kernels (the linker is $CC).
    expect_one_error(kiln("build " + quote(work_.file("a.onnx")) + fmt, "CC=false"),
                     {"linking", pkg});
    EXPECT_EQ(read_bytes(pkg), before);
    run_and_compare(pkg, reference(x, -0.5f));
  }
  expect_files({"a.onnx", "b.onnx", "bad.onnx", "out.so", "out.tar"});
}

}  // namespace
}  // namespace kiln::test
