#include "graph/passes/apply_templates.h"

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "graph/ops/op_util.h"
#include "graph/passes/pass_util.h"
#include "graph/passes/strategy.h"
#include "ops/conv2d_int8.h"
#include "ops/conv2d_int8_amx.h"
#include "ops/dense.h"
#include "ops/dense_bf16.h"
#include "ops/dense_int8.h"
#include "ops/depthwise_conv2d_int8.h"
#include "ops/op_template.h"
#include "ops/winograd_conv2d_int8.h"

namespace kiln::graph {
namespace {

using passes::float_tensor;

// A constant of any dtype from its elements.
template <typename T>
Initializer typed_tensor(const std::string& dtype, std::vector<int64_t> shape,
                         const std::vector<T>& values) {
  Initializer t;
  t.type = {dtype, std::move(shape)};
  t.data.resize(values.size() * sizeof(T));
  std::copy(reinterpret_cast<const uint8_t*>(values.data()),
            reinterpret_cast<const uint8_t*>(values.data()) + t.data.size(), t.data.begin());
  return t;
}

// The elements of a uint8 / int8 / int32 constant as int32.
std::vector<int32_t> int_elements(const Initializer& t) {
  std::vector<int32_t> out;
  if (t.type.dtype == "uint8")
    for (uint8_t v : t.data) out.push_back(v);
  else if (t.type.dtype == "int8")
    for (uint8_t v : t.data) out.push_back(static_cast<int8_t>(v));
  else
    for (int32_t v : t.as<int32_t>()) out.push_back(v);
  return out;
}

// A packed weight in the template's weight dtype: float32, or bfloat16 for the
// bf16 templates (their packers' values are bf16 values already: exact).
Initializer weight_tensor(ir::DataType t, const std::vector<int64_t>& shape,
                          const std::vector<float>& packed) {
  if (t != ir::DataType::bf16()) return float_tensor(shape, packed);
  std::vector<uint16_t> bits(packed.size());
  for (size_t i = 0; i < packed.size(); ++i) bits[i] = ir::f32_to_bf16_value(packed[i]);
  return typed_tensor<uint16_t>("bfloat16", shape, bits);
}

// A per-tensor or per-channel float32 parameter's value for channel c.
float param_at(const std::vector<float>& p, int64_t c) {
  return p.size() == 1 ? p[0] : p.at(static_cast<size_t>(c));
}

struct Rewriter {
  Graph& g;
  const std::map<std::string, std::string>& configs;
  const Isa& isa;  // the target's, for the templates' fallbacks
  std::vector<TemplateUse> uses;
  std::vector<Node> out;  // the new node list
  // One numbering over the pass: new values are "<node>/<what>/<k>".
  // propagate_layout continues it (see next_value_index there).
  int counter = 0;
  // (value, block) -> the value in NCHW[block]c, so that convolutions
  // reading the same activation share one transform.
  std::map<std::pair<std::string, int64_t>, std::string> blocked;
  // int8 value -> its uint8 (+128) copy (to_uint8).
  std::map<std::string, std::string> shifted;

  std::string fresh(const std::string& base, const TensorType& t) {
    std::string name;
    do {
      name = base + "/" + std::to_string(counter++);
    } while (g.value_info.count(name) || g.initializers.count(name));
    g.value_info[name] = t;
    return name;
  }

  std::string add_constant(const std::string& base, Initializer init) {
    std::string name = fresh(base, init.type);
    passes::set_initializer(g, name, std::move(init));
    return name;
  }

  void emit(Node n) { out.push_back(std::move(n)); }

  // LT(x) from layout src_block to dst_block (0 = NCHW) into `result`.
  void layout_transform(const std::string& name, const std::string& x, const std::string& result,
                        int64_t src_block, int64_t dst_block) {
    Node n;
    n.op_type = "kiln.LayoutTransform";
    n.domain = "kiln";
    n.name = name;
    n.inputs = {x};
    n.outputs = {result};
    n.attrs["src_block"] = src_block;
    n.attrs["dst_block"] = dst_block;
    emit(std::move(n));
  }

  void add(const std::string& name, const std::string& x, const std::string& y,
           const std::string& result) {
    Node n;
    n.op_type = "Add";
    n.name = name;
    n.inputs = {x, y};
    n.outputs = {result};
    emit(std::move(n));
  }

