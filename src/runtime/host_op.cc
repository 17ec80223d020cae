#include "runtime/host_op.h"

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
  out->shape = std::move(shape);
  out->data = buffer->reserve(n * out->dtype.bytes());
  return out->data;
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
    register_pool_host_ops(m);
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
