// Host operators: the operators whose output shapes are known only at run
// time (NonZero, Unique, Compress, NonMaxSuppression, TopK with a run-time k,
// Reshape/Expand/Tile/Slice/... fed by run-time values) and the operators
// that read their outputs. The build compiles everything else into kernels
// with static shapes as before; these run after the kernels, in the
// executor, on tensors sized per run (runtime/host_region.h).
//
// Each operator is one function over HostOpContext: it reads its inputs'
// run-time shapes and data, computes the output shapes, asks for the output
// buffers (which keep their capacity from run to run, so repeated shapes
// allocate nothing after the first run) and fills them. Errors throw
// std::runtime_error; the region adds the node's name.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "runtime/ndarray.h"

namespace kiln::runtime {

// A value as a host operator sees it: a tensor (dtype, this run's shape,
// data), or a sequence of tensors (`elements`, each of `dtype`); either may be
// an optional's, which `none` marks empty.
struct HostValue {
  enum class Kind { kTensor, kSequence };
  Kind kind = Kind::kTensor;
  bool none = false;
  DType dtype;
  std::vector<int64_t> shape;
  void* data = nullptr;
  std::vector<HostValue> elements;

  bool is_sequence() const { return kind == Kind::kSequence; }

  int64_t numel() const;
  int64_t nbytes() const { return numel() * dtype.bytes(); }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data);
  }
};

// A host value's memory: grows to the largest size any run asked for and
// keeps it; a sequence's elements each have their own.
class HostBuffer {
 public:
  void* reserve(int64_t bytes);
  // Grows to at least `bytes`, keeping the first `keep` bytes (amortized doubling).
  void* grow(int64_t keep, int64_t bytes);
  HostBuffer& element(size_t j);

 private:
  NDArray array_;
  std::vector<HostBuffer> elements_;
};

// Copies `src` (a tensor, a sequence or an empty optional) into `dst`, whose
// memory is `buffer`; `dst` keeps its declared kind.
void copy_host_value(const HostValue& src, HostValue* dst, HostBuffer* buffer);

// A subgraph of a node (If's branches, Loop's and Scan's bodies), which the
// host region runs on the operator's request.
class HostSubgraph {
 public:
  virtual ~HostSubgraph() = default;
  virtual size_t num_inputs() const = 0;
  virtual size_t num_outputs() const = 0;
  // Makes formal input i a view of `v` (no copy: `v` must outlive the next run()).
  virtual void bind_input(size_t i, const HostValue& v) = 0;
  virtual void run() = 0;
  virtual const HostValue& output(size_t i) const = 0;
  // Formal input i as bound, or as the last carry() left it.
  virtual const HostValue& input(size_t i) const = 0;
  // Loop-carried values: input `pairs[k].second` becomes what output
  // `pairs[k].first` holds now, for the next run(). Outputs that a node of the
  // subgraph wrote hand their memory over without a copy.
  virtual void carry(const std::vector<std::pair<size_t, size_t>>& pairs) = 0;
};

// One attribute of the node, as the frontend wrote it into mod.json.
struct HostAttr {
  enum class Kind { kInt, kFloat, kString, kInts, kFloats } kind = Kind::kInt;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
};

class HostOpContext {
 public:
  HostOpContext(const std::string& op, const std::vector<const HostValue*>& inputs,
                const std::vector<HostValue*>& outputs, const std::vector<HostBuffer*>& buffers,
                const std::map<std::string, HostAttr>& attrs,
                const std::map<std::string, HostSubgraph*>* subgraphs = nullptr)
      : op_(op),
        inputs_(inputs),
        outputs_(outputs),
        buffers_(buffers),
        attrs_(attrs),
        subgraphs_(subgraphs) {}

  const std::string& op() const { return op_; }
  size_t num_inputs() const { return inputs_.size(); }
  size_t num_outputs() const { return outputs_.size(); }
  // Input i, or nullptr when the node leaves that optional input out (or
  // there are fewer inputs).
  const HostValue* input(size_t i) const { return i < inputs_.size() ? inputs_[i] : nullptr; }
  // Input i, throwing when it is absent.
  const HostValue& required(size_t i) const;
  // Whether the node uses output i.
  bool has_output(size_t i) const { return i < outputs_.size() && outputs_[i]; }
  // Output i's dtype as the build inferred it.
  DType output_dtype(size_t i) const;
  // Sizes output i for this run and returns its data (uninitialized); an
  // unused output gets scratch memory so that operators need not check.
  void* allocate(size_t i, std::vector<int64_t> shape);
  template <typename T>
  T* allocate_as(size_t i, std::vector<int64_t> shape) {
    return static_cast<T*>(allocate(i, std::move(shape)));
  }
  // Output i's data as the last allocate() left it.
  void* output_data(size_t i) const;
  // Output i as a sequence of `n` elements, each then sized with
  // allocate_element (dtype: the sequence's element type).
  void set_sequence(size_t i, size_t n);
  void* allocate_element(size_t i, size_t j, std::vector<int64_t> shape);
  // Output i as an optional without a value.
  void set_none(size_t i);
  // Output i as a copy of `v` (a tensor, a sequence or an empty optional).
  void copy_to_output(size_t i, const HostValue& v);
  // The node's graph-valued attribute `name`; fails when it has none.
  HostSubgraph& subgraph(const std::string& name) const;
  // Memory of this node kept from run to run (Loop's scan outputs grow in it).
  HostBuffer& scratch(size_t k) const;
  void set_scratch(std::vector<HostBuffer>* scratch) { scratch_buffers_ = scratch; }