  // Resolves the config of a workload: explicit, else the fallback.
  schedule::Config config_for(const ops::OpTemplate& t, const ops::Workload& w, bool* configured) {
    auto it = configs.find(w.key());
    *configured = it != configs.end();
    if (!*configured) return t.fallback(w, isa);
    try {
      return schedule::Config::from_json(t.space(w), it->second);
    } catch (const std::exception& e) {
      throw std::runtime_error("config for " + w.key() + ": " + e.what());
    }
  }

  // A node's own config (TemplateSelection::config_json: the layout choice's).
  schedule::Config node_config(const ops::OpTemplate& t, const TemplateSelection& s,
                               bool* configured) {
    *configured = true;
    try {
      return schedule::Config::from_json(t.space(s.workload), s.config_json);
    } catch (const std::exception& e) {
      throw std::runtime_error("node '" + s.node + "': config for " + s.workload.key() + ": " +
                               e.what());
    }
  }

  void emit_template(const Node& orig, const ops::OpTemplate& t, const ops::Workload& w,
                     const schedule::Config& cfg, std::vector<std::string> inputs,
                     const std::string& output, const std::vector<int64_t>& output_shape) {
    Node n;
    n.op_type = "kiln.Template";
    n.domain = "kiln";
    n.name = orig.name;
    n.inputs = std::move(inputs);
    n.outputs = {output};
    n.attrs["template"] = t.name();
    n.attrs["workload"] = w.key();
    n.attrs["config"] = cfg.to_json();
    n.attrs["output_shape"] = output_shape;
    emit(std::move(n));
  }

