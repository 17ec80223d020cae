// The run-time shaped part of a package: mod.json's "host" section, run by
// the executor after the kernels (runtime/host_op.h). Private to the runtime.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "runtime/host_op.h"

namespace kiln::runtime {

class HostRegion {
 public:
  HostRegion();
  ~HostRegion();
  // Subgraphs point back at their region.
  HostRegion(const HostRegion&) = delete;
  HostRegion& operator=(const HostRegion&) = delete;

  // A static tensor of the package: its dtype, shape and storage.
  struct StaticTensor {
    DType dtype;
    std::vector<int64_t> shape;
    void* data = nullptr;
  };
  // `bad(where, why)` throws CorruptPackage; `tensor(i)` is mod.json's
  // tensor i (the caller has range-checked nothing: load checks i against
  // `num_tensors`).
  using Bad = std::function<void(const std::string& where, const std::string& why)>;
  void load(const nlohmann::json& host, size_t num_tensors,
            const std::function<StaticTensor(size_t)>& tensor, const Bad& bad);

  bool empty() const { return steps_.empty() && inputs_.empty(); }
  // Values the caller feeds (sequence and optional graph inputs), in order.
  const std::vector<size_t>& inputs() const { return inputs_; }
  // Sets input value `i` (an index into the values) to a copy of `v`.
  void set_input(size_t i, const HostValue& v);
  size_t num_values() const { return values_.size(); }
  // Value i as the last run left it (shape empty and data null before).
  const HostValue& value(size_t i) const { return values_.at(i); }
  // Whether value i is an optional (may be empty).
  bool optional(size_t i) const { return optional_.at(i); }
  const std::string& value_name(size_t i) const { return names_.at(i); }

  // Runs every step in order; a failing one throws std::runtime_error naming
  // its node. `each(step name, op, ms)` is called after each step when set.
  void run(const std::function<void(const std::string&, const std::string&, double)>& each = {});

 private:
  struct Slot {  // a step's input or output
    bool absent = true;
    bool is_value = false;
    size_t index = 0;  // value index, or into statics_
  };
  struct Step;
  class Body;
  struct Step {
    std::string name, op;
    const HostOpFn* fn = nullptr;
    std::vector<Slot> inputs, outputs;
    std::map<std::string, HostAttr> attrs;
    std::map<std::string, std::unique_ptr<Body>> bodies;
    std::map<std::string, HostSubgraph*> subgraphs;  // views of `bodies`
    std::vector<HostBuffer> scratch;
  };
  using Each = std::function<void(const std::string&, const std::string&, double)>;

  Slot read_slot(const nlohmann::json& r, const std::string& where, size_t num_tensors,
                 const std::function<StaticTensor(size_t)>& tensor, const Bad& bad);
  std::vector<Step> read_steps(const nlohmann::json& steps, const std::string& where,
                               size_t num_tensors,
                               const std::function<StaticTensor(size_t)>& tensor, const Bad& bad);
  void run_steps(std::vector<Step>& steps, const Each& each);
  const HostValue& at(const Slot& s) const;

  std::vector<Step> steps_;
  std::vector<std::string> names_;
  std::vector<HostValue> values_;
  std::vector<bool> optional_;
  std::vector<HostBuffer> buffers_;
  std::vector<HostValue> statics_;
  std::map<size_t, size_t> static_slot_;  // tensor index -> statics_ index
  std::vector<size_t> inputs_;
};

}  // namespace kiln::runtime