  bool has_attr(const std::string& name) const { return attrs_.count(name) != 0; }
  int64_t attr_int(const std::string& name, int64_t fallback) const;
  double attr_float(const std::string& name, double fallback) const;
  std::string attr_string(const std::string& name, const std::string& fallback) const;
  std::vector<int64_t> attr_ints(const std::string& name) const;

  // An integer input (int32 or int64) as int64 values: shapes, axes, k, ...
  std::vector<int64_t> int_values(size_t i) const;
  // A scalar (or one-element) input as double, for Range and ConstantOfShape.
  double scalar_value(size_t i) const;

  [[noreturn]] void fail(const std::string& why) const;

 private:
  const std::string& op_;
  const std::vector<const HostValue*>& inputs_;
  const std::vector<HostValue*>& outputs_;
  const std::vector<HostBuffer*>& buffers_;
  const std::map<std::string, HostAttr>& attrs_;
  const std::map<std::string, HostSubgraph*>* subgraphs_;
  std::vector<HostBuffer>* scratch_buffers_ = nullptr;
  HostValue scratch_;
  HostBuffer scratch_buffer_;
};

using HostOpFn = std::function<void(HostOpContext&)>;

// The operator named `op` (ONNX op_type), or nullptr.
const HostOpFn* find_host_op(const std::string& op);
// Every host operator's name, sorted.
std::vector<std::string> host_op_names();

// The tables of host_ops/*.cc.
void register_shape_host_ops(std::map<std::string, HostOpFn>& table);
void register_selection_host_ops(std::map<std::string, HostOpFn>& table);
void register_elementwise_host_ops(std::map<std::string, HostOpFn>& table);
void register_reduce_host_ops(std::map<std::string, HostOpFn>& table);
void register_resize_host_ops(std::map<std::string, HostOpFn>& table);
void register_control_flow_host_ops(std::map<std::string, HostOpFn>& table);
void register_sequence_host_ops(std::map<std::string, HostOpFn>& table);
void register_pool_host_ops(std::map<std::string, HostOpFn>& table);
void register_signal_host_ops(std::map<std::string, HostOpFn>& table);

// Helpers shared by the operator files.
int64_t host_numel(const std::vector<int64_t>& shape);
std::vector<int64_t> host_strides(const std::vector<int64_t>& shape);
// An axis in [-rank, rank) as [0, rank); throws naming `what` otherwise.
int64_t host_axis(const HostOpContext& ctx, int64_t axis, int64_t rank, const char* what);
std::string host_shape_str(const std::vector<int64_t>& shape);

// Calls f(T{}) with T the C++ type of `dtype` (float, double, the integer
// types, bool as uint8_t); float16/bfloat16 go through f(uint16_t{}) only when
// `bits_only` (data movement), else fail.
template <typename F>
void dispatch_dtype(const HostOpContext& ctx, DType dtype, F&& f, bool bits_only = false) {
  switch (dtype.code) {
    case DTypeCode::Float:
      if (dtype.bits == 32) return f(float{});
      if (dtype.bits == 64) return f(double{});
      if (bits_only) return f(uint16_t{});
      break;
    case DTypeCode::BFloat:
      if (bits_only) return f(uint16_t{});
      break;
    case DTypeCode::Bool: return f(uint8_t{});
    case DTypeCode::Int:
      if (dtype.bits == 8) return f(int8_t{});
      if (dtype.bits == 16) return f(int16_t{});
      if (dtype.bits == 32) return f(int32_t{});
      if (dtype.bits == 64) return f(int64_t{});
      break;
    case DTypeCode::UInt:
      if (dtype.bits == 8) return f(uint8_t{});
      if (dtype.bits == 16) return f(uint16_t{});
      if (dtype.bits == 32) return f(uint32_t{});
      if (dtype.bits == 64) return f(uint64_t{});
      break;
  }
  ctx.fail("element type " + dtype.str() + " is not supported here");
}

}  // namespace kiln::runtime