  void rewrite(const Node& n, const TemplateSelection& s);
  void rewrite_conv(const Node& n, const Strategy& row, const ops::OpTemplate& t,
                    const ops::Workload& w, const schedule::Config& cfg);
  void rewrite_dense(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                     const schedule::Config& cfg, bool bf16);
  void rewrite_qlinear_conv(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                            const schedule::Config& cfg);
  void rewrite_qlinear_matmul(const Node& n, const ops::Workload& w, const schedule::Config& cfg);
  void rewrite_qlinear_batch_matmul(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                                    const schedule::Config& cfg);
  std::string unary(const Node& n, const std::string& op, const std::string& what,
                    const std::string& x, const TensorType& t,
                    const std::map<std::string, Attribute>& attrs = {},
                    const std::vector<std::string>& extra = {});
  std::string exact_sum(const Node& n, const std::string& what, const std::string& x, int64_t axis);
  std::string requantize(const std::string& name, const std::string& x, const std::string& bias,
                         const std::string& mult, int32_t zp, const std::string& out_dtype,
                         const std::string& result);
  std::string to_uint8(const Node& n, const std::string& x);
};

// The rewrite of the strategy row that selected the template (strategy.h).
void Rewriter::rewrite(const Node& n, const TemplateSelection& s) {
  const ops::OpTemplate& t = ops::get_template(s.template_name);
  const Strategy* row = find_strategy(n.op_type, t.name());
  if (!row)
    throw std::invalid_argument("node '" + n.name + "': no strategy row for " + n.op_type +
                                " with template " + t.name());
  bool configured = false;
  schedule::Config cfg = s.config_json.empty() ? config_for(t, s.workload, &configured)
                                               : node_config(t, s, &configured);
  switch (row->rewrite) {
    case Rewrite::kBlockedConv: rewrite_conv(n, *row, t, s.workload, cfg); break;
    case Rewrite::kDense: rewrite_dense(n, t, s.workload, cfg, false); break;
    case Rewrite::kDenseBf16: rewrite_dense(n, t, s.workload, cfg, true); break;
    case Rewrite::kQLinearConv: rewrite_qlinear_conv(n, t, s.workload, cfg); break;
    case Rewrite::kQLinearMatMul: rewrite_qlinear_matmul(n, s.workload, cfg); break;
    case Rewrite::kQLinearBatchMatMul: rewrite_qlinear_batch_matmul(n, t, s.workload, cfg); break;
    case Rewrite::kPlain:
      emit_template(n, t, s.workload, cfg, n.inputs, n.outputs.at(0),
                    g.type_of(n.outputs.at(0))->shape);
      break;
  }
  uses.push_back({t.name(), s.workload.key(), configured});
}

void Rewriter::rewrite_conv(const Node& n, const Strategy& row, const ops::OpTemplate& t,
                            const ops::Workload& w, const schedule::Config& cfg) {
  if (!t.channel_blocked() || !row.pack_weight)
    throw std::invalid_argument("node '" + n.name + "': " + t.name() +
                                " is not a channel-blocked template with a weight packer");
  int64_t OC = w.get("kernel")[0];
  auto in_shapes = t.input_shapes(w, cfg);
  std::vector<int64_t> out_shape = t.output_shape(w, cfg);
  auto [icb, ocb] = ops::layout_blocks(t, w, cfg);

  std::vector<float> weight = g.initializers.at(n.inputs[1]).as<float>();
  std::vector<float> packed = row.pack_weight(w, cfg, icb, ocb, weight.data());
  std::string w_packed = add_constant(
      n.name + "/weight_packed", weight_tensor(t.input_dtypes(w).at(1), in_shapes.at(1), packed));
  std::string& x_c = blocked[{n.inputs[0], icb}];
  if (x_c.empty()) {
    x_c = fresh(n.name + "/data_nchwc", {"float32", in_shapes.at(0)});
    layout_transform(n.name + "/to_nchwc", n.inputs[0], x_c, 0, icb);
  }
  std::string y_c = fresh(n.name + "/out_nchwc", {"float32", out_shape});
  emit_template(n, t, w, cfg, {x_c, w_packed}, y_c, out_shape);
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    std::vector<float> bias = g.initializers.at(n.inputs[2]).as<float>();
    std::string bias_c =
        add_constant(n.name + "/bias_nchwc", float_tensor({1, OC / ocb, 1, 1, ocb}, bias));
    std::string biased = fresh(n.name + "/biased_nchwc", {"float32", out_shape});
    add(n.name + "/bias_add", y_c, bias_c, biased);
    y_c = biased;
  }
  layout_transform(n.name + "/to_nchw", y_c, n.outputs.at(0), ocb, 0);
}

// kiln.Requantize(x, bias, mult; zp) -> `result` (graph/ops/requantize.cc).
std::string Rewriter::requantize(const std::string& name, const std::string& x,
                                 const std::string& bias, const std::string& mult, int32_t zp,
                                 const std::string& out_dtype, const std::string& result) {
  Node n;
  n.op_type = "kiln.Requantize";
  n.domain = "kiln";
  n.name = name;
  n.inputs = {x, bias, mult};
  n.outputs = {result};
  bool u8 = out_dtype == "uint8";
  n.attrs["zero_point"] = int64_t{zp};
  n.attrs["qmin"] = int64_t{u8 ? 0 : -128};
  n.attrs["qmax"] = int64_t{u8 ? 255 : 127};
  emit(std::move(n));
  return result;
}

// An int8 activation as the uint8 the templates read (x + 128, exact; the
// zero point moves by 128 too), shared by every node reading it.
std::string Rewriter::to_uint8(const Node& n, const std::string& x) {
  const TensorType& xt = *g.type_of(x);
  if (xt.dtype == "uint8") return x;
  std::string& u = shifted[x];
  if (!u.empty()) return u;
  std::string b = add_constant(n.name + "/shift", typed_tensor<int32_t>("int32", {1}, {128}));
  std::string m = add_constant(n.name + "/one", float_tensor({1}, {1.0f}));
  u = fresh(n.name + "/data_u8", {"uint8", xt.shape});
  return requantize(n.name + "/to_u8", x, b, m, 0, "uint8", u);
}

// QLinearConv on conv2d_NCHWc_int8.x86 (strategy.h, kQLinearConv): the int32
// accumulator is sum_k x_u8 * w_s8 over the padded input (pad_value = zp_x),
// so acc - zp_x * sum_k w is the exact sum of (x - zp_x) * w; that constant
// goes into the bias at build time, and the requantization runs as the
// template's epilogue.
void Rewriter::rewrite_qlinear_conv(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                                    const schedule::Config& cfg) {
  const std::vector<int64_t>& k = w.get("kernel");
  int64_t OC = k[0], C = k[1], KH = k[2], KW = k[3];
  int32_t zp_x = static_cast<int32_t>(w.get("pad_value").at(0));
  auto in_shapes = t.input_shapes(w, cfg);
  std::vector<int64_t> out_shape = t.output_shape(w, cfg);
  auto [icb, ocb] = ops::layout_blocks(t, w, cfg);
  int64_t OCo = out_shape[1];

  const Initializer& wi = g.initializers.at(n.inputs[3]);
  std::vector<int8_t> wv(wi.data.size());
  std::copy(wi.data.begin(), wi.data.end(), reinterpret_cast<uint8_t*>(wv.data()));
  // The depthwise template (C = 1 weight channel per output channel) packs by
  // its one channel block; the rest of the rewrite is the same for both.
  // The AMX template packs [K, OC] by 16 columns, whatever its blocks.
  bool depthwise = &t == &ops::depthwise_conv2d_nchwc_int8_template();
  bool amx = &t == &ops::conv2d_nchwc_int8_amx_template();
  // Integer Winograd takes its transformed int16 weight (U = G2 g G2^T).
  bool winograd = &t == &ops::conv2d_winograd_nchwc_int8_template();
  std::string w_packed;
  if (winograd) {
    w_packed =
        add_constant(n.name + "/weight_winograd",
                     typed_tensor<int16_t>("int16", in_shapes.at(1),
                                           ops::winograd_int8_pack_weight(w, cfg, wv.data())));
  } else {
    std::vector<int8_t> packed = depthwise
                                     ? ops::pack_depthwise_int8_weight(wv.data(), OC, KH, KW, ocb)
                                 : amx ? ops::pack_conv2d_int8_amx_weight(wv.data(), OC, C, KH, KW)
                                       : ops::pack_conv2d_int8_weight(wv.data(), w, cfg);
    w_packed = add_constant(n.name + "/weight_packed",
                            typed_tensor<int8_t>("int8", in_shapes.at(1), packed));
  }

  float xs = g.initializers.at(n.inputs[1]).as<float>().at(0);
  std::vector<float> ws = g.initializers.at(n.inputs[4]).as<float>();
  float ys = g.initializers.at(n.inputs[6]).as<float>().at(0);
  const Initializer& yzp = g.initializers.at(n.inputs[7]);
  int32_t zp_y = int_elements(yzp).at(0);
  std::vector<int32_t> b;
  if (n.inputs.size() > 8 && !n.inputs[8].empty()) b = g.initializers.at(n.inputs[8]).as<int32_t>();

  // Per output channel, in NCHW[oc_bn]c ([1, OCo, 1, 1, ocb]; the padded
  // channels get bias 0 and multiplier 0, so they hold zp_y, which the next
  // convolution's zero weights ignore).
  std::vector<int32_t> bias_c(static_cast<size_t>(OCo * ocb), 0);
  std::vector<float> mult_c(static_cast<size_t>(OCo * ocb), 0.0f);
  int64_t per_oc = C * KH * KW;
  for (int64_t o = 0; o < OC; ++o) {
    int64_t wsum = 0;
    for (int64_t j = 0; j < per_oc; ++j) wsum += wv[static_cast<size_t>(o * per_oc + j)];
    int64_t v = (b.empty() ? 0 : b[static_cast<size_t>(o)]) - int64_t{zp_x} * wsum;
    if (v < INT32_MIN || v > INT32_MAX)
      op_util::fail(n, "the bias after the zero-point correction overflows int32");
    bias_c[static_cast<size_t>(o)] = static_cast<int32_t>(v);
    // ONNX Runtime's order, in float32: (x_scale * w_scale[c]) / y_scale.
    mult_c[static_cast<size_t>(o)] = xs * param_at(ws, o) / ys;
  }
  std::string bias_name = add_constant(n.name + "/bias_nchwc",
                                       typed_tensor<int32_t>("int32", {1, OCo, 1, 1, ocb}, bias_c));
  std::string mult_name =
      add_constant(n.name + "/multiplier_nchwc", float_tensor({1, OCo, 1, 1, ocb}, mult_c));

  std::string x_u8 = to_uint8(n, n.inputs[0]);
  std::string& x_c = blocked[{x_u8, icb}];
  if (x_c.empty()) {
    // A layout transform needs whole blocks: channels the block does not
    // divide are padded first (their weights are zero, any value will do).
    std::string x_whole = x_u8;
    int64_t x_channels = w.get("data").at(1), c_pad = in_shapes.at(0)[1] * icb;
    if (c_pad != x_channels) {
      std::vector<int64_t> xs_shape = g.type_of(x_u8)->shape;
      xs_shape[1] = c_pad;
      x_whole = fresh(n.name + "/data_padded", {"uint8", xs_shape});
      std::string pads = add_constant(
          n.name + "/channel_pads",
          typed_tensor<int64_t>("int64", {8}, {0, 0, 0, 0, 0, c_pad - x_channels, 0, 0}));
      Node pad;
      pad.op_type = "Pad";
      pad.name = n.name + "/pad_channels";
      pad.inputs = {x_u8, pads};
      pad.outputs = {x_whole};
      emit(std::move(pad));
    }
    x_c = fresh(n.name + "/data_nchwc", {"uint8", in_shapes.at(0)});
    layout_transform(n.name + "/to_nchwc", x_whole, x_c, 0, icb);
  }
  std::string acc = fresh(n.name + "/acc_nchwc", {"int32", out_shape});
  emit_template(n, t, w, cfg, {x_c, w_packed}, acc, out_shape);
  std::string q = fresh(n.name + "/out_nchwc", {yzp.type.dtype, out_shape});
  requantize(n.name + "/requantize", acc, bias_name, mult_name, zp_y, yzp.type.dtype, q);
  if (OCo * ocb == OC) {
    layout_transform(n.name + "/to_nchw", q, n.outputs.at(0), ocb, 0);
    return;
  }
  // The padded output channels are dropped after the transform.
  std::vector<int64_t> whole = g.type_of(n.outputs.at(0))->shape;
  whole[1] = OCo * ocb;
  std::string y_whole = fresh(n.name + "/out_padded", {yzp.type.dtype, whole});
  layout_transform(n.name + "/to_nchw", q, y_whole, ocb, 0);
  Node slice;
  slice.op_type = "Slice";
  slice.name = n.name + "/drop_channels";
  slice.inputs = {y_whole,
                  add_constant(n.name + "/slice_starts", typed_tensor<int64_t>("int64", {1}, {0})),
                  add_constant(n.name + "/slice_ends", typed_tensor<int64_t>("int64", {1}, {OC})),
                  add_constant(n.name + "/slice_axes", typed_tensor<int64_t>("int64", {1}, {1}))};
  slice.outputs = {n.outputs.at(0)};
  emit(std::move(slice));
}

// QLinearMatMul on dense_int8.x86 (strategy.h, kQLinearMatMul): acc = sum_k
// a_u8 * b_s8, so acc - zp_a * sum_k b[k, n] is the exact sum of (a - zp_a) *
// b; that per-column constant plus the optional int32 bias (kiln's 9th input,
// fold_qdq) is the requantization's bias. An activation of rank > 2 is the
// template's [rows, K] as it lies in memory: the accumulator keeps the
// node's output shape and lower_group views it as [rows, N].
void Rewriter::rewrite_qlinear_matmul(const Node& n, const ops::Workload& w,
                                      const schedule::Config& cfg) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  int64_t K = w.get("data")[1], N = w.get("weight")[1];
  const Initializer& bi = g.initializers.at(n.inputs[3]);
  std::vector<int8_t> bv(bi.data.size());
  std::copy(bi.data.begin(), bi.data.end(), reinterpret_cast<uint8_t*>(bv.data()));
  // Both dense int8 templates pack B as [ceil(N / bn)][ceil(K / 4)][bn][4]
  // (dense_int8.x86 with its config's bn, dense_int8_amx.x86 with bn = 16).
  std::vector<int64_t> b_shape = t.input_shapes(w, cfg).at(1);
  std::vector<int8_t> packed = ops::pack_dense_int8_weight(bv.data(), K, N, b_shape.at(2));
  std::string b_packed =
      add_constant(n.name + "/weight_packed", typed_tensor<int8_t>("int8", b_shape, packed));

