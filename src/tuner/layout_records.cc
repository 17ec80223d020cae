#include "tuner/layout_records.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <tuple>

#include "codegen/target.h"
#include "ops/op_template.h"
#include "support/version.h"
#include "tuner/target_key.h"

namespace kiln::tuner {
namespace {

// Per block pair: the fastest record.
using ByPair = std::map<std::pair<int64_t, int64_t>, const Record*>;

ByPair fastest_by_pair(const ops::OpTemplate& t, const ops::Workload& w,
                       const std::vector<Record>& records) {
  schedule::ConfigSpace space = t.space(w);
  ByPair out;
  for (const Record& r : records) {
    if (r.error != ErrorClass::kOk || r.times_ms.empty()) continue;
    std::pair<int64_t, int64_t> blocks;
    try {
      blocks = ops::layout_blocks(t, w, schedule::Config::from_json(space, r.config_json));
    } catch (const std::exception&) {
      continue;  // a record of an older space
    }
    const Record*& best = out[blocks];
    if (!best || r.mean_ms() < best->mean_ms()) best = &r;
  }
  return out;
}

}  // namespace

std::string transform_target_key(const codegen::Target& target, int threads) {
  TargetKey k = TargetKey::for_target(target, threads);
  k.measured = TargetKey::kLayoutTransform;
  return k.key();
}

std::map<std::string, std::vector<BlockCandidate>> layout_candidates(
    const RecordDB& db, const codegen::Target& target, int threads,
    const std::vector<std::string>& workloads) {
  TargetKey key = TargetKey::for_target(target, threads);
  std::string isolated = key.key(), in_graph = key.in_graph().key();
  std::string cold = key.isolated(true).key();
  std::map<std::string, std::vector<BlockCandidate>> out;
  for (const std::string& wk : workloads) {
    ops::Workload w;
    const ops::OpTemplate* t = nullptr;
    try {
      w = ops::Workload::parse(wk);
      t = &ops::get_template(w.template_name);
    } catch (const std::exception&) {
      continue;
    }
    if (!t->channel_blocked()) continue;
    // Cold-weight isolated times where a cold run measured this workload.
    std::vector<Record> iso = db.records(wk, cold);
    if (iso.empty()) iso = db.records(wk, isolated);
    std::vector<Record> ing = db.records(wk, in_graph);
    ByPair iso_best = fastest_by_pair(*t, w, iso);
    ByPair ing_best = fastest_by_pair(*t, w, ing);
    for (const auto& [pair, r] : iso_best) {
      auto g = ing_best.find(pair);
      const std::string& cfg = g != ing_best.end() ? g->second->config_json : r->config_json;
      std::vector<int64_t> y =
          t->output_shape(w, schedule::Config::from_json(t->space(w), r->config_json));
      std::vector<int64_t> nchw =
          y.size() == 5 ? std::vector<int64_t>{y[0], y[1] * y[4], y[2], y[3]} : y;
      out[wk].push_back({cfg, r->mean_ms(), pair.first, pair.second, nchw});
    }
  }
  return out;
}

std::string transform_workload_key(const std::vector<int64_t>& nchw, int64_t from, int64_t to) {
  ops::Workload w;
  w.template_name = "layout_transform";
  w.params = {{"data", nchw}, {"src_block", {from}}, {"dst_block", {to}}};
  return w.key();
}

std::vector<TransformNeed> needed_transforms(
    const std::map<std::string, std::vector<BlockCandidate>>& candidates) {
  std::set<int64_t> offered;
  for (const auto& [key, cands] : candidates)
    for (const BlockCandidate& c : cands) offered.insert(c.out_block);
  std::set<std::tuple<std::vector<int64_t>, int64_t, int64_t>> needs;
  for (const auto& [key, cands] : candidates) {
    std::vector<int64_t> shape;
    try {
      shape = ops::Workload::parse(key).get("data");
    } catch (const std::exception&) {
      continue;
    }
    if (shape.size() != 4) continue;
    std::set<int64_t> from = {0};
    for (int64_t b : offered)
      if (b > 0 && shape[1] % b == 0) from.insert(b);
    for (const BlockCandidate& c : cands) {
      for (int64_t f : from)
        if (f != c.in_block && c.in_block > 0 && shape[1] % c.in_block == 0)
          needs.insert({shape, f, c.in_block});
      if (c.out_block > 0 && c.out_nchw.size() == 4 && c.out_nchw[1] % c.out_block == 0)
        needs.insert({c.out_nchw, c.out_block, 0});
    }
  }
  std::vector<TransformNeed> out;
  for (const auto& [shape, f, t] : needs) out.push_back({shape, f, t});
  return out;
}

std::map<std::string, double> load_transform_times(const RecordDB& db,
                                                   const codegen::Target& target, int threads) {
  std::string key = transform_target_key(target, threads);
  std::map<std::string, double> out;
  for (const std::string& w : db.workloads(key)) {
    double best = 0;
    for (const Record& r : db.records(w, key))
      if (r.error == ErrorClass::kOk && !r.times_ms.empty() && (best == 0 || r.mean_ms() < best))
        best = r.mean_ms();
    if (best > 0) out[w] = best;
  }
  return out;
}

Record transform_record(const TransformNeed& t, const std::string& target_key,
                        const std::vector<double>& times_ms) {
  if (TargetKey::parse(target_key).measured != TargetKey::kLayoutTransform)
    throw std::invalid_argument("transform_record: target key \"" + target_key +
                                "\" is not a layout-transform key");
  if (times_ms.empty()) throw std::invalid_argument("transform_record: no times");
  Record r;
  r.workload_key = transform_workload_key(t.shape, t.from, t.to);
  r.target_key = target_key;
  r.config_json = "{}";
  // Medians of groups of 5, as in-graph records do: robust to a descheduled
  // repeat on a shared machine, still several values to judge the spread.
  constexpr size_t kGroup = 5;
  for (size_t i = 0; i < times_ms.size(); i += kGroup) {
    std::vector<double> g(
        times_ms.begin() + static_cast<std::ptrdiff_t>(i),
        times_ms.begin() + static_cast<std::ptrdiff_t>(std::min(i + kGroup, times_ms.size())));
    std::nth_element(g.begin(), g.begin() + static_cast<std::ptrdiff_t>(g.size() / 2), g.end());
    r.times_ms.push_back(g[g.size() / 2]);
  }
  r.timestamp_unix = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  r.kiln_version = ::kiln::kiln_version();
  return r;
}

double copy_bandwidth_gbs() {
  static const double gbs = [] {
    constexpr size_t kBytes = size_t{64} << 20;
    std::vector<char> a(kBytes, 1), b(kBytes, 0);
    double best = 0;
    for (int i = 0; i < 4; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      std::memcpy(b.data(), a.data(), kBytes);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      a[static_cast<size_t>(i)] = b[kBytes - 1 - static_cast<size_t>(i)];  // keep the copy
      // read + write bytes per second
      if (s > 0) best = std::max(best, 2.0 * static_cast<double>(kBytes) / s / 1e9);
    }
    return best > 0 ? best : 10.0;
  }();
  return gbs;
}

double estimate_transform_ms(const std::vector<int64_t>& nchw) {
  double elems = 1;
  for (int64_t d : nchw) elems *= static_cast<double>(d);
  return 2.0 * 4.0 * elems / (copy_bandwidth_gbs() * 1e9) * 1e3;
}

}  // namespace kiln::tuner
