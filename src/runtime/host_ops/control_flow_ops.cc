// If, Loop and Scan: the executor runs their subgraphs (HostSubgraph) on the
// host. Loop-carried values pass from one iteration to the next without a
// copy where the body computed them (HostSubgraph::carry); Scan reads its
// slices along axis 0 in place.
#include <cstring>
#include <limits>

#include "runtime/host_op.h"

namespace kiln::runtime {

namespace {

bool bool_value(const HostOpContext& ctx, const HostValue& v, const char* what) {
  if (v.none || v.is_sequence() || v.numel() != 1)
    ctx.fail(std::string(what) + " must be a tensor of one element, not " +
             host_shape_str(v.shape));
  bool b = false;
  dispatch_dtype(ctx, v.dtype, [&](auto t) { b = v.as<decltype(t)>()[0] != 0; });
  return b;
}

void if_op(HostOpContext& ctx) {
  const bool cond = bool_value(ctx, ctx.required(0), "the condition");
  HostSubgraph& branch = ctx.subgraph(cond ? "then_branch" : "else_branch");
  if (branch.num_outputs() < ctx.num_outputs())
    ctx.fail(std::string(cond ? "then_branch" : "else_branch") + " has " +
             std::to_string(branch.num_outputs()) + " outputs; the node has " +
             std::to_string(ctx.num_outputs()));
  branch.run();
  for (size_t i = 0; i < ctx.num_outputs(); ++i) ctx.copy_to_output(i, branch.output(i));
}

// Appends the bytes of `v` to scan output `k`'s accumulator (scratch k),
// checking that every iteration gives the same shape.
struct ScanAccumulator {
  std::vector<int64_t> shape;
  int64_t bytes = 0;  // of one iteration's value
  int64_t used = 0;
};

void loop_op(HostOpContext& ctx) {
  HostSubgraph& body = ctx.subgraph("body");
  const HostValue* trip = ctx.input(0);
  const HostValue* cond_in = ctx.input(1);
  int64_t max_trip = std::numeric_limits<int64_t>::max();
  if (trip && !trip->none) {
    std::vector<int64_t> m = ctx.int_values(0);
    if (m.size() != 1) ctx.fail("the trip count must hold one value");
    max_trip = m[0];
  }
  bool cond = cond_in && !cond_in->none ? bool_value(ctx, *cond_in, "the condition") : true;
  const size_t carried = ctx.num_inputs() < 2 ? 0 : ctx.num_inputs() - 2;
  if (body.num_inputs() != carried + 2 || body.num_outputs() < carried + 1)
    ctx.fail("the body takes " + std::to_string(body.num_inputs()) + " inputs and gives " +
             std::to_string(body.num_outputs()) + " outputs, but the node carries " +
             std::to_string(carried) + " values");
  const size_t scans = body.num_outputs() - 1 - carried;
  for (size_t k = 0; k < carried; ++k) body.bind_input(2 + k, ctx.required(2 + k));

  int64_t iter = 0;
  uint8_t cond_byte = 1;
  HostValue iter_value, cond_value;
  iter_value.dtype = DType::i64(), iter_value.data = &iter;
  cond_value.dtype = DType::parse("bool"), cond_value.data = &cond_byte;
  std::vector<ScanAccumulator> acc(scans);
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t k = 0; k < carried; ++k) pairs.push_back({1 + k, 2 + k});
  for (; iter < max_trip && cond; ++iter) {
    cond_byte = 1;
    body.bind_input(0, iter_value);
    body.bind_input(1, cond_value);
    body.run();
    cond = bool_value(ctx, body.output(0), "the body's condition output");
    for (size_t s = 0; s < scans; ++s) {
      const HostValue& v = body.output(1 + carried + s);
      if (v.none || v.is_sequence())
        ctx.fail("scan output " + std::to_string(s) + " is not a tensor");
      ScanAccumulator& a = acc[s];
      if (iter == 0) a.shape = v.shape, a.bytes = v.nbytes();
      if (v.shape != a.shape)
        ctx.fail("scan output " + std::to_string(s) + " is " + host_shape_str(v.shape) +
                 " in iteration " + std::to_string(iter) + " but " + host_shape_str(a.shape) +
                 " in the first");
      char* dst = static_cast<char*>(ctx.scratch(s).grow(a.used, a.used + a.bytes));
      if (a.bytes > 0) std::memcpy(dst + a.used, v.data, static_cast<size_t>(a.bytes));
      a.used += a.bytes;
    }
    body.carry(pairs);
  }
  for (size_t k = 0; k < carried; ++k) ctx.copy_to_output(k, body.input(2 + k));
  for (size_t s = 0; s < scans; ++s) {
    std::vector<int64_t> shape = {iter};
    shape.insert(shape.end(), acc[s].shape.begin(), acc[s].shape.end());
    void* out = ctx.allocate(carried + s, shape);
    if (acc[s].used > 0)
      std::memcpy(out, ctx.scratch(s).grow(acc[s].used, acc[s].used),
                  static_cast<size_t>(acc[s].used));
  }
}

// One scan input: slices along `axis`, in `reverse` order or not.
struct ScanInput {
  const HostValue* value = nullptr;
  int64_t axis = 0;
  bool reverse = false;
  std::vector<int64_t> slice_shape;
  int64_t outer = 1, inner_bytes = 0;  // around the axis
};

std::vector<int64_t> attr_or(const HostOpContext& ctx, const char* name, size_t n) {
  std::vector<int64_t> v = ctx.attr_ints(name);
  if (v.empty()) v.assign(n, 0);
  if (v.size() != n)
    ctx.fail(std::string("attribute ") + name + " has " + std::to_string(v.size()) +
             " values for " + std::to_string(n));
  return v;
}

void scan_op(HostOpContext& ctx) {
  HostSubgraph& body = ctx.subgraph("body");
  const int64_t m = ctx.attr_int("num_scan_inputs", -1);
  if (m < 1 || static_cast<size_t>(m) > ctx.num_inputs())
    ctx.fail("num_scan_inputs " + std::to_string(m) + " is out of range");
  const size_t states = ctx.num_inputs() - static_cast<size_t>(m);
  if (body.num_inputs() != ctx.num_inputs() || body.num_outputs() < states)
    ctx.fail("the body's inputs and outputs do not match the node's");
  const size_t scan_outs = body.num_outputs() - states;
  std::vector<int64_t> in_axes = attr_or(ctx, "scan_input_axes", m);
  std::vector<int64_t> in_dirs = attr_or(ctx, "scan_input_directions", m);
  std::vector<int64_t> out_axes = attr_or(ctx, "scan_output_axes", scan_outs);
  std::vector<int64_t> out_dirs = attr_or(ctx, "scan_output_directions", scan_outs);

  std::vector<ScanInput> ins(m);
  int64_t length = -1;
  for (int64_t j = 0; j < m; ++j) {
    ScanInput& in = ins[j];
    in.value = &ctx.required(states + j);
    const int64_t rank = static_cast<int64_t>(in.value->shape.size());
    if (rank == 0) ctx.fail("scan input " + std::to_string(j) + " is a scalar");
    in.axis = host_axis(ctx, in_axes[j], rank, "scan_input_axes");
    in.reverse = in_dirs[j] != 0;
    const int64_t len = in.value->shape[in.axis];
    if (length >= 0 && len != length)
      ctx.fail("scan input " + std::to_string(j) + " has " + std::to_string(len) +
               " slices, the first " + std::to_string(length));
    length = len;
    in.slice_shape = in.value->shape;
    in.slice_shape.erase(in.slice_shape.begin() + in.axis);
    for (int64_t a = 0; a < in.axis; ++a) in.outer *= in.value->shape[a];
    in.inner_bytes =
        host_numel(in.slice_shape) / std::max<int64_t>(in.outer, 1) * in.value->dtype.bytes();
  }
  for (size_t k = 0; k < states; ++k) body.bind_input(k, ctx.required(k));
  std::vector<std::pair<size_t, size_t>> pairs;
  for (size_t k = 0; k < states; ++k) pairs.push_back({k, k});

  std::vector<HostValue> slices(m);
  std::vector<std::vector<int64_t>> out_shapes(scan_outs);
  for (int64_t t = 0; t < length; ++t) {
    for (int64_t j = 0; j < m; ++j) {
      const ScanInput& in = ins[j];
      const int64_t at = in.reverse ? length - 1 - t : t;
      HostValue& s = slices[j];
      s.dtype = in.value->dtype;
      s.shape = in.slice_shape;
      const char* src = in.value->as<char>();
      if (in.outer == 1) {  // contiguous: a view
        s.data = const_cast<char*>(src) + at * in.inner_bytes;
      } else {
        char* dst = static_cast<char*>(ctx.scratch(j).reserve(in.outer * in.inner_bytes));
        for (int64_t o = 0; o < in.outer; ++o)
          std::memcpy(dst + o * in.inner_bytes, src + (o * length + at) * in.inner_bytes,
                      static_cast<size_t>(in.inner_bytes));
        s.data = dst;
      }
      body.bind_input(states + j, s);
    }
    body.run();
    for (size_t k = 0; k < scan_outs; ++k) {
      const HostValue& v = body.output(states + k);
      if (v.none || v.is_sequence())
        ctx.fail("scan output " + std::to_string(k) + " is not a tensor");
      const int64_t rank = static_cast<int64_t>(v.shape.size());
      const int64_t axis = host_axis(ctx, out_axes[k], rank + 1, "scan_output_axes");
      if (t == 0) {
        out_shapes[k] = v.shape;
        std::vector<int64_t> shape = v.shape;
        shape.insert(shape.begin() + axis, length);
        ctx.allocate(states + k, shape);
      } else if (v.shape != out_shapes[k]) {
        ctx.fail("scan output " + std::to_string(k) + " changes shape from " +
                 host_shape_str(out_shapes[k]) + " to " + host_shape_str(v.shape));
      }
      int64_t outer = 1;
      for (int64_t a = 0; a < axis; ++a) outer *= v.shape[a];
      const int64_t block = v.nbytes() / std::max<int64_t>(outer, 1);
      const int64_t at = out_dirs[k] != 0 ? length - 1 - t : t;
      char* dst = static_cast<char*>(ctx.output_data(states + k));
      for (int64_t o = 0; o < outer; ++o)
        std::memcpy(dst + (o * length + at) * block, v.as<char>() + o * block,
                    static_cast<size_t>(block));
    }
    body.carry(pairs);
  }
  for (size_t k = 0; k < states; ++k) ctx.copy_to_output(k, body.input(k));
  if (length == 0)
    for (size_t k = 0; k < scan_outs; ++k) ctx.allocate(states + k, {0});
}

}  // namespace

void register_control_flow_host_ops(std::map<std::string, HostOpFn>& t) {
  t["If"] = if_op;
  t["Loop"] = loop_op;
  t["Scan"] = scan_op;
}

}  // namespace kiln::runtime
