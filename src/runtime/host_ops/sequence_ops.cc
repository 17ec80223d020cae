// Sequences and optionals (ONNX's non-tensor values), held by the executor:
// SequenceEmpty/Construct/At/Insert/Erase/Length, SplitToSequence,
// ConcatFromSequence, SequenceMap (its body runs once per element) and
// Optional/OptionalHasElement/OptionalGetElement. A sequence's elements each
// keep their own memory from run to run (HostBuffer::element).
#include <algorithm>
#include <cstring>

#include "runtime/host_op.h"

namespace kiln::runtime {

namespace {

const HostValue& sequence_input(const HostOpContext& ctx, size_t i) {
  const HostValue& v = ctx.required(i);
  if (v.none) ctx.fail("input " + std::to_string(i) + " is an empty optional");
  if (!v.is_sequence()) ctx.fail("input " + std::to_string(i) + " is not a sequence");
  return v;
}

// A position in a sequence of `n` (negative counts from the end); `n` itself
// is allowed where `end_ok` (an insertion at the back).
int64_t position(const HostOpContext& ctx, size_t input, int64_t n, bool end_ok) {
  std::vector<int64_t> p = ctx.int_values(input);
  if (p.size() != 1) ctx.fail("the position must hold one value");
  int64_t at = p[0] < 0 ? p[0] + n : p[0];
  if (at < 0 || at > n || (at == n && !end_ok))
    ctx.fail("position " + std::to_string(p[0]) + " is out of range for a sequence of " +
             std::to_string(n));
  return at;
}

void copy_element(HostOpContext& ctx, size_t out, size_t j, const HostValue& v) {
  if (v.none || v.is_sequence()) ctx.fail("a sequence element must be a tensor");
  void* dst = ctx.allocate_element(out, j, v.shape);
  if (v.nbytes() > 0) std::memcpy(dst, v.data, static_cast<size_t>(v.nbytes()));
}

// Output 0 as `elements` (views, copied in).
void set_elements(HostOpContext& ctx, const std::vector<const HostValue*>& elements) {
  ctx.set_sequence(0, elements.size());
  for (size_t j = 0; j < elements.size(); ++j) copy_element(ctx, 0, j, *elements[j]);
}

void sequence_empty(HostOpContext& ctx) { ctx.set_sequence(0, 0); }

void sequence_construct(HostOpContext& ctx) {
  std::vector<const HostValue*> elements;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const HostValue& v = ctx.required(i);
    if (i > 0 && v.dtype != elements[0]->dtype)
      ctx.fail("input " + std::to_string(i) + " is " + v.dtype.str() + ", input 0 " +
               elements[0]->dtype.str());
    elements.push_back(&v);
  }
  set_elements(ctx, elements);
}

void sequence_at(HostOpContext& ctx) {
  const HostValue& seq = sequence_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(seq.elements.size());
  ctx.copy_to_output(0, seq.elements[position(ctx, 1, n, false)]);
}

void sequence_insert(HostOpContext& ctx) {
  const HostValue& seq = sequence_input(ctx, 0);
  const HostValue& v = ctx.required(1);
  const int64_t n = static_cast<int64_t>(seq.elements.size());
  const int64_t at = ctx.input(2) ? position(ctx, 2, n, true) : n;
  std::vector<const HostValue*> elements;
  for (const HostValue& e : seq.elements) elements.push_back(&e);
  elements.insert(elements.begin() + at, &v);
  set_elements(ctx, elements);
}

void sequence_erase(HostOpContext& ctx) {
  const HostValue& seq = sequence_input(ctx, 0);
  const int64_t n = static_cast<int64_t>(seq.elements.size());
  const int64_t at = ctx.input(1) ? position(ctx, 1, n, false) : n - 1;
  if (at < 0) ctx.fail("erasing from an empty sequence");
  std::vector<const HostValue*> elements;
  for (int64_t j = 0; j < n; ++j)
    if (j != at) elements.push_back(&seq.elements[j]);
  set_elements(ctx, elements);
}

void sequence_length(HostOpContext& ctx) {
  *ctx.allocate_as<int64_t>(0, {}) = static_cast<int64_t>(sequence_input(ctx, 0).elements.size());
}

void split_to_sequence(HostOpContext& ctx) {
  const HostValue& in = ctx.required(0);
  const int64_t rank = static_cast<int64_t>(in.shape.size());
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", 0), rank, "axis");
  const int64_t dim = in.shape[axis];
  std::vector<int64_t> sizes;
  bool squeeze = false;
  if (!ctx.input(1)) {
    sizes.assign(dim, 1);
    squeeze = ctx.attr_int("keepdims", 1) == 0;
  } else if (ctx.input(1)->shape.empty()) {
    const int64_t each = ctx.int_values(1)[0];
    if (each <= 0) ctx.fail("split " + std::to_string(each) + " must be positive");
    for (int64_t at = 0; at < dim; at += each) sizes.push_back(std::min(each, dim - at));
  } else {
    sizes = ctx.int_values(1);
    int64_t total = 0;
    for (int64_t s : sizes) {
      if (s < 0) ctx.fail("split sizes must not be negative");
      total += s;
    }
    if (total != dim)
      ctx.fail("split sizes add up to " + std::to_string(total) + ", not the axis's " +
               std::to_string(dim));
  }
  int64_t outer = 1, inner = in.dtype.bytes();
  for (int64_t a = 0; a < axis; ++a) outer *= in.shape[a];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= in.shape[a];
  ctx.set_sequence(0, sizes.size());
  int64_t at = 0;
  for (size_t j = 0; j < sizes.size(); ++j) {
    std::vector<int64_t> shape = in.shape;
    shape[axis] = sizes[j];
    if (squeeze) shape.erase(shape.begin() + axis);
    char* dst = static_cast<char*>(ctx.allocate_element(0, j, shape));
    const int64_t chunk = sizes[j] * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * chunk, in.as<char>() + (o * dim + at) * inner,
                  static_cast<size_t>(chunk));
    at += sizes[j];
  }
}

