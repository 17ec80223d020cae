#include "driver/measure_in_graph.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>

#include "frontend/onnx_import.h"
#include "runtime/graph_executor.h"
#include "support/temp_files.h"

namespace kiln::driver {
namespace {

// Each visit to a round runs its package once unrecorded, then this many
// times recorded (see measure_in_graph).
constexpr int kRunsPerVisit = 3;

int visits_for(int repeats) { return std::max(1, (repeats + kRunsPerVisit - 1) / kRunsPerVisit); }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// A node's candidates in the order its rounds take them: implementations
// alternating, each best first.
std::vector<std::pair<std::string, std::string>> interleave(
    const std::vector<std::string>& keys,
    const std::map<std::string, std::vector<std::string>>& candidates) {
  std::vector<std::pair<std::string, std::string>> out;
  for (size_t i = 0;; ++i) {
    bool any = false;
    for (const std::string& key : keys) {
      auto it = candidates.find(key);
      if (it == candidates.end() || i >= it->second.size()) continue;
      out.emplace_back(key, it->second[i]);
      any = true;
    }
    if (!any) return out;
  }
}

// The same random float inputs in every round's executor (other dtypes: zeros).
void fill_inputs(runtime::GraphExecutor& ex) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (size_t i = 0; i < ex.inputs().size(); ++i) {
    const runtime::TensorInfo& info = ex.inputs()[i];
    void* data = ex.input_data(i);
    bool is_f32 = info.dtype.code == runtime::DTypeCode::Float && info.dtype.bits == 32 &&
                  info.dtype.lanes == 1;
    if (!is_f32) {
      std::memset(data, 0, static_cast<size_t>(info.nbytes()));
      continue;
    }
    float* f = static_cast<float*>(data);
    for (int64_t k = 0; k < info.nbytes() / 4; ++k) f[k] = dist(rng);
  }
}

// Per workload: summed time over summed calls of its kernels in one run.
std::map<std::string, double> per_call_ms(const std::vector<runtime::KernelProfile>& profile) {
  std::map<std::string, std::pair<double, int64_t>> sums;
  for (const runtime::KernelProfile& k : profile) {
    if (k.workload.empty() || k.calls == 0) continue;
    sums[k.workload].first += k.total_ms;
    sums[k.workload].second += k.calls;
  }
  std::map<std::string, double> out;
  for (const auto& [w, s] : sums) out[w] = s.first / static_cast<double>(s.second);
  return out;
}

}  // namespace

std::vector<std::map<std::string, std::string>> in_graph_rounds(
    const std::vector<std::vector<std::string>>& implementation_sets,
    const std::map<std::string, std::vector<std::string>>& candidates) {
  std::vector<std::vector<std::pair<std::string, std::string>>> per_set;
  size_t rounds = 0;
  for (const std::vector<std::string>& keys : implementation_sets) {
    per_set.push_back(interleave(keys, candidates));
    rounds = std::max(rounds, per_set.back().size());
  }
  std::vector<std::map<std::string, std::string>> out(rounds);
  for (size_t r = 0; r < rounds; ++r)
    for (const auto& list : per_set)
      if (!list.empty()) out[r][list[r % list.size()].first] = list[r % list.size()].second;
  return out;
}

size_t in_graph_rounds_that_fit(size_t planned, double remaining_s, double build_s, double run_s,
                                int repeats) {
  const size_t at_least = std::min<size_t>(2, planned);
  const double runs_s = visits_for(repeats) * (kRunsPerVisit + 1) * run_s;
  // n rounds cost n - 1 more builds and n rounds of runs.
  const double per_round = build_s + runs_s;
  if (per_round <= 0) return planned;
  const double fit = std::floor((remaining_s + build_s) / per_round);
  if (!(fit >= static_cast<double>(at_least))) return at_least;  // also NaN
  return std::min(planned, static_cast<size_t>(std::min(fit, double(planned))));
}

