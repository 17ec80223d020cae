// Shared helpers of the driver tests: a temporary directory, random inputs
// for an imported graph, and the end-to-end check (import -> build ->
// package -> GraphExecutor against graph::run_graph on the imported graph).
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "driver/build.h"
#include "driver/package_writer.h"
#include "frontend/onnx_builder.h"
#include "frontend/onnx_import.h"
#include "graph/interpreter.h"
#include "runtime/graph_executor.h"

namespace kiln::test {

namespace fs = std::filesystem;

// A fresh directory per object, removed with it.
class ScratchDir {
 public:
  ScratchDir() {
    static int n = 0;
    path_ = fs::temp_directory_path() /
            ("kiln-driver-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++));
    fs::create_directories(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const fs::path& path() const { return path_; }
  // Names of the entries in the directory, sorted.
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path_)) out.push_back(e.path().filename());
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  fs::path path_;
};

inline void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// ---- ONNX building helpers beyond OnnxBuilder -------------------------------

inline void attr_floats(onnx::NodeProto* n, const std::string& name, const std::vector<float>& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

inline void attr_string(onnx::NodeProto* n, const std::string& name, const std::string& v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}

// A graph output of rank `rank` with unknown axes (shape inference fills
// them in; the ONNX checker wants a shape field on graph outputs).
// An initializer of any element type from raw values (uint8/int8 zero
// points and weights of the int8 tests: OnnxBuilder writes float32 and int64).
template <typename T>
void init_raw(OnnxBuilder& b, const std::string& name, const std::vector<int64_t>& dims, int elem,
              const std::vector<T>& v) {
  auto* t = b.graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(elem);
  for (int64_t d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T)));
}

inline void output_any(OnnxBuilder& b, const std::string& name, int rank,
                       int elem = onnx::TensorProto::FLOAT) {
  auto* v = b.graph()->add_output();
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(elem);
  for (int i = 0; i < rank; ++i) tt->mutable_shape()->add_dim();
}

inline std::vector<float> uniform(size_t n, std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline size_t numel(const std::vector<int64_t>& shape) {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// A float initializer of `shape` with uniform values in [lo, hi).
inline void init_random(OnnxBuilder& b, const std::string& name, const std::vector<int64_t>& shape,
                        std::mt19937& rng, float lo = -1.f, float hi = 1.f) {
  b.init_f32(name, shape, uniform(numel(shape), rng, lo, hi));
}

// Conv weights scaled so that activations keep a magnitude near one.
inline void init_conv_weight(OnnxBuilder& b, const std::string& name,
                             const std::vector<int64_t>& shape, std::mt19937& rng) {
  size_t fan_in = numel(shape) / static_cast<size_t>(shape[0]);
  float s = 1.5f / std::sqrt(static_cast<float>(fan_in));
  init_random(b, name, shape, rng, -s, s);
}

// A BatchNormalization node `name` on `x` (c channels) writing `y`, with
// random scale, bias, mean and a positive variance.
inline void batch_norm(OnnxBuilder& b, const std::string& name, const std::string& x,
                       const std::string& y, int64_t c, std::mt19937& rng) {
  init_random(b, name + ".scale", {c}, rng, 0.5f, 1.5f);
  init_random(b, name + ".bias", {c}, rng, -0.5f, 0.5f);
  init_random(b, name + ".mean", {c}, rng, -0.2f, 0.2f);
  init_random(b, name + ".var", {c}, rng, 0.5f, 2.f);
  auto* n = b.node("BatchNormalization", name,
                   {x, name + ".scale", name + ".bias", name + ".mean", name + ".var"}, {y});
  OnnxBuilder::attr_float(n, "epsilon", 1e-5f);
}

// A Conv node with weight `name.w` [cout, cin/group, k0, k1] and an optional bias.
struct ConvSpec {
  int64_t cin, cout, k0 = 3, k1 = 3, stride = 1, pad = 1, group = 1, dilation = 1;
  bool bias = true;
};

inline onnx::NodeProto* conv(OnnxBuilder& b, const std::string& name, const std::string& x,
                             const std::string& y, const ConvSpec& s, std::mt19937& rng) {
  init_conv_weight(b, name + ".w", {s.cout, s.cin / s.group, s.k0, s.k1}, rng);
  std::vector<std::string> ins = {x, name + ".w"};
  if (s.bias) {
    init_random(b, name + ".b", {s.cout}, rng, -0.3f, 0.3f);
    ins.push_back(name + ".b");
  }
  auto* n = b.node("Conv", name, ins, {y});
  OnnxBuilder::attr_ints(n, "kernel_shape", {s.k0, s.k1});
  OnnxBuilder::attr_ints(n, "strides", {s.stride, s.stride});
  OnnxBuilder::attr_ints(n, "pads", {s.pad, s.pad, s.pad, s.pad});
  OnnxBuilder::attr_ints(n, "dilations", {s.dilation, s.dilation});
  if (s.group != 1) OnnxBuilder::attr_int(n, "group", s.group);
  return n;
}

// ---- random inputs and comparison -------------------------------------------

// How to draw an input: floats uniform in [lo, hi), integers uniform in
// [lo, hi) (as integers), bools fair coins.
struct InputRange {
  double lo = -1, hi = 1;
};

inline graph::Initializer random_input(const graph::TensorType& t, const InputRange& r,
                                       std::mt19937& rng) {
  graph::Initializer init;
  init.type = t;
  size_t n = numel(t.shape);
  init.data.resize(n * graph::dtype_size(t.dtype));
  if (t.dtype == "float32") {
    std::vector<float> v = uniform(n, rng, static_cast<float>(r.lo), static_cast<float>(r.hi));
    std::memcpy(init.data.data(), v.data(), init.data.size());
  } else if (t.dtype == "int64") {
    std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(r.lo),
                                             static_cast<int64_t>(r.hi) - 1);
    std::vector<int64_t> v(n);
    for (int64_t& x : v) x = d(rng);
    std::memcpy(init.data.data(), v.data(), init.data.size());
  } else if (t.dtype == "int32") {
    std::uniform_int_distribution<int32_t> d(static_cast<int32_t>(r.lo),
                                             static_cast<int32_t>(r.hi) - 1);
    std::vector<int32_t> v(n);
    for (int32_t& x : v) x = d(rng);
    std::memcpy(init.data.data(), v.data(), init.data.size());
  } else if (t.dtype == "bool") {
    for (uint8_t& x : init.data) x = static_cast<uint8_t>(rng() & 1);
  } else {
    ADD_FAILURE() << "no random generator for dtype " << t.dtype;
  }
  return init;
}

// Compares one output: floats within a relative error of 1e-5 (against
// max(|want|, 1), so values that cancel to near zero are judged on the
// scale of the inputs), every other dtype exactly.
inline void expect_close(const graph::Initializer& want, const runtime::NDArray& got,
                         const std::string& what, double rel = 1e-5) {
  ASSERT_EQ(got.shape(), want.type.shape) << what;
  ASSERT_EQ(got.dtype().str(), want.type.dtype) << what;
  ASSERT_EQ(static_cast<size_t>(got.nbytes()), want.data.size()) << what;
  if (want.type.dtype != "float32") {
    size_t es = graph::dtype_size(want.type.dtype);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < want.data.size() / es; ++i)
      if (std::memcmp(want.data.data() + i * es, static_cast<const uint8_t*>(got.data()) + i * es,
                      es) != 0 &&
          bad++ == 0)
        first = i;
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements differ, first at flat index " << first;
    return;
  }
  std::vector<float> w = want.as<float>();
  const float* g = got.data_as<float>();
  size_t bad = 0, worst_i = 0;
  double worst = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    double err = std::abs(static_cast<double>(g[i]) - w[i]) / std::max(1.0, std::abs(double(w[i])));
    if (!(err <= rel)) ++bad;  // NaN counts as bad
    if (!(err <= worst)) {
      worst = std::isnan(err) ? INFINITY : err;
      worst_i = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << w.size()
                     << " elements off; worst at flat index " << worst_i << ": got " << g[worst_i]
                     << ", want " << w[worst_i] << " (rel err " << worst << ")";
}

inline runtime::NDArray to_ndarray(const graph::Initializer& init) {
  runtime::NDArray a =
      runtime::NDArray::empty(init.type.shape, runtime::DType::parse(init.type.dtype));
  if (!init.data.empty()) std::memcpy(a.data(), init.data.data(), init.data.size());
  return a;
}

// ---- the end-to-end check ------------------------------------------------------

struct E2EOptions {
  frontend::InputShapes input_shapes;
  std::map<std::string, InputRange> ranges;  // by input name; default [-1, 1)
  unsigned seed = 1;
  double rel = 1e-5;
};

struct E2EResult {
  size_t graph_nodes = 0;  // nodes of the imported graph
  nlohmann::json mod;      // mod.json of the build
};

// Imports `b`, runs the imported graph with the interpreter, builds it, writes
// it as a tar and as a self-contained .so, runs both with GraphExecutor and
// compares every output.
inline E2EResult check_end_to_end(const OnnxBuilder& b, const std::string& name,
                                  const E2EOptions& opt = {}) {
  E2EResult result;
  ScratchDir dir;
  std::string onnx_path = dir.file(name + ".onnx");
  write_bytes(onnx_path, b.bytes());
  graph::Graph g = frontend::import_onnx(onnx_path, opt.input_shapes);
  result.graph_nodes = g.nodes.size();

  std::mt19937 rng(opt.seed);
  std::map<std::string, graph::Initializer> inputs;
  for (const auto& in : g.inputs) {
    auto it = opt.ranges.find(in.name);
    inputs[in.name] =
        random_input(in.type, it == opt.ranges.end() ? InputRange{} : it->second, rng);
  }
  std::map<std::string, graph::Initializer> want = graph::run_graph(g, inputs);
  // A constant output would let a wrong kernel pass: every float output must
  // take more than one value.
  for (const auto& [out_name, value] : want) {
    if (value.type.dtype != "float32") continue;
    std::vector<float> v = value.as<float>();
    EXPECT_TRUE(std::any_of(v.begin(), v.end(), [&](float x) { return x != v[0]; }))
        << name << ": reference output '" << out_name << "' is constant";
  }

  driver::BuildOptions options;
  driver::BuiltModule m = driver::build_module(g, options);
  result.mod = nlohmann::json::parse(m.graph_json);
  for (auto format : {driver::PackageFormat::kTar, driver::PackageFormat::kSharedLibrary}) {
    const bool tar = format == driver::PackageFormat::kTar;
    std::string pkg = dir.file(name + (tar ? ".tar" : ".so"));
    driver::write_package(m, options.target, pkg, format);
    runtime::GraphExecutor ex = runtime::GraphExecutor::load(pkg);
    EXPECT_EQ(ex.inputs().size(), g.inputs.size());
    for (const auto& [in_name, value] : inputs) ex.set_input(in_name, to_ndarray(value));
    ex.run();
    EXPECT_EQ(ex.outputs().size(), g.outputs.size());
    for (size_t i = 0; i < g.outputs.size() && i < ex.outputs().size(); ++i) {
      SCOPED_TRACE(name + (tar ? " (tar)" : " (so)") + " output '" + g.outputs[i] + "'");
      expect_close(want.at(g.outputs[i]), ex.output(i), g.outputs[i], opt.rel);
    }
  }
  return result;
}

// ---- running the kiln binary ----------------------------------------------------

struct CommandResult {
  int status = -1;  // exit status, -1 when killed by a signal
  std::string out, err;
};

// Runs the kiln binary with `args` (already shell-quoted) under /bin/sh with
// TMPDIR=`tmp` (so that temporary files it leaves behind can be seen),
// capturing stdout and stderr in `capture`.
// `env` is prepended to the command ("CC=false").
inline CommandResult run_kiln(const std::string& args, const ScratchDir& tmp,
                              const ScratchDir& capture, const std::string& env = "") {
  std::string out = capture.file("stdout"), err = capture.file("stderr");
  std::string cmd = env + " TMPDIR='" + tmp.path().string() + "' '" + KILN_BINARY + "' " + args +
                    " >'" + out + "' 2>'" + err + "'";
  int status = std::system(cmd.c_str());
  CommandResult r;
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

inline std::string quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace kiln::test
