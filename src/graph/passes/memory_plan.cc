#include "graph/passes/memory_plan.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace kiln::graph::passes {

size_t MemoryPlan::total_bytes() const {
  size_t n = 0;
  for (const Storage& s : storages) n += s.size;
  return n;
}

size_t MemoryPlan::internal_bytes() const {
  size_t n = 0;
  for (const Storage& s : storages)
    if (!s.external) n += s.size;
  return n;
}

namespace {

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("memory plan: " + what);
}

class Planner {
 public:
  explicit Planner(const MemoryPlanRequest& r) : r_(r) {
    for (const PlanAlias& a : r.aliases)
      if (!r.external.count(a.output)) alias_[a.output] = &a;
    for (const PlanStep& s : r.steps)
      for (const std::string& v : s.inputs) ++reads_[v];
    for (size_t c = 0; c < r.concats.size(); ++c) add_concat(c);
  }

  MemoryPlan run() {
    // External values first, in a stable order: each its own storage for good.
    for (const std::string& v : r_.external) place(v, new_storage(size_of(v), true), 0);
    for (size_t k = 0; k < r_.steps.size(); ++k) run_step(k);
    return std::move(plan_);
  }

 private:
  size_t size_of(const std::string& v) const {
    auto it = r_.sizes.find(v);
    if (it == r_.sizes.end()) bad("no size for value '" + v + "'");
    return it->second;
  }

  int new_storage(size_t size, bool external) {
    plan_.storages.push_back({size, external});
    refs_.push_back(0);
    is_free_.push_back(false);
    return static_cast<int>(plan_.storages.size()) - 1;
  }

  // Checks concat c's conditions (PlanConcat) and records its members.
  void add_concat(size_t c) {
    const PlanConcat& pc = r_.concats[c];
    if (pc.offsets.size() != pc.inputs.size())
      bad("concat '" + pc.output + "' has " + std::to_string(pc.inputs.size()) + " inputs but " +
          std::to_string(pc.offsets.size()) + " offsets");
    auto add = [&](const std::string& v, size_t offset) {
      if (r_.external.count(v) || alias_.count(v))
        bad("value '" + v + "' of concat '" + pc.output + "' is external or an alias");
      if (!concat_member_.emplace(v, ConcatMember{c, offset}).second)
        bad("value '" + v + "' belongs to two concats");
      if (offset + size_of(v) > size_of(pc.output))
        bad("value '" + v + "' (" + std::to_string(size_of(v)) + " bytes at offset " +
            std::to_string(offset) + ") does not fit in concat '" + pc.output + "'");
    };
    add(pc.output, 0);
    for (size_t k = 0; k < pc.inputs.size(); ++k) add(pc.inputs[k], pc.offsets[k]);
    concat_storage_.push_back(-1);
  }

  // A concat's member goes into the concat's storage, taken (for the
  // output's size) when its first member is produced. The concat's own step
  // reads every input, so each input's pending read keeps the storage from
  // being freed before the output is placed in it.
  bool place_concat_member(const std::string& v, size_t step) {
    auto m = concat_member_.find(v);
    if (m == concat_member_.end()) return false;
    const PlanConcat& pc = r_.concats[m->second.concat];
    int& s = concat_storage_[m->second.concat];
    if (v == pc.output) {
      const std::vector<std::string>& reads = r_.steps[step].inputs;
      for (const std::string& in : pc.inputs)
        if (std::find(reads.begin(), reads.end(), in) == reads.end())
          bad("concat '" + v + "' is produced by a step that does not read its input '" + in + "'");
    }
    if (s < 0) s = request(size_of(pc.output));
    place(v, s, m->second.offset);
    return true;
  }

  void place(const std::string& v, int storage, size_t offset) {
    plan_.values[v] = {storage, offset};
  }

  // Best fit among free storages (TVM's StorageAllocator::Request).
  int request(size_t size) {
    if (r_.match_range == 0) return new_storage(size, false);
    auto begin = free_.lower_bound(size / r_.match_range);
    auto mid = free_.lower_bound(size);
    auto end = free_.upper_bound(size * r_.match_range);
    for (auto it = mid; it != end; ++it) {  // the smallest that is large enough
      int s = it->second;
      free_.erase(it);
      is_free_[s] = false;
      return s;
    }
    if (mid != begin) {  // else the largest smaller one, grown
      auto it = std::prev(mid);
      int s = it->second;
      free_.erase(it);
      is_free_[s] = false;
      plan_.storages[s].size = size;
      return s;
    }
    return new_storage(size, false);
  }

  // Returns storage `s` to the free list once nothing left reads what it holds.
  void release(int s) {
    if (plan_.storages[s].external || refs_[s] != 0 || is_free_[s]) return;
    is_free_[s] = true;
    free_.emplace(plan_.storages[s].size, s);
  }

  void allocate(const std::string& v, size_t step) {
    if (r_.external.count(v)) return;
    if (plan_.values.count(v))
      bad("value '" + v + "' is produced twice (step " + std::to_string(step) + ")");
    const size_t size = size_of(v);
    if (auto a = alias_.find(v); a != alias_.end()) {
      const std::vector<std::string>& reads = r_.steps[step].inputs;
      auto in = plan_.values.find(a->second->input);
      if (std::find(reads.begin(), reads.end(), a->second->input) == reads.end() ||
          in == plan_.values.end())
        bad("value '" + v + "' aliases '" + a->second->input +
            "', which the step producing it does not read");
      const StorageSlot slot{in->second.storage, in->second.offset + a->second->offset};
      Storage& st = plan_.storages[slot.storage];
      if (slot.offset + size > st.size) {
        if (st.external)
          bad("value '" + v + "' (" + std::to_string(size) + " bytes at offset " +
              std::to_string(slot.offset) + ") does not fit in '" + a->second->input + "'");
        st.size = slot.offset + size;
      }
      plan_.values[v] = slot;
    } else if (!place_concat_member(v, step)) {
      place(v, request(size), 0);
    }
    refs_[plan_.values[v].storage] += reads_[v];
  }

  void run_step(size_t k) {
    const PlanStep& step = r_.steps[k];
    for (const std::string& in : step.inputs)
      if (!plan_.values.count(in))
        bad("step " + std::to_string(k) + " reads '" + in + "' before it is produced");
    // Outputs are placed before the inputs are released: a step never writes
    // over what it reads (except through a declared alias).
    for (const std::string& out : step.outputs) allocate(out, k);
    for (const std::string& in : step.inputs) {
      int s = plan_.values[in].storage;
      if (plan_.storages[s].external) continue;
      --refs_[s];
      release(s);
    }
    for (const std::string& out : step.outputs)  // written but never read
      release(plan_.values[out].storage);
  }

  const MemoryPlanRequest& r_;
  MemoryPlan plan_;
  std::map<std::string, const PlanAlias*> alias_;
  struct ConcatMember {
    size_t concat = 0;
    size_t offset = 0;
  };
  std::map<std::string, ConcatMember> concat_member_;  // outputs and inputs
  std::vector<int> concat_storage_;                    // per concat, -1 until taken
  std::map<std::string, int> reads_;
  std::vector<int> refs_;  // remaining reads of the values in each storage
  std::vector<bool> is_free_;
  std::multimap<size_t, int> free_;  // size -> storage id
};

}  // namespace

MemoryPlan plan_memory(const MemoryPlanRequest& request) { return Planner(request).run(); }

}  // namespace kiln::graph::passes
