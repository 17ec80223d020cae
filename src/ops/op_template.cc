#include "ops/op_template.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

#include "ir/functor.h"
#include "ops/batch_matmul.h"
#include "ops/batch_matmul_int8.h"
#include "ops/batch_matmul_int8_amx.h"
#include "ops/conv2d.h"
#include "ops/conv2d_bf16.h"
#include "ops/conv2d_int8.h"
#include "ops/conv2d_int8_amx.h"
#include "ops/dense.h"
#include "ops/dense_bf16.h"
#include "ops/dense_bf16_amx_template.h"
#include "ops/dense_int8.h"
#include "ops/dense_int8_amx_template.h"
#include "ops/depthwise_conv2d.h"
#include "ops/depthwise_conv2d_int8.h"
#include "ops/group_conv2d.h"
#include "ops/group_conv2d_lanes.h"
#include "ops/reference.h"
#include "ops/winograd_conv2d.h"
#include "ops/winograd_conv2d_int8.h"

namespace kiln::ops {

namespace {

// The registry: every template kiln knows, in a fixed order.
const std::vector<const OpTemplate*>& registry() {
  static const std::vector<const OpTemplate*> all = {
      &conv2d_nchwc_template(),
      &depthwise_conv2d_nchwc_template(),
      &dense_pack_template(),
      &dense_nopack_template(),
      &batch_matmul_template(),
      &group_conv2d_nchwc_template(),
      &conv2d_winograd_nchwc_template(),
      &dense_int8_template(),
      &dense_int8_amx_template(),
      &conv2d_nchwc_int8_template(),
      &conv2d_nchwc_int8_amx_template(),
      &depthwise_conv2d_nchwc_int8_template(),
      &batch_matmul_int8_template(),
      &batch_matmul_int8_amx_template(),
      &dense_bf16_template(),
      &dense_bf16_amx_template(),
      &conv2d_nchwc_bf16_template(),
      &group_conv2d_lanes_nchwc_template(),
      &conv2d_winograd_nchwc_int8_template(),
  };
  return all;
}

}  // namespace

const OpTemplate* find_template(const std::string& name) {
  for (const OpTemplate* t : registry())
    if (t->name() == name) return t;
  return nullptr;
}

const OpTemplate& get_template(const std::string& name) {
  if (const OpTemplate* t = find_template(name)) return *t;
  std::string known;
  for (auto& n : template_names()) known += (known.empty() ? "" : ", ") + n;
  throw std::invalid_argument("unknown operator template '" + name + "' (known: " + known + ")");
}

std::vector<std::string> template_names() {
  std::vector<std::string> names;
  for (const OpTemplate* t : registry()) names.push_back(t->name());
  return names;
}

std::vector<ir::DataType> OpTemplate::input_dtypes(const Workload& w) const {
  // Any config has the same number of inputs; the fallback of any row is one.
  return std::vector<ir::DataType>(input_shapes(w, fallback(w, Isa{})).size(), ir::DataType::f32());
}

void OpTemplate::reference_typed(const Workload& w, const schedule::Config& cfg,
                                 const std::vector<const void*>& inputs, void* output) const {
  std::vector<const float*> f;
  for (const void* p : inputs) f.push_back(static_cast<const float*>(p));
  reference(w, cfg, f, static_cast<float*>(output));
}

void OpTemplate::fill_random_input(const Workload&, size_t, ir::DataType t, void* data, int64_t n,
                                   std::mt19937_64& rng) const {
  fill_random(t, data, n, rng);
}

void fill_random(ir::DataType t, void* data, int64_t n, std::mt19937_64& rng) {
  if (t == ir::DataType::f32()) {
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    auto* p = static_cast<float*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
  } else if (t == ir::DataType::u8() || t == ir::DataType::i8()) {
    std::uniform_int_distribution<int> d(0, 255);
    auto* p = static_cast<uint8_t*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(d(rng));
  } else if (t == ir::DataType::bf16()) {
    // float32 uniform in [-1, 1] rounded to bf16 (nearest even): weights as
    // kiln build --precision bf16 packs them.
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    auto* p = static_cast<uint16_t*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] = ir::f32_to_bf16_value(d(rng));
  } else if (t == ir::DataType::i16()) {
    std::uniform_int_distribution<int> d(-32768, 32767);
    auto* p = static_cast<int16_t*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<int16_t>(d(rng));
  } else if (t == ir::DataType::i32()) {
    std::uniform_int_distribution<int32_t> d(-(1 << 20), 1 << 20);
    auto* p = static_cast<int32_t*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
  } else {
    throw std::invalid_argument("no random data for element type " + t.str());
  }
}

