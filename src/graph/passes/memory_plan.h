// Static memory planning for a graph executor: which buffer (storage) and
// byte offset each intermediate value lives at, so that values whose lifetimes
// do not overlap share storage. Greedy best-fit over sizes in execution order,
// like TVM's graph memory planner (GraphPlanMemory's StorageAllocator): a
// storage returns to the free list once every reader of its current value has
// run, and a request takes the smallest free storage at least as large (within
// a factor match_range), else the largest smaller one (which then grows), else
// a new storage.
//
// The planner knows nothing of operators: the build describes the execution
// as steps (one per kernel call) and the values they read and write.
#pragma once

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kiln::graph::passes {

struct PlanStep {
  std::vector<std::string> inputs;
  std::vector<std::string> outputs;
};

// `output` may live inside `input`'s storage at `offset` bytes past it (a
// reshape is {out, in, 0}): no copy, and the storage stays live until both
// have no readers left. Ignored when `output` is external.
struct PlanAlias {
  std::string output;
  std::string input;
  size_t offset = 0;
};

struct MemoryPlanRequest {
  std::vector<PlanStep> steps;          // in execution order
  std::map<std::string, size_t> sizes;  // bytes of every value the steps name
  // Values with storage of their own, never shared: graph inputs, graph
  // outputs, parameters. They may be read before any step produces them.
  std::set<std::string> external;
  std::vector<PlanAlias> aliases;
  // A free storage is only reused for a request within this size factor (TVM's
  // match_range); 0 disables reuse entirely.
  size_t match_range = 16;
};

struct StorageSlot {
  int storage = -1;
  size_t offset = 0;
};

struct Storage {
  size_t size = 0;
  bool external = false;
};

struct MemoryPlan {
  std::map<std::string, StorageSlot> values;  // every value named by a step or external
  std::vector<Storage> storages;

  size_t total_bytes() const;     // all storages
  size_t internal_bytes() const;  // storages that are not external
};

// Throws std::invalid_argument for an inconsistent request, naming the value:
// a size missing, a value produced twice, read before it is produced (and not
// external), or an alias that does not fit its input's storage.
MemoryPlan plan_memory(const MemoryPlanRequest& request);

}  // namespace kiln::graph::passes
