#include "tuner/cost_model.h"

#include <xgboost/c_api.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace kiln::tuner {
namespace {

void check(int rc, const char* what) {
  if (rc != 0) throw std::runtime_error(std::string("XGBoost ") + what + ": " + XGBGetLastError());
}

// The booster parameters: AutoTVM's XGBoost ranking model, plus column
// subsampling. Many features are near-copies of each other (a register tile
// shows in the local bytes, the store count and the lanes); trees that see
// only half of them each spread the model over all copies, which made the
// ranking carry over better to workloads of other shapes (Kendall tau on an
// unseen dense shape 0.60-0.73 -> 0.73-0.81 in cost_model_test's setting).
// One thread and a fixed seed make training reproducible (and the tuner
// already keeps the other cores busy compiling and measuring).
const std::pair<const char*, const char*> kParams[] = {
    {"objective", "rank:pairwise"},
    {"eta", "0.3"},
    {"max_depth", "6"},
    {"min_child_weight", "1"},
    {"gamma", "0.0001"},
    {"lambda", "1"},
    {"subsample", "1"},
    {"colsample_bytree", "0.5"},
    {"tree_method", "hist"},
    {"seed", "0"},
};
const std::pair<const char*, const char*> kRuntimeParams[] = {
    {"nthread", "1"},
    {"verbosity", "0"},
};

struct DMatrixDeleter {
  void operator()(void* m) const { XGDMatrixFree(m); }
};
using DMatrixPtr = std::unique_ptr<void, DMatrixDeleter>;

// Rows packed row-major for XGDMatrixCreateFromMat; all rows of length ncol.
DMatrixPtr make_matrix(const std::vector<std::vector<float>>& X, size_t ncol) {
  std::vector<float> data;
  data.reserve(X.size() * ncol);
  for (size_t r = 0; r < X.size(); ++r) {
    if (X[r].size() != ncol)
      throw std::invalid_argument("cost model: row " + std::to_string(r) + " has " +
                                  std::to_string(X[r].size()) + " features, expected " +
                                  std::to_string(ncol));
    data.insert(data.end(), X[r].begin(), X[r].end());
  }
  DMatrixHandle h = nullptr;
  // NaN marks a missing value; the features never use it (absent slots are 0).
  check(XGDMatrixCreateFromMat(data.data(), X.size(), ncol, std::numeric_limits<float>::quiet_NaN(),
                               &h),
        "XGDMatrixCreateFromMat");
  return DMatrixPtr(h);
}

}  // namespace

struct CostModel::Impl {
  BoosterHandle booster = nullptr;
  size_t num_features = 0;

  ~Impl() { reset(); }
  void reset() {
    if (booster) XGBoosterFree(booster);
    booster = nullptr;
    num_features = 0;
  }
  void set_params(bool training) {
    if (training)
      for (const auto& [k, v] : kParams) check(XGBoosterSetParam(booster, k, v), "SetParam");
    for (const auto& [k, v] : kRuntimeParams) check(XGBoosterSetParam(booster, k, v), "SetParam");
  }
};

CostModel::CostModel() : impl_(std::make_unique<Impl>()) {}
CostModel::~CostModel() = default;
CostModel::CostModel(CostModel&&) noexcept = default;
CostModel& CostModel::operator=(CostModel&&) noexcept = default;

bool CostModel::trained() const { return impl_ && impl_->booster; }
size_t CostModel::num_features() const { return trained() ? impl_->num_features : 0; }

