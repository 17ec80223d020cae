// The graph executor: runs a package's kernels in order over storages it
// allocates once. This is kiln's C++ deployment API (the C API in
// kiln_runtime.h wraps it):
//
//   auto ex = kiln::runtime::GraphExecutor::load("model.tar");
//   ex.set_input("input", array);           // copies; checks name, shape, dtype
//   ex.run();
//   kiln::runtime::NDArray y = ex.output(0);  // a copy of output 0
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/ndarray.h"
#include "runtime/package.h"

namespace kiln::runtime {

struct TensorInfo {
  std::string name;
  DType dtype;
  // A run-time shaped output (one after NonZero, TopK with a run-time k, ...:
  // runtime/host_op.h) has `dynamic` set and the shape of the last run
  // (empty before the first).
  std::vector<int64_t> shape;
  bool dynamic = false;
  // A sequence of tensors of `dtype` (an input or output of a model that
  // takes or gives one: set_input_sequence, output_sequence), and whether the
  // value is an optional (set_input_none, output_is_none).
  bool sequence = false;
  bool optional = false;
  int64_t nbytes() const;
  // "input float32 [1, 3, 224, 224]"
  std::string str() const;
};

// Time spent in one kernel of the graph.
struct KernelProfile {
  std::string name;                   // mod.json's kernel name
  std::string func;                   // its symbol
  std::vector<std::string> op_types;  // ONNX operators fused into it
  // The graph's nodes fused into it, "'name' (OpType)" (mod.json's "nodes";
  // empty for packages of kilns before it).
  std::vector<std::string> nodes;
  std::vector<std::string> indexing_nodes;  // those of them that check indices at run time
  std::string workload;                     // template workload key, "" if none
  int64_t flops = 0;                        // estimate per call
  int64_t calls = 0;
  double total_ms = 0;
};

class GraphExecutor {
 public:
  // load_package() + validation; throws CorruptPackage (naming the file and
  // the bad member, tensor or symbol) or std::runtime_error.
  static GraphExecutor load(const std::string& package_path);
  // Validates `package` and allocates its storages; params are copied in.
  explicit GraphExecutor(Package package);

  GraphExecutor(GraphExecutor&&) noexcept;
  GraphExecutor& operator=(GraphExecutor&&) noexcept;
  ~GraphExecutor();

  const std::vector<TensorInfo>& inputs() const;
  const std::vector<TensorInfo>& outputs() const;
  // Index of the input called `name`, or -1.
  int input_index(const std::string& name) const;
  // Index of the input called `name`; a wrong name throws std::invalid_argument
  // listing the model's inputs (what set_input says).
  size_t checked_input_index(const std::string& name) const;

  // Copies `value` into the input `name`. A wrong name, shape or dtype throws
  // std::invalid_argument listing the expected inputs. An input that no step
  // reads, whose dtype alone mattered (mod.json's "unread": CastLike's
  // `like`), takes any shape of its dtype and copies nothing.
  void set_input(const std::string& name, const NDArray& value);
  void set_input(const std::string& name, const void* data, DType dtype,
                 const std::vector<int64_t>& shape);
  void set_input(size_t index, const void* data, DType dtype, const std::vector<int64_t>& shape);
  // A sequence input: copies every element in (each of the input's dtype).
  // An optional input: set_input_none leaves it without a value; set_input
  // (or set_input_sequence) gives it one. Wrong kinds throw
  // std::invalid_argument naming the input.
  void set_input_sequence(const std::string& name, const std::vector<NDArray>& elements);
  void set_input_none(const std::string& name);

  // Input i's own storage (64-byte aligned, inputs(i).nbytes() bytes; the
  // memory plan never shares it): a caller may write an input there in place
  // instead of set_input's copy. Valid for the executor's lifetime.
  void* input_data(size_t i);

  // Runs every kernel in order; a kernel returning non-zero throws
  // std::runtime_error naming it.
  void run();
  // Like run(), timing each kernel call (one entry per kernel, in order).
  std::vector<KernelProfile> run_profiled();

  // A copy of output i; output_data(i) points into the executor's storage
  // (valid until the next run()). A run-time shaped output has the shape of
  // the last run (outputs()[i].shape).
  NDArray output(size_t i) const;
  const void* output_data(size_t i) const;
  // A sequence output's elements, copied; an optional output without a value
  // (output_is_none) has none to give: output() and output_sequence() throw.
  std::vector<NDArray> output_sequence(size_t i) const;
  bool output_is_none(size_t i) const;
  // Without a copy: a sequence output's length and element j (its data,
  // valid until the next run, and its shape).
  size_t output_sequence_length(size_t i) const;
  const void* output_element(size_t i, size_t j, const std::vector<int64_t>** shape) const;

  const std::string& package_path() const;
  const std::string& target() const;
  const std::string& kiln_version() const;
  size_t num_kernels() const;
  // Bytes of all storages (the executor's whole memory besides the library).
  int64_t storage_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// "[1, 3, 224, 224]"
std::string shape_str(const std::vector<int64_t>& shape);

}  // namespace kiln::runtime
