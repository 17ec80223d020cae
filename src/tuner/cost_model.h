// The tuner's cost model: gradient-boosted trees (XGBoost, through its C API)
// that rank the candidate configs of a workload by predicted speed.
//
// Rows are feature vectors (tuner/features.h: combined_features), labels are
// measured throughputs (higher is better), and rows come in groups, one per
// workload: the objective is rank:pairwise, so only the order of labels
// inside a group matters. That makes throughputs of workloads of very
// different sizes trainable together, and the scores that predict() returns
// meaningful only for comparing candidates with each other, not as GFLOP/s.
//
// Training is deterministic (fixed seed, one thread): the same data gives
// the same model and the same predictions. XGBoost stays behind a pimpl; no
// XGBoost header is included by users of this class. Errors from XGBoost
// (and bad arguments) throw std::runtime_error / std::invalid_argument.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace kiln::tuner {

class CostModel {
 public:
  CostModel();
  ~CostModel();
  CostModel(CostModel&&) noexcept;
  CostModel& operator=(CostModel&&) noexcept;
  CostModel(const CostModel&) = delete;
  CostModel& operator=(const CostModel&) = delete;

  // Trains a fresh model (any previous one is dropped) for `rounds` boosting
  // rounds. X: one row per measured config, all rows of the same length; y:
  // throughput per row, finite; group_sizes: consecutive rows per workload,
  // summing to X.size() (empty: all rows are one group). Throws
  // std::invalid_argument on inconsistent shapes or non-finite values.
  void fit(const std::vector<std::vector<float>>& X, const std::vector<float>& y,
           const std::vector<unsigned>& group_sizes, int rounds = 50);

  // A score per row, higher = predicted faster. Rows must have the length the
  // model was trained on. Throws std::logic_error if not trained().
  std::vector<float> predict(const std::vector<std::vector<float>>& X) const;

  bool trained() const;
  // Number of features per row the model expects (0 if not trained).
  size_t num_features() const;

  // The model as XGBoost's JSON text, and back. load() of text that is not a
  // saved model throws std::runtime_error.
  std::string save() const;
  static CostModel load(const std::string& text);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::tuner
