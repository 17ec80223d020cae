// DFT, STFT and MelWeightMatrix built whole: lower_signal's Gather /
// Transpose / MatMul-with-twiddles nodes compiled (the dense templates) and
// run by the executor, against the registry's reference (graph::run_graph),
// over real and complex inputs, axes, inverse, onesided, dft_length padding
// and cutting, windows constant and fed at run time; the executor's host
// path (a frame_step or dft_length fed at run time); MelWeightMatrix folded.
#include <gtest/gtest.h>

#include "driver_harness.h"
#include "graph/op_registry.h"

namespace kiln::test {
namespace {

std::vector<std::string> dims_of(const std::vector<int64_t>& shape) {
  std::vector<std::string> d;
  for (int64_t v : shape) d.push_back(std::to_string(v));
  return d;
}

struct DftCase {
  std::vector<int64_t> shape;
  int64_t axis;
  bool inverse, onesided;
  int64_t dft_length;  // 0: none
};

TEST(Signal, DftCompiledMatchesReference) {
  const std::vector<DftCase> cases = {
      {{1, 10, 10, 1}, 1, false, false, 0},  // ONNX's test_dft
      {{1, 10, 10, 1}, 2, false, false, 0},  // test_dft_axis
      {{1, 10, 10, 2}, 1, true, false, 0},   // test_dft_inverse
      {{2, 16, 1}, 1, false, true, 0},      {{3, 33, 2}, 1, false, false, 0},
      {{2, 7, 5, 1}, 1, false, true, 12},   // zero-padded to 12, onesided
      {{2, 20, 3, 2}, 1, true, false, 8},   // cut to the first 8
      {{4, 3, 9, 1}, -2, false, false, 0},  // a negative axis
      {{5, 6, 2}, 0, false, false, 0},      // over the batch axis
      {{1, 64, 2}, 1, false, true, 0},      // complex, onesided
  };
  for (const DftCase& c : cases) {
    SCOPED_TRACE("DFT " + graph::shape_str(c.shape) + " axis " + std::to_string(c.axis) +
                 (c.inverse ? " inverse" : "") + (c.onesided ? " onesided" : "") + " dft_length " +
                 std::to_string(c.dft_length));
    OnnxBuilder b(17);
    b.input("x", dims_of(c.shape));
    std::vector<std::string> ins = {"x"};
    if (c.dft_length > 0) {
      b.init_i64("n", {}, {c.dft_length});
      ins.push_back("n");
    }
    output_any(b, "y", static_cast<int>(c.shape.size()));
    auto* n = b.node("DFT", "dft", ins, {"y"});
    OnnxBuilder::attr_int(n, "axis", c.axis);
    OnnxBuilder::attr_int(n, "inverse", c.inverse);
    OnnxBuilder::attr_int(n, "onesided", c.onesided);
    E2EOptions opt;
    opt.rel = 1e-4;
    E2EResult r = check_end_to_end(b, "dft", opt);
    // A dense product (the dense template): the DFT never runs as a scalar loop.
    bool dense = false;
    for (const auto& k : r.mod["kernels"])
      dense |= k["workload"].get<std::string>().rfind("dense", 0) == 0;
    EXPECT_TRUE(dense) << r.mod["kernels"].dump();
  }
}

struct StftCase {
  std::vector<int64_t> signal;
  int64_t step, frame;
  enum { kNone, kConstant, kRunTime } window;
  bool frame_length_input, onesided;
};

TEST(Signal, StftCompiledMatchesReference) {
  const std::vector<StftCase> cases = {
      {{1, 128, 1}, 8, 16, StftCase::kNone, true, true},  // ONNX's test_stft, constants
      {{1, 128, 1}, 8, 16, StftCase::kConstant, false, true},
      {{2, 100, 1}, 7, 20, StftCase::kRunTime, true, true},
      {{2, 50, 2}, 5, 12, StftCase::kConstant, true, false},
      {{1, 61, 2}, 3, 9, StftCase::kRunTime, false, false},
      {{3, 40, 1}, 40, 40, StftCase::kNone, true, true},  // one frame
      {{1, 1600, 1}, 160, 400, StftCase::kConstant, true, true},
  };
  std::mt19937 rng(63);
  for (const StftCase& c : cases) {
    SCOPED_TRACE("STFT " + graph::shape_str(c.signal) + " step " + std::to_string(c.step) +
                 " frame " + std::to_string(c.frame) + " window " + std::to_string(c.window));
    OnnxBuilder b(17);
    b.input("signal", dims_of(c.signal));
    b.init_i64("step", {}, {c.step});
    std::string window, length;
    if (c.window == StftCase::kConstant) {
      init_random(b, "window", {c.frame}, rng, 0.f, 1.f);
      window = "window";
    } else if (c.window == StftCase::kRunTime) {
      b.input("window", {std::to_string(c.frame)});
      window = "window";
    }
    if (c.frame_length_input || window.empty()) {
      b.init_i64("length", {}, {c.frame});
      length = "length";
    }
    std::vector<std::string> ins = {"signal", "step", window};
    if (!length.empty()) ins.push_back(length);
    output_any(b, "y", 4);
    OnnxBuilder::attr_int(b.node("STFT", "stft", ins, {"y"}), "onesided", c.onesided);
    E2EOptions opt;
    opt.rel = 1e-4;
    check_end_to_end(b, "stft", opt);
  }
}

// Builds `b` (whose one output is made by `node` alone, in the executor's
// host region: a shape input fed at run time), runs it on `inputs` and
// compares with the registry's reference evaluation of `node`.
void check_host_node(const OnnxBuilder& b, const graph::Node& node,
                     const std::vector<std::pair<std::string, graph::Initializer>>& inputs) {
  ScratchDir dir;
  const std::string onnx_path = dir.file("host.onnx"), pkg = dir.file("host.tar");
  write_bytes(onnx_path, b.bytes());
  graph::Graph g = frontend::import_onnx(onnx_path);
  ASSERT_EQ(g.host.nodes.size(), 1u);
  EXPECT_EQ(g.host.nodes[0].op_type, node.op_type);
  driver::BuildOptions options;
  driver::BuiltModule m = driver::build_module(g, options);
  driver::write_package(m, options.target, pkg, driver::PackageFormat::kTar);
  runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
  std::vector<const graph::Initializer*> ins;  // the node's inputs in order; "" omitted
  for (const auto& [name, value] : inputs) {
    if (!name.empty()) ex.set_input(name, to_ndarray(value));
    ins.push_back(name.empty() ? nullptr : &value);
  }
  ex.run();
  std::vector<graph::Initializer> want = graph::get_op(node.op_type).evaluate(node, ins);
  expect_close(want.at(0), ex.output(0), node.op_type, 1e-5);
}

graph::Initializer scalar_input(int64_t v) {
  graph::Initializer t;
  t.type = {"int64", {}};
  t.data.resize(8);
  std::memcpy(t.data.data(), &v, 8);
  return t;
}

// frame_step and frame_length fed at run time (ONNX's test_stft): the output
// shape depends on them, so STFT runs in the executor (runtime/host_ops).
TEST(Signal, StftWithRunTimeStepRunsInTheExecutor) {
  std::mt19937 rng(64);
  for (bool window : {false, true}) {
    SCOPED_TRACE(window ? "window" : "frame_length");
    OnnxBuilder b(17);
    b.input("signal", {"2", "64", "1"});
    b.input("step", {}, onnx::TensorProto::INT64);
    if (window)
      b.input("window", {"16"});
    else
      b.input("length", {}, onnx::TensorProto::INT64);
    output_any(b, "y", 4);
    std::vector<std::string> ins = {"signal", "step", window ? "window" : ""};
    if (!window) ins.push_back("length");
    b.node("STFT", "stft", ins, {"y"});
    graph::Node n;
    n.op_type = "STFT";
    n.name = "stft";
    std::vector<std::pair<std::string, graph::Initializer>> feeds = {
        {"signal", random_input({"float32", {2, 64, 1}}, {}, rng)}, {"step", scalar_input(5)}};
    if (window)
      feeds.push_back({"window", random_input({"float32", {16}}, {0, 1}, rng)});
    else
      feeds.insert(feeds.end(), {{"", graph::Initializer{}}, {"length", scalar_input(16)}});
    check_host_node(b, n, feeds);  // [2, 10, 9, 2]
  }
}

TEST(Signal, DftWithRunTimeLengthRunsInTheExecutor) {
  std::mt19937 rng(65);
  OnnxBuilder b(17);
  b.input("x", {"3", "10", "2"});
  b.input("n", {}, onnx::TensorProto::INT64);
  output_any(b, "y", 3);
  OnnxBuilder::attr_int(b.node("DFT", "dft", {"x", "n"}, {"y"}), "inverse", 1);
  graph::Node n;
  n.op_type = "DFT";
  n.name = "dft";
  n.attrs["inverse"] = int64_t{1};
  for (int64_t len : {13, 6}) {  // zero-padded, cut
    SCOPED_TRACE(len);
    check_host_node(
        b, n, {{"x", random_input({"float32", {3, 10, 2}}, {}, rng)}, {"n", scalar_input(len)}});
  }
}

// A log-mel front end: |STFT|^2 by a constant MelWeightMatrix (folded: no
// kernel of its own), as audio models export it.
TEST(Signal, MelSpectrogramFoldsTheMelMatrix) {
  OnnxBuilder b(17);
  b.input("signal", {"1", "400", "1"});
  b.init_i64("step", {}, {40});
  b.init_i64("length", {}, {64});
  b.init_i64("mel_bins", {}, {10});
  b.init_i64("dft_length", {}, {64});
  b.init_i64("rate", {}, {16000});
  b.init_f32("lo", {}, {20.f});
  b.init_f32("hi", {}, {8000.f});
  b.init_i64("power_axes", {1}, {3});
  output_any(b, "y", 3);
  b.node("STFT", "stft", {"signal", "step", "", "length"}, {"spec"});
  b.node("Mul", "sq", {"spec", "spec"}, {"spec2"});
  OnnxBuilder::attr_int(b.node("ReduceSum", "power", {"spec2", "power_axes"}, {"p4"}), "keepdims",
                        0);
  b.node("MelWeightMatrix", "mel", {"mel_bins", "dft_length", "rate", "lo", "hi"}, {"w"});
  b.node("MatMul", "to_mel", {"p4", "w"}, {"y"});
  E2EOptions opt;
  opt.rel = 1e-4;
  E2EResult r = check_end_to_end(b, "mel", opt);
  for (const auto& k : r.mod["kernels"])
    for (const auto& op : k["op_types"]) EXPECT_NE(op, "MelWeightMatrix");
}

}  // namespace
}  // namespace kiln::test