void concat_from_sequence(HostOpContext& ctx) {
  const HostValue& seq = sequence_input(ctx, 0);
  if (seq.elements.empty()) ctx.fail("the sequence is empty");
  const bool new_axis = ctx.attr_int("new_axis", 0) != 0;
  const std::vector<int64_t>& first = seq.elements[0].shape;
  const int64_t rank = static_cast<int64_t>(first.size()) + (new_axis ? 1 : 0);
  const int64_t axis = host_axis(ctx, ctx.attr_int("axis", 0), rank, "axis");
  // Every element as [outer, d, inner] with d = 1 on a new axis.
  std::vector<int64_t> out = first;
  if (new_axis) out.insert(out.begin() + axis, 0);
  out[axis] = 0;
  int64_t outer = 1, inner = seq.dtype.bytes();
  for (int64_t a = 0; a < axis; ++a) outer *= out[a];
  for (int64_t a = axis + 1; a < rank; ++a) inner *= out[a];
  for (size_t j = 0; j < seq.elements.size(); ++j) {
    std::vector<int64_t> s = seq.elements[j].shape;
    if (new_axis) s.insert(s.begin() + axis, 1);
    for (int64_t a = 0; a < rank; ++a)
      if (a != axis && (static_cast<int64_t>(s.size()) != rank || s[a] != out[a]))
        ctx.fail("element " + std::to_string(j) + " is " + host_shape_str(seq.elements[j].shape) +
                 ", which does not concatenate with " + host_shape_str(first));
    out[axis] += s[axis];
  }
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  const int64_t row = out[axis] * inner;
  int64_t at = 0;
  for (const HostValue& e : seq.elements) {
    const int64_t d = new_axis ? 1 : e.shape[axis];
    const int64_t chunk = d * inner;
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + o * row + at, e.as<char>() + o * chunk, static_cast<size_t>(chunk));
    at += chunk;
  }
}

// SequenceMap: the body runs once per position; sequence inputs give it their
// element there, tensors themselves; each body output is one element of the
// matching output sequence.
void sequence_map(HostOpContext& ctx) {
  HostSubgraph& body = ctx.subgraph("body");
  const HostValue& first = sequence_input(ctx, 0);
  const size_t n = first.elements.size();
  if (body.num_inputs() != ctx.num_inputs() || body.num_outputs() != ctx.num_outputs())
    ctx.fail("the body's inputs and outputs do not match the node's");
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const HostValue& v = ctx.required(i);
    if (v.is_sequence() && v.elements.size() != n)
      ctx.fail("input " + std::to_string(i) + " has " + std::to_string(v.elements.size()) +
               " elements, input 0 " + std::to_string(n));
    if (!v.is_sequence()) body.bind_input(i, v);
  }
  for (size_t k = 0; k < ctx.num_outputs(); ++k) ctx.set_sequence(k, n);
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < ctx.num_inputs(); ++i)
      if (ctx.required(i).is_sequence()) body.bind_input(i, ctx.required(i).elements[j]);
    body.run();
    for (size_t k = 0; k < ctx.num_outputs(); ++k) copy_element(ctx, k, j, body.output(k));
  }
}

void optional_op(HostOpContext& ctx) {
  if (ctx.input(0))
    ctx.copy_to_output(0, *ctx.input(0));
  else
    ctx.set_none(0);
}

void optional_has_element(HostOpContext& ctx) {
  const HostValue* v = ctx.input(0);
  *ctx.allocate_as<uint8_t>(0, {}) = v && !v->none ? 1 : 0;
}

void optional_get_element(HostOpContext& ctx) {
  const HostValue& v = ctx.required(0);
  if (v.none) ctx.fail("the optional is empty");
  ctx.copy_to_output(0, v);
}

}  // namespace

void register_sequence_host_ops(std::map<std::string, HostOpFn>& t) {
  t["SequenceEmpty"] = sequence_empty;
  t["SequenceConstruct"] = sequence_construct;
  t["SequenceAt"] = sequence_at;
  t["SequenceInsert"] = sequence_insert;
  t["SequenceErase"] = sequence_erase;
  t["SequenceLength"] = sequence_length;
  t["SplitToSequence"] = split_to_sequence;
  t["ConcatFromSequence"] = concat_from_sequence;
  t["SequenceMap"] = sequence_map;
  t["Optional"] = optional_op;
  t["OptionalHasElement"] = optional_has_element;
  t["OptionalGetElement"] = optional_get_element;
}

}  // namespace kiln::runtime