InGraphResult measure_in_graph(const std::string& model_path,
                               const std::map<std::string, std::vector<std::string>>& candidates,
                               const InGraphOptions& o) {
  auto say = [&](const std::string& line) {
    if (o.progress) o.progress(line);
  };
  graph::Graph g =
      frontend::import_onnx(model_path, frontend::parse_input_shapes(o.build.input_shapes));
  std::vector<std::map<std::string, std::string>> rounds = in_graph_rounds(
      template_workload_sets(std::move(g), o.build.target.isa(), o.build.precision), candidates);
  InGraphResult result;
  result.rounds_planned = rounds.size();
  if (rounds.empty()) return result;

  // One package per round; an explicit config makes its implementation the
  // node's (build.cc's choose_configs), so each round runs what it names.
  support::TempDir dir("ingraph");
  std::vector<runtime::GraphExecutor> executors;
  size_t keep = rounds.size();
  for (size_t r = 0; r < keep; ++r) {
    auto build_start = std::chrono::steady_clock::now();
    BuildOptions bo = o.build;
    for (const auto& [key, cfg] : rounds[r]) bo.configs[key] = cfg;
    bo.output_path = (dir.path() / ("round" + std::to_string(r) + ".tar")).string();
    bo.format = PackageFormat::kTar;
    build(model_path, bo);
    executors.push_back(runtime::GraphExecutor::load(bo.output_path));
    fill_inputs(executors.back());
    executors.back().run();  // warm: pages touched, threads up
    const double build_s = seconds_since(build_start);
    say("round " + std::to_string(r + 1) + " of " + std::to_string(rounds.size()) + " built");
    if (r == 0 && o.deadline) {
      auto run_start = std::chrono::steady_clock::now();
      executors.back().run();
      const double run_s = seconds_since(run_start);
      const double remaining_s =
          std::chrono::duration<double>(*o.deadline - std::chrono::steady_clock::now()).count();
      keep = in_graph_rounds_that_fit(rounds.size(), remaining_s, build_s, run_s, o.repeats);
      if (keep < rounds.size())
        say("the time left (" + std::to_string(static_cast<int>(std::max(0.0, remaining_s))) +
            " s) fits " + std::to_string(keep) + " of the " + std::to_string(rounds.size()) +
            " rounds: each node's later candidates are not measured");
    }
  }
  rounds.resize(keep);
  result.rounds = keep;

  // Interleaved, so that the machine's drift spreads evenly over the rounds:
  // each visit to a round runs its package once unrecorded, then
  // kRunsPerVisit times recorded. Back-to-back runs are what a deployed
  // model sees (its weights partly still in cache from the previous run); a
  // single run right after another package's evicted everything, which made
  // the kernels with the largest weights (Winograd's transformed ones) look
  // twice as slow as they run.
  std::map<std::pair<std::string, std::string>, std::vector<double>> times;
  const int visits = visits_for(o.repeats);
  bool said_waiting = false;
  auto past_deadline = [&] {
    return o.deadline && std::chrono::steady_clock::now() >= *o.deadline;
  };
  // Waits until nobody else measures; false at the deadline.
  auto quiet = [&] {
    if (!o.others_measuring) return true;
    while (o.others_measuring()) {
      if (past_deadline()) {
        say("another tuner on this host was still measuring at the deadline: the step ends "
            "with the runs it has");
        return false;
      }
      if (!said_waiting) say("another tuner on this host is measuring: waiting for it");
      said_waiting = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return true;
  };
  bool stop = false;
  for (int visit = 0; visit < visits && !stop; ++visit)
    for (size_t r = 0; r < rounds.size() && !stop;) {
      if (!quiet()) {
        stop = true;
        break;
      }
      executors[r].run();
      std::vector<std::map<std::string, double>> runs;
      for (int k = 0; k < kRunsPerVisit; ++k)
        runs.push_back(per_call_ms(executors[r].run_profiled()));
      if (o.others_measuring && o.others_measuring()) continue;  // disturbed: this visit again
      for (const std::map<std::string, double>& t : runs)
        for (const auto& [key, cfg] : rounds[r]) {
          auto it = t.find(key);
          if (it != t.end()) times[{key, cfg}].push_back(it->second);
        }
      ++r;
    }
  for (auto& [kc, ms] : times) result.times.push_back({kc.first, kc.second, std::move(ms)});
  return result;
}

}  // namespace kiln::driver
