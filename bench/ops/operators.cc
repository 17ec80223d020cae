// kiln_bench_ops: the operators outside the templates (issue 12, item 4) at
// the shapes of the encoder (d 256, 4 heads, seq 128, ffn 1024) and of
// ResNet-18 / SqueezeNet, and the indexing, ordering and trigonometric
// operators at the shapes of a LLaMA-style decoder's rotary tables and
// sampling and of a classifier's top 5, GridSample and RoiAlign at a spatial
// transformer's and a detector box head's shapes, and an audio front end's
// STFT and DFT (one second at 16 kHz, 400- and 512-sample frames every
// 10 ms), each built by the whole kiln build as a one-op (or one-pattern)
// graph, run by the runtime's executor, checked against the reference
// interpreter (integer outputs exactly), and timed
// (median of runs, the executor's default threads). Each line prints ms,
// GB/s (graph inputs + outputs, int64 indices at 8 bytes) and GFLOP/s
// (a nominal count per element, named in the table), and each against the
// peak measured in the same run that bounds it:
//  - memory: a 2-thread memcpy over the same number of bytes (read + written)
//    as the operator, warm like the operator (the same cache level), the best
//    of repeated samples;
//  - compute: independent FMA chains at the widest vector width (bench/peak.h).
// "of peak" is the larger of the two fractions: the bound that applies.
//
//   kiln_bench_ops [--smoke] [--filter TEXT]
//     --smoke: tiny shapes, few runs, results checked (every run checks them)
//     --filter: only the cases whose name contains TEXT
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../peak.h"
#include "driver/build.h"
#include "graph/graph.h"
#include "graph/interpreter.h"
#include "graph/op_registry.h"
#include "runtime/c_runtime_api.h"
#include "runtime/graph_executor.h"

namespace {

using Clock = std::chrono::steady_clock;
using kiln::graph::Attribute;
using kiln::graph::Graph;
using kiln::graph::Initializer;
using kiln::graph::TensorType;
using Ints = std::vector<int64_t>;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Initializer random_f32(const Ints& shape, std::mt19937_64& rng, float lo, float hi) {
  Initializer t;
  t.type = {"float32", shape};
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : v) x = dist(rng);
  t.data.resize(v.size() * sizeof(float));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

Initializer int64_tensor(const Ints& shape, const std::vector<int64_t>& v) {
  Initializer t;
  t.type = {"int64", shape};
  t.data.resize(v.size() * sizeof(int64_t));
  std::memcpy(t.data.data(), v.data(), t.data.size());
  return t;
}

Initializer scalar(float v) {
  Initializer t;
  t.type = {"float32", {}};
  t.data.resize(sizeof(float));
  std::memcpy(t.data.data(), &v, sizeof v);
  return t;
}

// A graph made node by node; every value's type comes from evaluating its
// node on the sample inputs (the registry's reference), so value_info is exact.
class Builder {
 public:
  explicit Builder(uint64_t seed) : rng_(seed) {}

  std::string input(const std::string& name, const Ints& shape, float lo, float hi) {
    Initializer v = random_f32(shape, rng_, lo, hi);
    g_.inputs.push_back({name, v.type});
    g_.value_info[name] = v.type;
    samples_[name] = std::move(v);
    return name;
  }
  // An int64 input (indices), its sample values given.
  std::string input(const std::string& name, Initializer v) {
    g_.inputs.push_back({name, v.type});
    g_.value_info[name] = v.type;
    samples_[name] = std::move(v);
    return name;
  }
  std::string constant(const std::string& name, Initializer v) {
    g_.value_info[name] = v.type;
    g_.initializers[name] = v;
    samples_[name] = std::move(v);
    return name;
  }
  std::string weight(const std::string& name, const Ints& shape) {
    return constant(name, random_f32(shape, rng_, -1, 1));
  }
  std::string node(const std::string& op, const std::vector<std::string>& inputs,
                   std::map<std::string, Attribute> attrs = {}) {
    return node_outputs(op, inputs, std::move(attrs))[0];
  }
  // Every output of the node (TopK's values and indices).
  std::vector<std::string> node_outputs(const std::string& op,
                                        const std::vector<std::string>& inputs,
                                        std::map<std::string, Attribute> attrs = {}) {
    kiln::graph::Node n;
    n.op_type = op;
    n.name = op + "_" + std::to_string(g_.nodes.size());
    n.inputs = inputs;
    n.attrs = std::move(attrs);
    std::vector<const Initializer*> in;
    for (const std::string& i : inputs) in.push_back(&samples_.at(i));
    std::vector<Initializer> out = kiln::graph::get_op(op).evaluate(n, in);
    for (size_t k = 0; k < out.size(); ++k) {
      n.outputs.push_back(k == 0 ? n.name : n.name + ".out" + std::to_string(k));
      g_.value_info[n.outputs[k]] = out[k].type;
      samples_[n.outputs[k]] = std::move(out[k]);
    }
    g_.nodes.push_back(n);
    return n.outputs;
  }
  Graph finish(const std::string& output) { return finish(std::vector<std::string>{output}); }
  Graph finish(const std::vector<std::string>& outputs) {
    g_.outputs = outputs;
    return g_;
  }
  const Initializer& sample(const std::string& v) const { return samples_.at(v); }