double max_error(ir::DataType t, const void* out, const void* ref, int64_t n) {
  if (t == ir::DataType::f32())
    return reference::max_relative_error(static_cast<const float*>(out),
                                         static_cast<const float*>(ref), n);
  if (!t.is_integer()) throw std::invalid_argument("no comparison for element type " + t.str());
  return std::memcmp(out, ref, size_t(n) * t.bytes()) == 0 ? 0.0 : INFINITY;
}

std::string graph_dtype_name(ir::DataType t) {
  if (t == ir::DataType::f32()) return "float32";
  if (t == ir::DataType::u8()) return "uint8";
  if (t == ir::DataType::i8()) return "int8";
  if (t == ir::DataType::i16()) return "int16";
  if (t == ir::DataType::i32()) return "int32";
  if (t == ir::DataType::bf16()) return "bfloat16";
  throw std::invalid_argument("element type " + t.str() + " has no graph dtype");
}

ir::DataType dtype_from_graph_name(const std::string& name) {
  for (ir::DataType t : {ir::DataType::f32(), ir::DataType::u8(), ir::DataType::i8(),
                         ir::DataType::i16(), ir::DataType::i32(), ir::DataType::bf16()})
    if (graph_dtype_name(t) == name) return t;
  throw std::invalid_argument("dtype '" + name +
                              "' is none of float32, uint8, int8, int16, int32, bfloat16");
}

std::pair<int64_t, int64_t> layout_blocks(const OpTemplate& t, const Workload& w,
                                          const schedule::Config& cfg) {
  if (!t.channel_blocked()) return {0, 0};
  return {t.input_shapes(w, cfg).at(0).back(), t.output_shape(w, cfg).back()};
}

std::pair<int64_t, int64_t> fallback_layout_blocks(const OpTemplate& t, const Workload& w) {
  return layout_blocks(t, w, t.fallback(w, Isa{}));  // any row: blocks do not depend on it
}

Kernel make_kernel(const OpTemplate& t, const Workload& w, const schedule::Config& cfg) {
  TemplateInstance inst = t.compute(w, cfg);
  std::string name = t.name();
  std::replace(name.begin(), name.end(), '.', '_');
  Kernel k{name, inst.inputs, schedule::create_schedule({inst.anchor})};
  k.args.push_back(inst.anchor);
  t.schedule(k.sch, inst, inst.anchor, cfg);
  return k;
}

ir::Stmt OpTemplate::build_loops(const Workload& w, const schedule::Config&,
                                 const std::vector<ir::Buffer>&, const TaskEpilogue&) const {
  throw std::logic_error(w.key() + ": " + name() + " is lowered through its schedule");
}

bool has_fact(const TemplateInstance& inst, const char* fact) {
  auto it = inst.facts.find(fact);
  return it != inst.facts.end() && it->second != 0;
}

ir::LoweredFunc lower_template_kernel(const OpTemplate& t, const Workload& w,
                                      const schedule::Config& cfg,
                                      const schedule::LowerOptions& options) {
  std::string name = t.name();
  std::replace(name.begin(), name.end(), '.', '_');
  if (!t.builds_own_loops()) {
    Kernel k = make_kernel(t, w, cfg);
    return schedule::lower(k.sch, k.args, k.name, options);
  }
  TemplateInstance inst = t.compute(w, cfg);
  std::vector<ir::Buffer> args;
  for (const ir::Tensor& x : inst.inputs)
    args.push_back(ir::make_buffer(x->name, x->dtype, x->shape, ir::MemScope::Global));
  args.push_back(ir::make_buffer(inst.anchor->name, inst.anchor->dtype, inst.anchor->shape,
                                 ir::MemScope::Global));
  ir::Stmt body = t.build_loops(w, cfg, args, nullptr);
  return ir::LoweredFunc{name, args, body};
}