  const TensorType& at = *g.type_of(n.inputs[0]);
  int32_t zp_a =
      int_elements(g.initializers.at(n.inputs[2])).at(0) + (at.dtype == "int8" ? 128 : 0);
  float as = g.initializers.at(n.inputs[1]).as<float>().at(0);
  std::vector<float> bs = g.initializers.at(n.inputs[4]).as<float>();
  float ys = g.initializers.at(n.inputs[6]).as<float>().at(0);
  const Initializer& yzp = g.initializers.at(n.inputs[7]);
  std::vector<int32_t> given;
  if (n.inputs.size() > 8 && !n.inputs[8].empty())
    given = g.initializers.at(n.inputs[8]).as<int32_t>();
  std::vector<int32_t> bias(static_cast<size_t>(N));
  std::vector<float> mult(static_cast<size_t>(N));
  for (int64_t j = 0; j < N; ++j) {
    int64_t colsum = 0;
    for (int64_t k = 0; k < K; ++k) colsum += bv[static_cast<size_t>(k * N + j)];
    int64_t v = (given.empty() ? 0 : given[static_cast<size_t>(j)]) - int64_t{zp_a} * colsum;
    if (v < INT32_MIN || v > INT32_MAX)
      op_util::fail(n, "the bias after the zero-point correction overflows int32");
    bias[static_cast<size_t>(j)] = static_cast<int32_t>(v);
    mult[static_cast<size_t>(j)] = as * param_at(bs, j) / ys;
  }
  std::string bias_name = add_constant(n.name + "/bias", typed_tensor<int32_t>("int32", {N}, bias));
  std::string mult_name = add_constant(n.name + "/multiplier", float_tensor({N}, mult));
  std::string a_u8 = to_uint8(n, n.inputs[0]);
  std::vector<int64_t> y_shape = g.type_of(n.outputs.at(0))->shape;
  std::string acc = fresh(n.name + "/acc", {"int32", y_shape});
  emit_template(n, t, w, cfg, {a_u8, b_packed}, acc, y_shape);
  requantize(n.name + "/requantize", acc, bias_name, mult_name, int_elements(yzp).at(0),
             yzp.type.dtype, n.outputs.at(0));
}

