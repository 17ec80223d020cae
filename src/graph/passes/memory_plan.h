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

// `inputs` live side by side inside `output`'s storage, input k at
// `offsets[k]` bytes past its start (a Concat along a dim with only 1s
// before it): their producers write them in place and the concat step copies
// nothing. The storage is taken when the first input is produced and stays
// live until the last reader of the output or of any input. Every input is
// produced by a step, belongs to no other concat, is no alias's output and not
// external; nor is the output.
struct PlanConcat {
  std::string output;
  std::vector<std::string> inputs;
  std::vector<size_t> offsets;
};

struct MemoryPlanRequest {
  std::vector<PlanStep> steps;          // in execution order
  std::map<std::string, size_t> sizes;  // bytes of every value the steps name
  // Values with storage of their own, never shared: graph inputs, graph
  // outputs, parameters. They may be read before any step produces them.
  std::set<std::string> external;
  std::vector<PlanAlias> aliases;
  std::vector<PlanConcat> concats;
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
// external), an alias that does not fit its input's storage, or a concat
// input that does not fit its output or breaks PlanConcat's conditions.
MemoryPlan plan_memory(const MemoryPlanRequest& request);

}  // namespace kiln::graph::passes