void CostModel::fit(const std::vector<std::vector<float>>& X, const std::vector<float>& y,
                    const std::vector<unsigned>& group_sizes, int rounds) {
  if (X.empty()) throw std::invalid_argument("cost model: no training rows");
  if (y.size() != X.size())
    throw std::invalid_argument("cost model: " + std::to_string(X.size()) + " rows but " +
                                std::to_string(y.size()) + " labels");
  if (rounds < 1) throw std::invalid_argument("cost model: rounds must be >= 1");
  for (size_t i = 0; i < y.size(); ++i)
    if (!std::isfinite(y[i]))
      throw std::invalid_argument("cost model: label of row " + std::to_string(i) +
                                  " is not finite");
  const size_t ncol = X[0].size();
  if (ncol == 0) throw std::invalid_argument("cost model: rows have no features");
  std::vector<unsigned> groups = group_sizes;
  if (groups.empty()) groups.push_back(static_cast<unsigned>(X.size()));
  size_t total = 0;
  for (unsigned g : groups) total += g;
  if (total != X.size())
    throw std::invalid_argument("cost model: group sizes sum to " + std::to_string(total) +
                                ", not to the " + std::to_string(X.size()) + " rows");

  DMatrixPtr dtrain = make_matrix(X, ncol);
  check(XGDMatrixSetFloatInfo(dtrain.get(), "label", y.data(), y.size()), "set labels");
  check(XGDMatrixSetUIntInfo(dtrain.get(), "group", groups.data(), groups.size()), "set groups");

  if (!impl_) impl_ = std::make_unique<Impl>();
  impl_->reset();
  DMatrixHandle mats[] = {dtrain.get()};
  check(XGBoosterCreate(mats, 1, &impl_->booster), "XGBoosterCreate");
  try {
    impl_->set_params(/*training=*/true);
    for (int i = 0; i < rounds; ++i)
      check(XGBoosterUpdateOneIter(impl_->booster, i, dtrain.get()), "XGBoosterUpdateOneIter");
  } catch (...) {
    impl_->reset();
    throw;
  }
  impl_->num_features = ncol;
}

std::vector<float> CostModel::predict(const std::vector<std::vector<float>>& X) const {
  if (!trained()) throw std::logic_error("cost model: predict() before fit() or load()");
  if (X.empty()) return {};
  DMatrixPtr m = make_matrix(X, impl_->num_features);
  const char* config = R"({"type": 0, "training": false, "iteration_begin": 0, "iteration_end": 0,)"
                       R"( "strict_shape": false})";
  const bst_ulong* shape = nullptr;
  bst_ulong dim = 0;
  const float* result = nullptr;
  check(XGBoosterPredictFromDMatrix(impl_->booster, m.get(), config, &shape, &dim, &result),
        "XGBoosterPredictFromDMatrix");
  bst_ulong n = 1;
  for (bst_ulong i = 0; i < dim; ++i) n *= shape[i];
  if (n != X.size())
    throw std::runtime_error("cost model: XGBoost returned " + std::to_string(n) +
                             " predictions for " + std::to_string(X.size()) + " rows");
  return std::vector<float>(result, result + n);
}

std::string CostModel::save() const {
  if (!trained()) throw std::logic_error("cost model: save() before fit() or load()");
  bst_ulong len = 0;
  const char* buf = nullptr;
  check(XGBoosterSaveModelToBuffer(impl_->booster, R"({"format": "json"})", &len, &buf),
        "XGBoosterSaveModelToBuffer");
  return std::string(buf, len);
}

CostModel CostModel::load(const std::string& text) {
  // XGBoost would take other bytes for its legacy binary format and may read
  // past them; a saved model is JSON.
  if (text.empty() || text.front() != '{')
    throw std::runtime_error("cost model: not a saved model (expected XGBoost JSON)");
  CostModel m;
  check(XGBoosterCreate(nullptr, 0, &m.impl_->booster), "XGBoosterCreate");
  try {
    check(XGBoosterLoadModelFromBuffer(m.impl_->booster, text.data(), text.size()),
          "XGBoosterLoadModelFromBuffer");
    m.impl_->set_params(/*training=*/false);
    bst_ulong n = 0;
    check(XGBoosterGetNumFeature(m.impl_->booster, &n), "XGBoosterGetNumFeature");
    if (n == 0) throw std::runtime_error("cost model: the saved model has no features");
    m.impl_->num_features = n;
  } catch (...) {
    m.impl_->reset();
    throw;
  }
  return m;
}

}  // namespace kiln::tuner
