// The QDQ files kiln quantize writes, checked by their consumers: onnx's
// checker (full_check) and ONNX Runtime (the peers' venv, bench/.venv: see
// ort_peer.h), which runs the quantized model against the float one on
// held-out inputs (bench/models/quant_accuracy.py). The model is a tiny
// convnet trained for 60 steps at test time (make_convnet.py), so its
// weights and activations are distributed like a trained net's. Skipped,
// with the reason, without that venv's onnxruntime or without
// python3-torch/python3-onnx.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/target.h"
#include "ort_peer.h"

namespace {

namespace fs = std::filesystem;

const std::string kSource = KILN_SOURCE_DIR;
const std::string kPython = "/usr/bin/python3";

struct Result {
  int rc = -1;
  std::string out;
};

Result sh(const std::string& cmd, const fs::path& dir) {
  const std::string log = (dir / "log.txt").string();
  int rc = std::system((cmd + " >" + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream s;
  s << in.rdbuf();
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, s.str()};
}

class OrtQdq : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() /
                        ("kiln_quantize_ort_" + std::to_string(::getpid())));
    fs::create_directories(*dir_);
    if (!kiln::test::ort_missing().empty()) {
      skip_ = "ONNX Runtime: " + kiln::test::ort_missing();
      return;
    }
    if (sh(kPython + " -c 'import torch, onnx, numpy'", *dir_).rc != 0) {
      skip_ = kPython + " cannot import torch, onnx and numpy (scripts/install-deps.sh)";
      return;
    }
    Result r = sh(kPython + " " + kSource + "/tests/quantize/make_convnet.py " +
                      (*dir_ / "net").string() + " --steps 60 --calib 32 --eval 64",
                  *dir_);
    ASSERT_EQ(r.rc, 0) << r.out;
    std::printf("%s", r.out.c_str());
    r = sh(kPython + " " + kSource + "/tests/quantize/make_linear.py " +
               (*dir_ / "linear").string() + " --calib 16 --eval 16",
           *dir_);
    ASSERT_EQ(r.rc, 0) << r.out;
  }
  static void TearDownTestSuite() {
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
  }
  static std::string net(const std::string& file) { return (*dir_ / "net" / file).string(); }
  static std::string linear(const std::string& file) { return (*dir_ / "linear" / file).string(); }

  static fs::path* dir_;
  static std::string skip_;
};
fs::path* OrtQdq::dir_ = nullptr;
std::string OrtQdq::skip_;

// Why ORT's int8 outputs are no reference on this host, or "". Without VNNI,
// ORT's x86 kernels multiply u8 x s8 with vpmaddubsw, which saturates each
// pair of products at 16 bits: with full-range 8-bit weights the trained
// net's logits came out at cosine 0.64 against float on an AVX2 Zen 3, while
// kiln's int8 build equals the interpreter there byte for byte (7-bit
// weights, ReduceRangeWritesSevenBitWeightsOrtRuns, still run in ORT).
std::string ort_int8_unreliable() {
  const kiln::codegen::Target host = kiln::codegen::Target::host();
  if (host.arch() != "x86_64" || host.has_feature("avx512vnni") || host.has_feature("avxvnni"))
    return "";
  return "ORT's int8 kernels saturate u8 x s8 products at 16 bits without VNNI (vpmaddubsw); "
         "its outputs are a reference only on a host with avx512vnni or avxvnni";
}

// Placed before a test's ORT step: the kiln checks above it still run.
#define SKIP_WITHOUT_ORT_INT8_REFERENCE() \
  if (std::string why = ort_int8_unreliable(); !why.empty()) GTEST_SKIP() << why

// Every method's QDQ file passes the checker and, in ORT, stays within
// cosine 0.99 of the float model on every held-out input (measured: >= 0.9995).
TEST_F(OrtQdq, EveryMethodRunsInOrtCloseToFloat) {
  const std::string ort_why = ort_int8_unreliable();
  for (const std::string method : {"max", "percentile", "kl"}) {
    const std::string qdq = net("model." + method + ".onnx");
    Result r = sh(std::string(KILN_BINARY) + " quantize " + net("model.onnx") + " -o " + qdq +
                      " --calibration " + net("calib.npz") + " --calibrate " + method,
                  *dir_);
    ASSERT_EQ(r.rc, 0) << r.out;
    EXPECT_NE(r.out.find("4 of 4 Conv/MatMul/Gemm nodes quantized"), std::string::npos) << r.out;
    r = sh(kPython + " -c \"import onnx; onnx.checker.check_model(onnx.load('" + qdq +
               "'), full_check=True)\"",
           *dir_);
    EXPECT_EQ(r.rc, 0) << method << ": " << r.out;
    if (!ort_why.empty()) continue;  // the file is written and checked; ORT is skipped below
    r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
               " --qdq " + qdq + " --inputs " + net("eval.npz") +
               " --min-cosine 0.99 --min-top1 0.95",
           *dir_);
    EXPECT_EQ(r.rc, 0) << method << ": " << r.out;
    std::printf("%s: %s", method.c_str(), r.out.c_str());
  }
  if (!ort_why.empty()) GTEST_SKIP() << ort_why;
}

