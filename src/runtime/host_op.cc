#include "runtime/host_op.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <stdexcept>

namespace kiln::runtime {

int64_t host_numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) throw std::runtime_error("negative dimension in " + host_shape_str(shape));
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d)
      throw std::runtime_error("shape " + host_shape_str(shape) + " is too large");
    n *= d;
  }
  return n;
}

int64_t HostValue::numel() const { return host_numel(shape); }

std::vector<int64_t> host_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

std::string host_shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t host_axis(const HostOpContext& ctx, int64_t axis, int64_t rank, const char* what) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    ctx.fail(std::string(what) + " " + std::to_string(axis) + " is out of range for rank " +
             std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

void* HostBuffer::reserve(int64_t bytes) {
  // At least one byte, so that a zero-size tensor still has an address.
  int64_t want = std::max<int64_t>(bytes, 1);
  if (!array_.defined() || array_.nbytes() < want) array_ = NDArray::empty({want}, DType::u8());
  return array_.data();
}

void* HostBuffer::grow(int64_t keep, int64_t bytes) {
  if (array_.defined() && array_.nbytes() >= bytes) return array_.data();
  int64_t want = std::max<int64_t>({bytes, 64, array_.defined() ? 2 * array_.nbytes() : 0});
  NDArray bigger = NDArray::empty({want}, DType::u8());
  if (keep > 0) std::memcpy(bigger.data(), array_.data(), static_cast<size_t>(keep));
  array_ = std::move(bigger);
  return array_.data();
}

HostBuffer& HostBuffer::element(size_t j) {
  if (elements_.size() <= j) elements_.resize(j + 1);
  return elements_[j];
}

namespace {

void copy_tensor(const HostValue& src, HostValue* dst, HostBuffer* buffer) {
  dst->dtype = src.dtype;
  dst->shape = src.shape;
  const int64_t bytes = src.nbytes();
  dst->data = buffer->reserve(bytes);
  if (bytes > 0) std::memcpy(dst->data, src.data, static_cast<size_t>(bytes));
}

}  // namespace

void copy_host_value(const HostValue& src, HostValue* dst, HostBuffer* buffer) {
  dst->none = src.none;
  dst->elements.clear();
  if (src.none) return;
  if (!src.is_sequence()) {
    if (dst->is_sequence()) throw std::runtime_error("a tensor where a sequence was expected");
    copy_tensor(src, dst, buffer);
    return;
  }
  if (!dst->is_sequence()) throw std::runtime_error("a sequence where a tensor was expected");
  dst->dtype = src.dtype;
  dst->elements.resize(src.elements.size());
  for (size_t j = 0; j < src.elements.size(); ++j)
    copy_tensor(src.elements[j], &dst->elements[j], &buffer->element(j));
}

const HostValue& HostOpContext::required(size_t i) const {
  if (!input(i)) fail("input " + std::to_string(i) + " is required");
  return *input(i);
}

DType HostOpContext::output_dtype(size_t i) const {
  if (!has_output(i)) return DType::u8();
  return outputs_[i]->dtype;
}

void* HostOpContext::allocate(size_t i, std::vector<int64_t> shape) {
  HostValue* out = has_output(i) ? outputs_[i] : &scratch_;
  HostBuffer* buffer = has_output(i) ? buffers_[i] : &scratch_buffer_;
  if (!has_output(i)) out->dtype = DType::i64();  // the widest any operator writes
  int64_t n = 0;
  try {
    n = host_numel(shape);
  } catch (const std::exception& e) {
    fail("output " + std::to_string(i) + ": " + e.what());
  }
  out->none = false;
  out->elements.clear();
  out->shape = std::move(shape);
  out->data = buffer->reserve(n * out->dtype.bytes());
  return out->data;
}

void* HostOpContext::output_data(size_t i) const {
  return has_output(i) ? outputs_[i]->data : scratch_.data;
}

void HostOpContext::set_sequence(size_t i, size_t n) {
  if (!has_output(i)) return;
  HostValue* out = outputs_[i];
  if (!out->is_sequence()) fail("output " + std::to_string(i) + " is not a sequence");
  out->none = false;
  out->shape.clear();
  out->data = nullptr;
  out->elements.assign(n, HostValue{});
  for (HostValue& e : out->elements) e.dtype = out->dtype;
}

void* HostOpContext::allocate_element(size_t i, size_t j, std::vector<int64_t> shape) {
  if (!has_output(i)) return scratch_buffer_.reserve(host_numel(shape) * 8);
  HostValue& e = outputs_[i]->elements.at(j);
  e.shape = std::move(shape);
  e.data = buffers_[i]->element(j).reserve(e.numel() * e.dtype.bytes());
  return e.data;
}

void HostOpContext::set_none(size_t i) {
  if (!has_output(i)) return;
  outputs_[i]->none = true;
  outputs_[i]->elements.clear();
  outputs_[i]->shape.clear();
  outputs_[i]->data = nullptr;
}

void HostOpContext::copy_to_output(size_t i, const HostValue& v) {
  if (!has_output(i)) return;
  try {
    copy_host_value(v, outputs_[i], buffers_[i]);
  } catch (const std::exception& e) {
    fail("output " + std::to_string(i) + ": " + e.what());
  }
}

HostBuffer& HostOpContext::scratch(size_t k) const {
  if (!scratch_buffers_) fail("has no scratch memory");
  if (scratch_buffers_->size() <= k) scratch_buffers_->resize(k + 1);
  return (*scratch_buffers_)[k];
}

HostSubgraph& HostOpContext::subgraph(const std::string& name) const {
  if (subgraphs_)
    if (auto it = subgraphs_->find(name); it != subgraphs_->end()) return *it->second;
  fail("has no subgraph '" + name + "'");
}

int64_t HostOpContext::attr_int(const std::string& name, int64_t fallback) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? fallback : it->second.i;
}