// A node `op`(x, extra...) with attributes, its output a new value of type t.
std::string Rewriter::unary(const Node& n, const std::string& op, const std::string& what,
                            const std::string& x, const TensorType& t,
                            const std::map<std::string, Attribute>& attrs,
                            const std::vector<std::string>& extra) {
  Node m;
  m.op_type = op;
  m.name = n.name + "/" + what;
  m.inputs = {x};
  m.inputs.insert(m.inputs.end(), extra.begin(), extra.end());
  m.outputs = {fresh(n.name + "/" + what, t)};
  m.attrs = attrs;
  std::string out = m.outputs[0];
  emit(std::move(m));
  return out;
}

// The sum of the uint8/int8 activation x over `axis` (kept, size 1), as
// int32: summed in float32, exact in any order since every partial sum is an
// integer of magnitude <= 255 * K < 2^24 (K <= 11008 by the row).
std::string Rewriter::exact_sum(const Node& n, const std::string& what, const std::string& x,
                                int64_t axis) {
  std::vector<int64_t> shape = g.type_of(x)->shape;
  std::string xf = unary(n, "Cast", what + "_float", x, {"float32", shape}, {{"to", int64_t{1}}});
  int64_t rank = static_cast<int64_t>(shape.size());
  shape[static_cast<size_t>(axis < 0 ? axis + rank : axis)] = 1;
  std::string axes =
      add_constant(n.name + "/" + what + "_axes", typed_tensor<int64_t>("int64", {1}, {axis}));
  std::string s =
      unary(n, "ReduceSum", what, xf, {"float32", shape}, {{"keepdims", int64_t{1}}}, {axes});
  return unary(n, "Cast", what + "_int32", s, {"int32", shape}, {{"to", int64_t{6}}});
}