// --reduce-range: every int8 weight within [-64, 64] and each channel's largest
// at +-64 (ONNX Runtime's symmetric reduced range), the file passes the checker,
// and ORT runs it within cosine 0.99 of the float model (measured: see README).
TEST_F(OrtQdq, ReduceRangeWritesSevenBitWeightsOrtRuns) {
  const std::string qdq = net("model.r7.onnx");
  Result r = sh(std::string(KILN_BINARY) + " quantize " + net("model.onnx") + " -o " + qdq +
                    " --calibration " + net("calib.npz") + " --reduce-range",
                *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("weights in 7 bits"), std::string::npos) << r.out;
  r = sh(kPython +
             " -c \"import onnx, sys, numpy as np; from onnx import numpy_helper as nh; "
             "m = onnx.load('" +
             qdq +
             "'); onnx.checker.check_model(m, full_check=True); "
             "ws = [nh.to_array(t) for t in m.graph.initializer if t.data_type == 3 and "
             "t.name in [n.input[0] for n in m.graph.node if n.op_type == 'DequantizeLinear']]; "
             "ws = [w for w in ws if w.size > 1]; "
             "print(len(ws), max(int(np.abs(w).max()) for w in ws)); "
             "sys.exit(0 if len(ws) == 4 and all(int(np.abs(w).max()) == 64 for w in ws) "
             "else 1)\"",
         *dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
  r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
             " --qdq " + qdq + " --inputs " + net("eval.npz") +
             " --min-cosine 0.99 --min-top1 0.95",
         *dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
  std::printf("reduce-range: %s", r.out.c_str());
}

// --quantize-also: the residual Add, MaxPool and GlobalAveragePool get QDQ on
// their inputs and output too, and ORT still matches the float model.
TEST_F(OrtQdq, AddAndPoolingQuantizedToo) {
  const std::string qdq = net("model.also.onnx");
  Result r = sh(std::string(KILN_BINARY) + " quantize " + net("model.onnx") + " -o " + qdq +
                    " --calibration " + net("calib.npz") +
                    " --quantize-also Add,MaxPool,GlobalAveragePool",
                *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("7 of 7 Conv/MatMul/Gemm/Add/MaxPool/GlobalAveragePool nodes quantized"),
            std::string::npos)
      << r.out;
  // Every input of the Add and of both pools comes out of a DequantizeLinear.
  r = sh(kPython + " -c \"import onnx, sys; m = onnx.load('" + qdq +
             "'); prod = {o: n.op_type for n in m.graph.node for o in n.output}; "
             "ins = [i for n in m.graph.node if n.op_type in ('Add', 'MaxPool', "
             "'GlobalAveragePool') for i in n.input]; "
             "sys.exit(0 if len(ins) == 4 and all(prod.get(i) == 'DequantizeLinear' for i in ins) "
             "else 1)\"",
         *dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
  SKIP_WITHOUT_ORT_INT8_REFERENCE();
  r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
             " --qdq " + qdq + " --inputs " + net("eval.npz") +
             " --min-cosine 0.99 --min-top1 0.95",
         *dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
  std::printf("%s", r.out.c_str());
}

// kiln build --precision int8 against ONNX Runtime on the QDQ file kiln
// quantize writes with the same options: both follow ONNX's QDQ semantics, so
// the logits agree within one output quantization step (this net's logits
// scale is about 0.04; measured with the QDQ import branch merged: 0
// difference on all 64 inputs). Skipped while kiln cannot import QDQ models.
TEST_F(OrtQdq, KilnInt8MatchesOrtOnTheSameQdqModel) {
  SKIP_WITHOUT_ORT_INT8_REFERENCE();
  Result r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
                    " --runner kiln-vs-ort --calibration " + net("calib.npz") + " --inputs " +
                    net("eval.npz") + " --samples 16 --kiln " + KILN_BINARY + " --max-abs 0.05",
                *dir_);
  if (r.rc == 3 && r.out.find("kiln cannot import QDQ models yet") != std::string::npos)
    GTEST_SKIP() << "kiln build --precision int8 is not available yet: " << r.out;
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("max abs diff"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
}

// Linear layers on a rank-3 activation (MatMul -> Add(bias), make_linear.py):
// kiln quantize puts the Q after the bias Add, as ONNX Runtime's quantizer
// does (no MatMul output is quantized; the bias stays float), ORT runs the
// file, and kiln's int8 build of the same model (bias folded into the
// integer product) agrees with ORT within one step of the output's scale.
TEST_F(OrtQdq, LinearWithBiasKilnMatchesOrt) {
  const std::string qdq = linear("model.qdq.onnx");
  Result r = sh(std::string(KILN_BINARY) + " quantize " + linear("model.onnx") + " -o " + qdq +
                    " --calibration " + linear("calib.npz"),
                *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("3 of 3 Conv/MatMul/Gemm nodes quantized"), std::string::npos) << r.out;
  // Every MatMul is read by its Add alone; prints the output's scale.
  r = sh(kPython + " -c \"import onnx, sys; from onnx import numpy_helper as nh; m = onnx.load('" +
             qdq +
             "'); g = m.graph; prod = {o: n for n in g.node for o in n.output}; "
             "readers = lambda t: [n for n in g.node if t in n.input]; "
             "mms = [n for n in g.node if n.op_type == 'MatMul']; "
             "ok = len(mms) == 3 and all([r.op_type for r in readers(n.output[0])] == ['Add'] "
             "for n in mms); "
             "inits = {t.name: nh.to_array(t) for t in g.initializer}; "
             "print(float(inits[prod['y'].input[1]])); sys.exit(0 if ok else 1)\"",
         *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  const double y_scale = std::stod(r.out);
  ASSERT_GT(y_scale, 0);
  SKIP_WITHOUT_ORT_INT8_REFERENCE();
  r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + linear("model.onnx") +
             " --runner kiln-vs-ort --calibration " + linear("calib.npz") + " --inputs " +
             linear("eval.npz") + " --samples 16 --kiln " + KILN_BINARY + " --max-abs " +
             std::to_string(1.0001 * y_scale),
         *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("max abs diff"), std::string::npos) << r.out;
  std::printf("output scale %g: %s", y_scale, r.out.c_str());
}

// kiln's own int8 package against kiln's own float package on the trained
// net: the accuracy goals of the issue (cosine >= 0.99, top-1 >= 95 %) hold
// for weights distributed like a trained net's, unlike the zoo's random ones
// whose logits are near ties (bench/models/results/int8-accuracy-*.md).
// Measured: cosine >= 0.9998, top-1 100 % on the 64 held-out inputs.
TEST_F(OrtQdq, KilnInt8AgainstKilnFloatOnTrainedNet) {
  Result r =
      sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
             " --runner kiln --calibration " + net("calib.npz") + " --inputs " + net("eval.npz") +
             " --samples 64 --kiln " + KILN_BINARY + " --min-cosine 0.99 --min-top1 0.95",
         *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("(64 inputs, kiln)"), std::string::npos) << r.out;
  std::printf("%s", r.out.c_str());
}

// The folder form of --calibration and --keep-float: the kept Conv has no
// QDQ on its weight, and the model still runs in ORT.
TEST_F(OrtQdq, FolderCalibrationAndKeepFloat) {
  const std::string qdq = net("model.keep.onnx");
  Result r =
      sh(std::string(KILN_BINARY) + " quantize " + net("model.onnx") + " -o " + qdq +
             " --calibration " + net("calib_dir") + " --keep-float /features/features.4/Conv",
         *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("3 of 4"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 calibration samples"), std::string::npos) << r.out;
  r = sh(kPython + " -c \"import onnx; m = onnx.load('" + qdq +
             "'); c = [n for n in m.graph.node if n.name == '/features/features.4/Conv'][0]; "
             "import sys; sys.exit(0 if not any(i.endswith('_dequantized') for i in c.input[1:]) "
             "else 1)\"",
         *dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
  SKIP_WITHOUT_ORT_INT8_REFERENCE();
  r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
             " --qdq " + qdq + " --inputs " + net("eval.npz") + " --min-cosine 0.99",
         *dir_);
  EXPECT_EQ(r.rc, 0) << r.out;
}

// quant_accuracy.py's smoke run: generated inputs, its own kiln quantize call.
TEST_F(OrtQdq, AccuracyToolSmoke) {
  Result r = sh(kPython + " " + kSource + "/bench/models/quant_accuracy.py " + net("model.onnx") +
                    " --calibration " + net("calib.npz") + " --samples 20 --kiln " + KILN_BINARY,
                *dir_);
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("logits [1, 10]: cosine mean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("top-1 agreement"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(20 inputs, ort)"), std::string::npos) << r.out;
}

}  // namespace