double HostOpContext::attr_float(const std::string& name, double fallback) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? fallback : it->second.f;
}

std::string HostOpContext::attr_string(const std::string& name, const std::string& fallback) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? fallback : it->second.s;
}

std::vector<int64_t> HostOpContext::attr_ints(const std::string& name) const {
  auto it = attrs_.find(name);
  return it == attrs_.end() ? std::vector<int64_t>{} : it->second.ints;
}

std::vector<int64_t> HostOpContext::int_values(size_t i) const {
  const HostValue& v = required(i);
  int64_t n = v.numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  if (v.dtype == DType::i64()) {
    for (int64_t k = 0; k < n; ++k) out[k] = v.as<int64_t>()[k];
  } else if (v.dtype == DType::i32()) {
    for (int64_t k = 0; k < n; ++k) out[k] = v.as<int32_t>()[k];
  } else {
    fail("input " + std::to_string(i) + " is " + v.dtype.str() + ", not int32 or int64");
  }
  return out;
}

double HostOpContext::scalar_value(size_t i) const {
  const HostValue& v = required(i);
  if (v.numel() != 1)
    fail("input " + std::to_string(i) + " must hold one value, not " + host_shape_str(v.shape));
  double x = 0;
  dispatch_dtype(*this, v.dtype, [&](auto t) { x = static_cast<double>(v.as<decltype(t)>()[0]); });
  return x;
}

void HostOpContext::fail(const std::string& why) const { throw std::runtime_error(why); }

namespace {

const std::map<std::string, HostOpFn>& table() {
  static const std::map<std::string, HostOpFn> t = [] {
    std::map<std::string, HostOpFn> m;
    register_shape_host_ops(m);
    register_selection_host_ops(m);
    register_elementwise_host_ops(m);
    register_reduce_host_ops(m);
    register_resize_host_ops(m);
    register_control_flow_host_ops(m);
    register_sequence_host_ops(m);
    register_pool_host_ops(m);
    register_signal_host_ops(m);
    return m;
  }();
  return t;
}

}  // namespace

const HostOpFn* find_host_op(const std::string& op) {
  auto it = table().find(op);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<std::string> host_op_names() {
  std::vector<std::string> names;
  for (const auto& [name, fn] : table()) names.push_back(name);
  return names;
}

}  // namespace kiln::runtime