 private:
  std::mt19937_64 rng_;
  Graph g_;
  std::map<std::string, Initializer> samples_;
};

struct Case {
  std::string name;       // what and at which shape
  std::string flops_per;  // the nominal count, printed
  double flops = 0;       // per run
  Graph graph;
  std::map<std::string, Initializer> inputs;
};

int64_t elements(const Ints& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Case softmax(const Ints& s) {
  Builder b(1);
  std::string x = b.input("x", s, -8, 8);
  std::string y = b.node("Softmax", {x}, {{"axis", int64_t{-1}}});
  // max, subtract, exp (counted as one), sum, divide.
  return {"Softmax " + kiln::graph::shape_str(s),
          "5/elem",
          5.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case layer_norm(const Ints& s) {
  Builder b(2);
  std::string x = b.input("x", s, -2, 2);
  std::string g = b.weight("scale", {s.back()});
  std::string c = b.weight("bias", {s.back()});
  std::string y = b.node("LayerNormalization", {x, g, c}, {{"axis", int64_t{-1}}});
  // sum, subtract + square + sum, subtract, scale, shift, multiply by 1/std.
  return {"LayerNormalization " + kiln::graph::shape_str(s),
          "8/elem",
          8.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// The pattern exporters emit for LayerNorm before opset 17.
Case decomposed_layer_norm(const Ints& s) {
  Builder b(3);
  std::string x = b.input("x", s, -2, 2);
  std::string mean = b.node("ReduceMean", {x}, {{"axes", Ints{-1}}});
  std::string d = b.node("Sub", {x, mean});
  std::string two = b.constant("two", scalar(2));
  std::string sq = b.node("Pow", {d, two});
  std::string var = b.node("ReduceMean", {sq}, {{"axes", Ints{-1}}});
  std::string eps = b.constant("eps", scalar(1e-5f));
  std::string ve = b.node("Add", {var, eps});
  std::string sd = b.node("Sqrt", {ve});
  std::string n = b.node("Div", {d, sd});
  std::string g = b.weight("scale", {s.back()});
  std::string c = b.weight("bias", {s.back()});
  std::string y = b.node("Add", {b.node("Mul", {n, g}), c});
  return {"LayerNorm, decomposed (ReduceMean..Div) " + kiln::graph::shape_str(s),
          "8/elem",
          8.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// SiLU as exporters emit it (EfficientNet's activation): x * Sigmoid(x).
Case silu(const Ints& s) {
  Builder b(11);
  std::string x = b.input("x", s, -8, 8);
  std::string y = b.node("Mul", {x, b.node("Sigmoid", {x})});
  // the sigmoid's exp (range reduction, a degree-7 polynomial, the scale:
  // ~12 mul/add), its add and division, the product: ~15 a value.
  return {"SiLU (Sigmoid Mul) " + kiln::graph::shape_str(s),
          "15/elem",
          15.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// GELU as exporters emit it: x * 0.5 * (1 + erf(x / sqrt(2))).
Case gelu(const Ints& s) {
  Builder b(4);
  std::string x = b.input("x", s, -4, 4);
  std::string r2 = b.constant("sqrt2", scalar(1.4142135f));
  std::string one = b.constant("one", scalar(1));
  std::string half = b.constant("half", scalar(0.5f));
  std::string e = b.node("Erf", {b.node("Div", {x, r2})});
  std::string y = b.node("Mul", {b.node("Mul", {x, b.node("Add", {e, one})}), half});
  // div, erf (a rational polynomial: ~14 mul/add), add, 2 mul.
  return {"GELU (Div Erf Add Mul Mul) " + kiln::graph::shape_str(s),
          "18/elem",
          18.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case reduce_mean(const Ints& s) {
  Builder b(5);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("ReduceMean", {x}, {{"axes", Ints{-1}}});
  return {"ReduceMean last axis " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case global_average_pool(const Ints& s) {
  Builder b(6);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("GlobalAveragePool", {x});
  return {"GlobalAveragePool " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case max_pool(const Ints& s) {
  Builder b(7);
  std::string x = b.input("x", s, -2, 2);
  std::string y =
      b.node("MaxPool", {x},
             {{"kernel_shape", Ints{3, 3}}, {"strides", Ints{2, 2}}, {"pads", Ints{1, 1, 1, 1}}});
  Ints o = b.sample(y).type.shape;
  return {"MaxPool 3x3 s2 p1 " + kiln::graph::shape_str(s),
          "9/output",
          9.0 * elements(o),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// Pools as they run between blocked convolutions (graph::propagate_layout):
// on NCHW[b]c data, s = [N, C/b, H, W, b].
Case blocked_max_pool(const Ints& s) {
  Builder b(9);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("MaxPool", {x},
                         {{"kernel_shape", Ints{3, 3}},
                          {"strides", Ints{2, 2}},
                          {"pads", Ints{1, 1, 1, 1}},
                          {"kiln_block", s.back()}});
  Ints o = b.sample(y).type.shape;
  return {"MaxPool 3x3 s2 p1, NCHW[b]c " + kiln::graph::shape_str(s),
          "9/output",
          9.0 * elements(o),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case blocked_global_average_pool(const Ints& s) {
  Builder b(10);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("GlobalAveragePool", {x}, {{"kiln_block", s.back()}});
  return {"GlobalAveragePool, NCHW[b]c " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// ConvNeXt's norm over the channels of each pixel as it runs between blocked
// convolutions (graph::channels_last_to_nchw, then propagate_layout): on
// NCHW[b]c data, s = [N, C/b, H, W, b]. Compare with LayerNormalization over
// the last axis of the NHWC tensor of the same size, what it replaces.
Case blocked_channel_norm(const Ints& s) {
  Builder b(11);
  std::string x = b.input("x", s, -2, 2);
  std::string g = b.weight("scale", {s[1] * s[4]});
  std::string c = b.weight("bias", {s[1] * s[4]});
  std::string y = b.node("kiln.ChannelNorm", {x, g, c}, {{"kiln_block", s.back()}});
  // As LayerNormalization's count.
  return {"kiln.ChannelNorm, NCHW[b]c " + kiln::graph::shape_str(s),
          "8/elem",
          8.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

Case flatten(const Ints& s) {
  Builder b(8);
  std::string x = b.input("x", s, -2, 2);
  std::string y = b.node("Flatten", {x}, {{"axis", int64_t{1}}});
  return {"Flatten " + kiln::graph::shape_str(s), "0", 0, b.finish(y), {{"x", b.sample(x)}}};
}

// A permutation of [0, n) for each of `rows` rows, each repeated `inner`
// times: the index of an element is that of its row, as torch.gather and
// scatter take it from an index expanded over the hidden axis.
Initializer row_permutations(int64_t outer, int64_t n, int64_t inner, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(static_cast<size_t>(outer * n * inner));
  std::vector<int64_t> perm(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o) {
    std::iota(perm.begin(), perm.end(), int64_t{0});
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i)
        v[static_cast<size_t>((o * n + k) * inner + i)] = perm[static_cast<size_t>(k)];
  }
  return int64_tensor({outer, n, inner}, v);
}

// Rows reordered along the sequence axis (s = [batch, seq, hidden], axis 1),
// as a sort by bucket (Reformer's LSH attention) or a mixture of experts'
// dispatch gathers tokens: GatherElements with a row permutation expanded
// over the hidden axis.
Case gather_elements(const Ints& s) {
  Builder b(12);
  std::string x = b.input("x", s, -2, 2);
  std::string i = b.input("indices", row_permutations(s[0], s[1], s[2], 12));
  std::string y = b.node("GatherElements", {x, i}, {{"axis", int64_t{1}}});
  return {"GatherElements axis 1, row permutation " + kiln::graph::shape_str(s),
          "0",
          0,
          b.finish(y),
          {{"x", b.sample(x)}, {"indices", b.sample(i)}}};
}

// Token embeddings: Gather of rows of a [vocab, d] table by int64 ids read
// at run time (axis 0), the lookup at the head of every language model.
Case gather_rows(int64_t vocab, int64_t d, int64_t tokens) {
  Builder b(19);
  std::string w = b.input("table", {vocab, d}, -2, 2);
  std::mt19937_64 rng(19);
  std::vector<int64_t> ids(static_cast<size_t>(tokens));
  for (int64_t& v : ids) v = static_cast<int64_t>(rng() % static_cast<uint64_t>(vocab));
  std::string i = b.input("ids", int64_tensor({1, tokens}, ids));
  std::string y = b.node("Gather", {w, i}, {{"axis", int64_t{0}}});
  return {"Gather rows (embedding) [" + std::to_string(vocab) + ", " + std::to_string(d) + "] by " +
              std::to_string(tokens) + " ids",
          "0",
          0,
          b.finish(y),
          {{"table", b.sample(w)}, {"ids", b.sample(i)}}};
}

// Its inverse (undoing the sort, an expert's outputs combined back):
// ScatterElements of updates into data at a row permutation (reduction
// none: each position written once). kiln's kernel searches every output
// element's candidates along the axis (graph/ops/indexing.cc): n^2 reads a
// column, here 2048 x 524288 index compares.
Case scatter_elements(const Ints& s) {
  Builder b(13);
  std::string x = b.input("data", s, -2, 2);
  std::string i = b.input("indices", row_permutations(s[0], s[1], s[2], 13));
  std::string u = b.input("updates", s, -2, 2);
  std::string y = b.node("ScatterElements", {x, i, u}, {{"axis", int64_t{1}}});
  return {"ScatterElements axis 1, row permutation " + kiln::graph::shape_str(s),
          "0",
          0,
          b.finish(y),
          {{"data", b.sample(x)}, {"indices", b.sample(i)}, {"updates", b.sample(u)}}};
}

// A decoder's key/value cache written at one position (s = [batch, heads,
// context, head_dim], axis 2, updates [batch, heads, 1, head_dim]): the few
// updates per element the scatter kernel is made for (one candidate).
Case kv_cache_write(const Ints& s) {
  Builder b(18);
  std::string x = b.input("cache", s, -2, 2);
  const Ints us = {s[0], s[1], 1, s[3]};
  std::string i =
      b.input("indices", int64_tensor(us, std::vector<int64_t>(elements(us), s[2] / 2)));
  std::string u = b.input("updates", us, -2, 2);
  std::string y = b.node("ScatterElements", {x, i, u}, {{"axis", int64_t{2}}});
  return {"ScatterElements axis 2, one position (KV cache) " + kiln::graph::shape_str(s),
          "0",
          0,
          b.finish(y),
          {{"cache", b.sample(x)}, {"indices", b.sample(i)}, {"updates", b.sample(u)}}};
}

// Running sums along the last axis: top-p sampling's cumulative
// probabilities over a sorted vocabulary, one row per sequence. Counted as
// a sequential scan (1 add an element); kiln's kernel is a log-step scan
// (ceil(log2 n) adds and passes).
Case cumsum(const Ints& s) {
  Builder b(14);
  std::string x = b.input("x", s, 0, 1e-3f);
  std::string axis = b.constant("axis", int64_tensor({}, {-1}));
  std::string y = b.node("CumSum", {x, axis});
  return {"CumSum last axis " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// A rotary embedding's table: sin of position * frequency, angles up to
// the context length (s = [1, positions, head_dim]).
Case sin(const Ints& s) {
  Builder b(15);
  std::string x = b.input("x", s, 0, static_cast<float>(s[1]));
  std::string y = b.node("Sin", {x});
  // The reduction by pi/2 (3 ops, 3 FMAs), the square, and both polynomials
  // (sin's 3 FMAs and a multiply, cos's 4 FMAs; the quadrant picks one),
  // FMAs as 2: ~25 a value.
  return {"Sin (rotary angles) " + kiln::graph::shape_str(s),
          "25/elem",
          25.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// The k largest along the last axis and their positions (a classifier's
// top 5 of 1000, greedy decoding's top 1 of a 32000-token vocabulary).
Case topk(const Ints& s, int64_t k) {
  Builder b(16);
  std::string x = b.input("x", s, -8, 8);
  std::string kk = b.constant("k", int64_tensor({1}, {k}));
  std::vector<std::string> y = b.node_outputs("TopK", {x, kk}, {{"axis", int64_t{-1}}});
  // One comparison an element and candidate kept.
  return {"TopK k=" + std::to_string(k) + " last axis " + kiln::graph::shape_str(s),
          std::to_string(k) + "/elem",
          static_cast<double>(k) * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// Greedy decoding's next token: the position of each row's maximum.
Case argmax(const Ints& s) {
  Builder b(17);
  std::string x = b.input("x", s, -8, 8);
  std::string y = b.node("ArgMax", {x}, {{"axis", int64_t{-1}}, {"keepdims", int64_t{0}}});
  return {"ArgMax last axis " + kiln::graph::shape_str(s),
          "1/elem",
          1.0 * elements(s),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

// A spatial transformer's sampling (bilinear, zeros padding): each of the
// C planes of x read at the grid's out_h x out_w positions (grid in [-1, 1]
// and a little past it). 4 taps an output, a weight product, multiply and
// add each.
Case grid_sample(const Ints& x_shape, int64_t out_h, int64_t out_w) {
  Builder b(19);
  std::string x = b.input("x", x_shape, -2, 2);
  std::string grid = b.input("grid", {x_shape[0], out_h, out_w, 2}, -1.1f, 1.1f);
  std::string y = b.node("GridSample", {x, grid},
                         {{"mode", std::string("bilinear")},
                          {"padding_mode", std::string("zeros")},
                          {"align_corners", int64_t{0}}});
  const double outputs = static_cast<double>(x_shape[0] * x_shape[1] * out_h * out_w);
  return {"GridSample bilinear X " + kiln::graph::shape_str(x_shape) + " at " +
              std::to_string(out_h) + "x" + std::to_string(out_w),
          "12/out",
          12.0 * outputs,
          b.finish(y),
          {{"x", b.sample(x)}, {"grid", b.sample(grid)}}};
}

// A detector's box head: `boxes` random boxes within the image over a
// feature map at 1/16 of it, out x out bins per box and channel (avg).
// sampling_ratio > 0: that many samples per bin and axis (torchvision's
// Mask R-CNN: 2); 0: ceil(bin size) per box (detectron2), where kiln's
// kernel sizes its sample loops for a box as large as the map. Counted: the
// samples ONNX takes (the boxes' own grids), 4 corners with a weight
// product, multiply and add each, plus the coordinates.
Case roi_align(const Ints& x_shape, int64_t boxes, int64_t out, int64_t ratio) {
  Builder b(20);
  std::mt19937_64 rng(21);
  const float scale = 1.0f / 16;
  const double img_h = static_cast<double>(x_shape[2]) / scale;
  const double img_w = static_cast<double>(x_shape[3]) / scale;
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> box;
  double samples = 0;
  for (int64_t r = 0; r < boxes; ++r) {
    double x0 = u(rng) * img_w, x1 = u(rng) * img_w, y0 = u(rng) * img_h, y1 = u(rng) * img_h;
    for (double v : {std::min(x0, x1), std::min(y0, y1), std::max(x0, x1), std::max(y0, y1)})
      box.push_back(static_cast<float>(v));
    auto grid = [&](double a, double c) {
      return ratio > 0 ? static_cast<double>(ratio) : std::ceil(std::fabs(c - a) * scale / out);
    };
    samples += grid(y0, y1) * grid(x0, x1);
  }
  Initializer rois;
  rois.type = {"float32", {boxes, 4}};
  rois.data.resize(box.size() * sizeof(float));
  std::memcpy(rois.data.data(), box.data(), rois.data.size());
  std::string x = b.input("x", x_shape, -2, 2);
  std::string r = b.input("rois", rois);
  std::vector<int64_t> zeros(static_cast<size_t>(boxes), 0);
  std::string bi = b.input("batch_indices", int64_tensor({boxes}, zeros));
  std::string y = b.node("RoiAlign", {x, r, bi},
                         {{"output_height", out},
                          {"output_width", out},
                          {"sampling_ratio", ratio},
                          {"spatial_scale", scale}});
  return {"RoiAlign " + std::to_string(boxes) + " boxes " + std::to_string(out) + "x" +
              std::to_string(out) + (ratio ? " ratio " + std::to_string(ratio) : " adaptive") +
              " X " + kiln::graph::shape_str(x_shape),
          "16/sample",
          16.0 * samples * static_cast<double>(out * out * x_shape[1]),
          b.finish(y),
          {{"x", b.sample(x)}, {"rois", b.sample(r)}, {"batch_indices", b.sample(bi)}}};
}

// An audio front end's spectrogram: STFT of `samples` samples (one second
// at 16 kHz), frames of `frame` samples every `step` under a constant Hann
// window, onesided: lower_signal's Gather of the frames and one MatMul by
// the [frame, bins x 2] twiddle matrix (the window folded into it). Counted
// as that product: 2 x frame x (bins x 2) a frame, where an FFT would do
// ~5 frame log2(frame) / 2.
Case stft(int64_t batch, int64_t samples, int64_t frame, int64_t step) {
  Builder b(22);
  std::string x = b.input("signal", {batch, samples, 1}, -1, 1);
  Initializer w;
  w.type = {"float32", {frame}};
  std::vector<float> hann(static_cast<size_t>(frame));
  for (int64_t i = 0; i < frame; ++i)
    hann[static_cast<size_t>(i)] =
        static_cast<float>(0.5 - 0.5 * std::cos(2 * M_PI * static_cast<double>(i) / frame));
  w.data.resize(hann.size() * sizeof(float));
  std::memcpy(w.data.data(), hann.data(), w.data.size());
  std::string window = b.constant("window", w);
  std::string st = b.constant("step", int64_tensor({}, {step}));
  std::string y = b.node("STFT", {x, st, window});
  const Ints o = b.sample(y).type.shape;  // [batch, frames, bins, 2]
  return {"STFT " + std::to_string(samples) + " samples, frame " + std::to_string(frame) +
              " step " + std::to_string(step) + " (dense DFT) batch " + std::to_string(batch),
          "2*F*2K/frame",
          2.0 * static_cast<double>(frame) * static_cast<double>(o[2] * 2) *
              static_cast<double>(o[0] * o[1]),
          b.finish(y),
          {{"signal", b.sample(x)}}};
}

// DFT of real rows along axis 1 ([batch, n, 1], onesided): the same dense
// product on lines that are already frames.
Case dft(int64_t rows, int64_t n) {
  Builder b(23);
  std::string x = b.input("x", {rows, n, 1}, -1, 1);
  std::string y = b.node("DFT", {x}, {{"axis", int64_t{1}}, {"onesided", int64_t{1}}});
  const int64_t bins = n / 2 + 1;
  return {"DFT onesided " + std::to_string(rows) + " x " + std::to_string(n) + " (dense)",
          "2*n*2K/row",
          2.0 * static_cast<double>(n) * static_cast<double>(bins * 2) * static_cast<double>(rows),
          b.finish(y),
          {{"x", b.sample(x)}}};
}

size_t bytes_of(const TensorType& t) {
  return static_cast<size_t>(elements(t.shape)) * kiln::graph::dtype_size(t.dtype);
}

// GB/s (bytes read + written) of `threads` threads each copying its share of
// `total / 2` bytes over and over, warm: the best of `samples` samples (a
// peak is what the machine can do; other processes on this shared VM only
// ever lower a sample). Each thread times its own loop, so thread start-up
// is not counted; a sample takes its slowest thread.
double copy_gbps(size_t total, int threads, int samples) {
  size_t half = std::max<size_t>(total / 2, 64 * static_cast<size_t>(threads));
  std::vector<char> src(half, 1), dst(half, 0);
  size_t share = half / static_cast<size_t>(threads);
  int reps = static_cast<int>(std::max<size_t>(1, (64u << 20) / half));
  double best = 0;
  for (int s = 0; s < samples; ++s) {
    std::vector<double> sec(static_cast<size_t>(threads));
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        auto t0 = Clock::now();
        for (int r = 0; r < reps; ++r)
          std::memcpy(dst.data() + t * share, src.data() + t * share, share);
        sec[static_cast<size_t>(t)] = std::chrono::duration<double>(Clock::now() - t0).count();
      });
    for (auto& th : pool) th.join();
    double slowest = *std::max_element(sec.begin(), sec.end());
    best = std::max(best, 2.0 * static_cast<double>(share) * threads * reps / slowest * 1e-9);
  }
  return best;
}

// Builds, checks and times one case; returns false when its result is wrong.
bool run_case(const Case& c, bool smoke, double fma_peak, int threads) {
  const std::string pkg = (std::filesystem::temp_directory_path() /
                           ("kiln-bench-ops-" + std::to_string(getpid()) + ".tar"))
                              .string();
  kiln::driver::BuildOptions options;
  options.output_path = pkg;
  kiln::driver::BuiltModule built = kiln::driver::build_module(c.graph, options);
  kiln::runtime::GraphExecutor ex = kiln::runtime::GraphExecutor::load(pkg);
  std::filesystem::remove(pkg);
  size_t bytes = 0;
  for (const auto& [name, value] : c.inputs) {
    ex.set_input(name, value.data.data(), kiln::runtime::DType::parse(value.type.dtype),
                 value.type.shape);
    bytes += value.data.size();
  }
  ex.run();
  std::map<std::string, Initializer> want = kiln::graph::run_graph(c.graph, c.inputs);
  for (size_t o = 0; o < c.graph.outputs.size(); ++o) {
    const std::string& name = c.graph.outputs[o];
    const TensorType& out_t = c.graph.value_info.at(name);
    bytes += bytes_of(out_t);
    if (out_t.dtype == "int64") {
      // Indices: a relative error would hide a wrong one; all must be equal.
      const auto* got = static_cast<const int64_t*>(ex.output_data(o));
      std::vector<int64_t> ref = want.at(name).as<int64_t>();
      size_t wrong = 0;
      for (size_t i = 0; i < ref.size(); ++i) wrong += got[i] != ref[i];
      if (wrong != 0) {
        std::fprintf(stderr, "kiln_bench_ops: %s: output %zu: %zu of %zu indices differ\n",
                     c.name.c_str(), o, wrong, ref.size());
        return false;
      }
      continue;
    }
    const auto* got = static_cast<const float*>(ex.output_data(o));
    std::vector<float> ref = want.at(name).as<float>();
    double max_ref = 1e-30, max_err = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      max_ref = std::max(max_ref, std::fabs(static_cast<double>(ref[i])));
      max_err = std::max(max_err, std::fabs(static_cast<double>(got[i]) - ref[i]));
    }
    if (!(max_err / max_ref <= 1e-4)) {
      std::fprintf(stderr, "kiln_bench_ops: %s: output %zu: max abs error %g (max |ref| %g)\n",
                   c.name.c_str(), o, max_err, max_ref);
      return false;
    }
  }
  // 31 samples, or as many (at least 3) as fit in about 5 s: a kernel slow
  // enough to exceed that (ScatterElements' quadratic search) is still
  // timed, without holding the run for minutes.
  const int samples = smoke ? 3 : 31;
  const int calls = smoke ? 2 : std::max(1, static_cast<int>(2e7 / std::max<size_t>(bytes, 1)));
  std::vector<double> ms;
  const auto start = Clock::now();
  for (int s = 0; s < samples; ++s) {
    auto t0 = Clock::now();
    for (int k = 0; k < calls; ++k) ex.run();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count() / calls);
    if (s >= 2 && Clock::now() - start > std::chrono::seconds(5)) break;
  }
  const double t = median(ms);
  const double gbps = static_cast<double>(bytes) / (t * 1e-3) * 1e-9;
  const double gflops = c.flops / (t * 1e-3) * 1e-9;
  const double copy = copy_gbps(bytes, threads, smoke ? 3 : 15);
  const double mem_frac = copy > 0 ? gbps / copy : 0;
  const double flop_frac = fma_peak > 0 ? gflops / fma_peak : 0;
  std::printf(
      "  %-60s %2zu kernel%s %9.4f ms %8.1f GB/s (copy %6.1f) %7.1f GFLOP/s (%-8s) %5.1f %% %s\n",
      c.name.c_str(), built.funcs.size(), built.funcs.size() == 1 ? " " : "s", t, gbps, copy,
      gflops, c.flops_per.c_str(), 100 * std::max(mem_frac, flop_frac),
      mem_frac >= flop_frac ? "memory" : "compute");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  bool smoke = false;
  std::string filter;  // run only the cases whose name contains it
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--smoke") == 0) {
      smoke = true;
    } else if (std::strcmp(argv[i], "--filter") == 0 && i + 1 < argc) {
      filter = argv[++i];
    } else {
      std::fprintf(stderr, "usage: kiln_bench_ops [--smoke] [--filter TEXT]\n");
      return 2;
    }
  }
  const int threads = kiln_get_num_threads();
  double fma_peak = 0;
  if (!smoke) {
    fma_peak = kiln::bench::measured_fma_peak_gflops(threads, 512);
    if (fma_peak == 0) fma_peak = kiln::bench::measured_fma_peak_gflops(threads, 256);
  }
  std::vector<Case> cases;
  if (smoke) {
    cases = {softmax({1, 2, 3, 33}),
             layer_norm({1, 3, 37}),
             decomposed_layer_norm({1, 3, 37}),
             gelu({1, 3, 37}),
             silu({1, 3, 5, 7}),
             reduce_mean({2, 17}),
             global_average_pool({1, 3, 5, 5}),
             max_pool({1, 2, 9, 9}),
             blocked_max_pool({1, 2, 9, 9, 8}),
             blocked_global_average_pool({1, 2, 3, 3, 8}),
             blocked_channel_norm({1, 3, 5, 7, 8}),
             flatten({1, 5, 1, 1}),
             gather_elements({1, 7, 5}),
             gather_rows(11, 6, 5),
             scatter_elements({1, 7, 5}),
             kv_cache_write({1, 2, 5, 3}),
             cumsum({3, 37}),
             sin({1, 7, 9}),
             topk({2, 37}, 5),
             topk({2, 70}, 1),
             argmax({2, 70}),
             grid_sample({1, 3, 5, 7}, 4, 9),
             roi_align({1, 3, 6, 7}, 5, 2, 2),
             roi_align({1, 3, 6, 7}, 5, 2, 0),
             stft(1, 200, 32, 16),
             dft(5, 24)};
  } else {
    cases = {softmax({1, 4, 128, 128}),
             softmax({1, 12, 197, 197}),
             layer_norm({1, 128, 256}),
             decomposed_layer_norm({1, 128, 256}),
             gelu({1, 128, 1024}),
             silu({1, 96, 112, 112}),
             silu({1, 144, 56, 56}),
             reduce_mean({1, 128, 256}),
             global_average_pool({1, 512, 7, 7}),
             global_average_pool({1, 1000, 13, 13}),
             max_pool({1, 64, 112, 112}),
             blocked_max_pool({1, 4, 112, 112, 16}),
             blocked_global_average_pool({1, 32, 7, 7, 16}),
             layer_norm({1, 56, 56, 96}),
             blocked_channel_norm({1, 6, 56, 56, 16}),
             layer_norm({1, 14, 14, 384}),
             blocked_channel_norm({1, 24, 14, 14, 16}),
             flatten({1, 512, 1, 1}),
             gather_elements({1, 2048, 256}),
             gather_rows(32000, 512, 2048),
             scatter_elements({1, 2048, 256}),
             kv_cache_write({1, 8, 2048, 64}),
             cumsum({16, 32000}),
             sin({1, 4096, 128}),
             topk({1, 1000}, 5),
             topk({64, 1000}, 5),
             topk({1, 32000}, 1),
             topk({16, 32000}, 1),
             argmax({1, 32000}),
             argmax({16, 32000}),
             grid_sample({1, 32, 64, 64}, 64, 64),
             roi_align({1, 256, 50, 68}, 100, 7, 2),
             roi_align({1, 256, 50, 68}, 100, 7, 0),
             stft(1, 16000, 512, 160),
             stft(1, 16000, 400, 160),
             dft(98, 512)};
  }
  std::printf("kiln_bench_ops: %d threads, fp32 FMA peak measured now %.0f GFLOP/s%s\n", threads,
              fma_peak, smoke ? " (smoke: timings meaningless)" : "");
  bool ok = true;
  for (const Case& c : cases)
    if (c.name.find(filter) != std::string::npos) ok = run_case(c, smoke, fma_peak, threads) && ok;
  return ok ? 0 : 1;
}