// QLinearMatMul of two activations on batch_matmul_int8.x86 (strategy.h,
// kQLinearBatchMatMul). The template computes T = sum_k a_u8 * b_s8 with
// b_s8 = b - s (s = 128 for a uint8 b, 0 for int8), so with R = sum_k a,
// S = sum_k b (per row of a, per column of b) and d = s - zp_b:
//   sum_k (a - zp_a)(b - zp_b) = T + d * R - zp_a * S + K * zp_a * zp_b,
// exactly (every term within int32 for K <= 11008). R and S are small
// reductions beside the product; the two broadcast Adds and the
// requantization are elementwise and fuse into the template's epilogue.
// u8 x u8 (what quantizers write for attention) is thus exact, as are
// u8 x s8, s8 x u8 and s8 x s8.
void Rewriter::rewrite_qlinear_batch_matmul(const Node& n, const ops::OpTemplate& t,
                                            const ops::Workload& w, const schedule::Config& cfg) {
  int64_t Bb = w.get("b")[0], K = w.get("a")[2], N = w.get("b")[2];
  std::vector<std::vector<int64_t>> in_shapes = t.input_shapes(w, cfg);
  int64_t NB = in_shapes.at(1)[1], KO = in_shapes.at(1)[2], bn = in_shapes.at(1)[3];
  const TensorType& at = *g.type_of(n.inputs[0]);
  const TensorType& bt = *g.type_of(n.inputs[3]);
  int32_t zp_a =
      int_elements(g.initializers.at(n.inputs[2])).at(0) + (at.dtype == "int8" ? 128 : 0);
  int32_t zp_b = int_elements(g.initializers.at(n.inputs[5])).at(0);
  int32_t s = bt.dtype == "uint8" ? 128 : 0, d = s - zp_b;
  float as = g.initializers.at(n.inputs[1]).as<float>().at(0);
  float bs = g.initializers.at(n.inputs[4]).as<float>().at(0);
  float ys = g.initializers.at(n.inputs[6]).as<float>().at(0);
  const Initializer& yzp = g.initializers.at(n.inputs[7]);

  // b as int8 (exactly b - 128 for uint8), then packed by K quads: [Bb, K, N]
  // -> padded with zeros to [Bb, KO * 4, NB * bn] -> [Bb, KO, 4, NB, bn] ->
  // [Bb, NB, KO, bn, 4] (dense_int8's weight layout per batch).
  std::string b8 = n.inputs[3];
  if (bt.dtype == "uint8") {
    b8 = fresh(n.name + "/b_s8", {"int8", bt.shape});
    requantize(n.name + "/b_to_s8", n.inputs[3],
               add_constant(n.name + "/b_shift", typed_tensor<int32_t>("int32", {1}, {-128})),
               add_constant(n.name + "/b_one", float_tensor({1}, {1.0f})), 0, "int8", b8);
  }
  auto reshape = [&](const std::string& x, const std::string& what,
                     const std::vector<int64_t>& shape) {
    std::string sh = add_constant(n.name + "/" + what + "_shape",
                                  typed_tensor<int64_t>("int64", {int64_t(shape.size())}, shape));
    return unary(n, "Reshape", what, x, {"int8", shape}, {}, {sh});
  };
  std::string b3 = reshape(b8, "b_3d", {Bb, K, N});
  if (KO * 4 != K || NB * bn != N) {
    std::string pads =
        add_constant(n.name + "/b_pads",
                     typed_tensor<int64_t>("int64", {6}, {0, 0, 0, 0, KO * 4 - K, NB * bn - N}));
    b3 = unary(n, "Pad", "b_padded", b3, {"int8", {Bb, KO * 4, NB * bn}}, {}, {pads});
  }
  std::string b5 = reshape(b3, "b_quads", {Bb, KO, 4, NB, bn});
  std::string b_packed = unary(n, "Transpose", "b_packed", b5, {"int8", in_shapes.at(1)},
                               {{"perm", std::vector<int64_t>{0, 3, 1, 4, 2}}});

  std::string a_u8 = to_uint8(n, n.inputs[0]);
  std::vector<int64_t> y_shape = g.type_of(n.outputs.at(0))->shape;
  std::string acc = fresh(n.name + "/acc", {"int32", y_shape});
  emit_template(n, t, w, cfg, {a_u8, b_packed}, acc, y_shape);
  auto scaled_add = [&](const std::string& sum, const std::string& what, const std::string& v,
                        int32_t factor) {
    std::string f =
        add_constant(n.name + "/" + what + "_factor", typed_tensor<int32_t>("int32", {}, {factor}));
    Node mul;
    mul.op_type = "Mul";
    mul.name = n.name + "/" + what + "_scaled";
    mul.inputs = {v, f};
    mul.outputs = {fresh(mul.name, *g.type_of(v))};
    std::string scaled = mul.outputs[0];
    emit(std::move(mul));
    std::string out = fresh(n.name + "/" + what + "_added", {"int32", y_shape});
    add(n.name + "/" + what + "_add", sum, scaled, out);
    return out;
  };
  if (d != 0) acc = scaled_add(acc, "row_sum", exact_sum(n, "row_sum", a_u8, -1), d);
  if (zp_a != 0) acc = scaled_add(acc, "col_sum", exact_sum(n, "col_sum", n.inputs[3], -2), -zp_a);
  int64_t c = K * int64_t{zp_a} * zp_b;
  std::string bias = add_constant(n.name + "/bias",
                                  typed_tensor<int32_t>("int32", {1}, {static_cast<int32_t>(c)}));
  // ONNX Runtime's order, in float32: (a_scale * b_scale) / y_scale.
  std::string mult = add_constant(n.name + "/multiplier", float_tensor({1}, {as * bs / ys}));
  requantize(n.name + "/requantize", acc, bias, mult, int_elements(yzp).at(0), yzp.type.dtype,
             n.outputs.at(0));
}