namespace detail {

std::vector<int64_t> const_shape(const ir::Tensor& t) {
  std::vector<int64_t> s;
  for (auto& d : t->shape) {
    const int64_t* v = ir::as_const_int(d);
    if (!v) throw std::invalid_argument("tensor '" + t->name + "' has a non-constant shape");
    s.push_back(*v);
  }
  return s;
}

bool epilogue_is_heavy(const ir::Tensor& anchor, const ir::Tensor& output) {
  std::set<const ir::TensorNode*> own;
  for (auto& t : ir::post_order({anchor})) own.insert(t.get());
  bool heavy = false;
  for (auto& t : ir::post_order({output})) {
    if (own.count(t.get()) || t->is_placeholder) continue;
    ir::post_order_visit(t->body, [&](const ir::Expr& e) {
      if (auto* c = e.as<ir::CallNode>()) {
        using ir::Intrinsic;
        heavy |= c->op == Intrinsic::Exp || c->op == Intrinsic::Log || c->op == Intrinsic::Tanh ||
                 c->op == Intrinsic::Erf || c->op == Intrinsic::Sigmoid ||
                 c->op == Intrinsic::Pow || is_transcendental_trig(c->op);
      }
      heavy |= e.kind() == ir::ExprKind::Div && e.dtype().is_float();
    });
  }
  return heavy;
}

TileStages prepare_anchor(schedule::Schedule& sch, const ir::Tensor& anchor,
                          const ir::Tensor& output, const std::string& template_name) {
  if (output != anchor && const_shape(output) != const_shape(anchor))
    throw std::invalid_argument(template_name + ": epilogue '" + output->name +
                                "' must have the shape of the anchor '" + anchor->name + "'");
  std::set<const ir::TensorNode*> own;
  for (auto& t : ir::post_order({anchor})) own.insert(t.get());
  for (const schedule::Stage& s : sch.stages()) {
    if (s->is_placeholder() || s->origin == output || own.count(s->origin.get())) continue;
    if (!s->op->reduce_axis.empty())
      throw std::invalid_argument(template_name + ": epilogue stage '" + s->op->name +
                                  "' is a reduction; only injective epilogues can be fused");
    s->compute_inline();
  }
  if (output == anchor) {
    ir::Tensor cache = sch.cache_write(anchor, ir::MemScope::Local);
    return {sch[cache], sch[anchor]};
  }
  sch[anchor]->set_scope(ir::MemScope::Local);
  return {sch[anchor], sch[output]};
}

int64_t largest_divisor_at_most(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
}

schedule::Config config_from_knobs(const schedule::ConfigSpace& space, const std::string& knobs) {
  return schedule::Config::from_json(space, "{\"knobs\": {" + knobs + "}}");
}

KnobValues& KnobValues::split(const std::string& name, int64_t extent,
                              const std::vector<int64_t>& inner) {
  int64_t p = 1;
  for (int64_t f : inner) p *= f;
  std::string v = std::to_string((extent + p - 1) / p);
  for (int64_t f : inner) v += ", " + std::to_string(f);
  if (!text_.empty()) text_ += ", ";
  text_ += "\"" + name + "\": [" + v + "]";
  return *this;
}

KnobValues& KnobValues::knob(const std::string& name, int64_t value) {
  if (!text_.empty()) text_ += ", ";
  text_ += "\"" + name + "\": " + std::to_string(value);
  return *this;
}

schedule::Config KnobValues::in(const schedule::ConfigSpace& space) const {
  return config_from_knobs(space, text_);
}

void bad_workload(const Workload& w, const std::string& what) {
  throw std::invalid_argument("workload " + w.key() + ": " + what);
}

}  // namespace detail
}  // namespace kiln::ops