// Gemm's alpha goes into the packed weight and beta into a constant C. bf16:
// alpha * B rounded to bf16 and packed by K pairs (dense_bf16.h).
void Rewriter::rewrite_dense(const Node& n, const ops::OpTemplate& t, const ops::Workload& w,
                             const schedule::Config& cfg, bool bf16) {
  bool gemm = n.op_type == "Gemm";
  bool trans_b = gemm && n.attr<int64_t>("transB").value_or(0) != 0;
  float alpha = gemm ? n.attr<float>("alpha").value_or(1.0f) : 1.0f;
  float beta = gemm ? n.attr<float>("beta").value_or(1.0f) : 1.0f;
  const TensorType& yt = *g.type_of(n.outputs.at(0));
  int64_t K = w.get("weight")[0], N = w.get("weight")[1];

  std::vector<float> b = g.initializers.at(n.inputs[1]).as<float>();
  std::vector<float> b_kn(static_cast<size_t>(K * N));
  for (int64_t i = 0; i < K; ++i)
    for (int64_t j = 0; j < N; ++j)
      b_kn[i * N + j] = alpha * (trans_b ? b[j * K + i] : b[i * N + j]);
  auto in_shapes = t.input_shapes(w, cfg);
  std::string b_packed;
  if (bf16) {
    b_packed = add_constant(
        n.name + "/weight_packed",
        typed_tensor<uint16_t>("bfloat16", in_shapes.at(1),
                               ops::pack_dense_bf16_weight(b_kn.data(), K, N, in_shapes[1][2])));
  } else {
    int64_t bn = in_shapes.at(1).back();
    std::vector<float> packed = ops::pack_dense_weight(b_kn.data(), K, N, bn);
    b_packed = add_constant(n.name + "/weight_packed", float_tensor(in_shapes.at(1), packed));
  }

  bool has_c = gemm && n.inputs.size() > 2 && !n.inputs[2].empty() && beta != 0.0f;
  std::string y = has_c ? fresh(n.name + "/dense", yt) : n.outputs[0];
  emit_template(n, t, w, cfg, {n.inputs[0], b_packed}, y, yt.shape);
  if (!has_c) return;
  std::string c = n.inputs[2];
  if (beta != 1.0f) {  // select_templates only covers a constant C here
    const Initializer& c0 = g.initializers.at(c);
    std::vector<float> cv = c0.as<float>();
    for (float& v : cv) v *= beta;
    c = add_constant(n.name + "/c_scaled", float_tensor(c0.type.shape, cv));
  }
  add(n.name + "/c_add", y, c, n.outputs[0]);
}

}  // namespace

std::vector<TemplateUse> apply_templates(Graph& g, const std::vector<TemplateSelection>& selected,
                                         const std::map<std::string, std::string>& configs,
                                         const Isa& isa) {
  std::map<std::string, const TemplateSelection*> by_node;
  for (const TemplateSelection& s : selected) by_node[s.node] = &s;
  Rewriter rw{g, configs, isa, {}, {}, 0, {}, {}};
  for (const Node& n : g.nodes) {
    auto it = by_node.find(n.name);
    if (it == by_node.end()) {
      rw.emit(n);
      continue;
    }
    rw.rewrite(n, *it->second);
    by_node.erase(it);
  }
  if (!by_node.empty())
    throw std::invalid_argument("apply_templates: no node named '" + by_node.begin()->first + "'");
  g.nodes = std::move(rw.out);
  return rw.uses;
}

}  // namespace kiln::graph
