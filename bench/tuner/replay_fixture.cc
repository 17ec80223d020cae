// Writes a small records database for the smoke test of kiln_tuner_replay
// (ctest bench_tuner_replay_smoke), so that the replay's real search (pool
// loading, lowering, features, cost model, plans) runs without a database
// from a long `kiln tune` session.
//
//   kiln_tuner_replay_fixture OUT.db [--configs N]
//
// One small conv2d_NCHWc.x86 workload; its fallback config and N - 1 other
// distinct configs drawn from the template's own space (so that a knob the
// template gains later is in every record), each stored as a verified record
// with a made-up speed. The speed is a deterministic function of the configs'
// knob choices: learnable, like a real one, and never measured, so the test
// needs no quiet machine. OUT.db is replaced if it exists.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <string>

#include "codegen/target.h"
#include "ops/conv2d.h"
#include "ops/op_template.h"
#include "tuner/records.h"

namespace {

using namespace kiln;

// 4..40 GFLOP/s: a sum of per-knob terms, so the cost model has something to
// find, plus a little per-config scatter.
double synthetic_gflops(const schedule::Config& c) {
  double g = 4;
  const auto& choices = c.choice_indices();
  for (size_t k = 0; k < choices.size(); ++k) g += double((choices[k] * (k + 3)) % 5);
  g += double(std::hash<int64_t>()(c.index()) % 100) / 100.0;
  return std::min(g, 40.0);
}

int run(int argc, char** argv) {
  std::string out;
  int n = 48;
  bool usage = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--configs" && i + 1 < argc)
      n = std::max(2, std::stoi(argv[++i]));
    else if (out.empty() && !a.empty() && a[0] != '-')
      out = a;
    else
      usage = true;
  }
  if (out.empty() || usage) {
    std::fprintf(stderr, "usage: kiln_tuner_replay_fixture OUT.db [--configs N]\n");
    return 2;
  }
  const ops::OpTemplate& t = ops::conv2d_nchwc_template();
  ops::Workload w = ops::conv2d_workload(
      t.name(), ops::Conv2DAttrs{1, 32, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1});
  schedule::ConfigSpace space = t.space(w);
  std::vector<schedule::Config> configs{t.fallback(w, codegen::Target::host().isa())};
  std::set<int64_t> seen{configs[0].index()};
  std::mt19937_64 rng(7);
  while (static_cast<int64_t>(configs.size()) < std::min<int64_t>(n, space.size())) {
    schedule::Config c = space.random(rng);
    if (seen.insert(c.index()).second) configs.push_back(c);
  }

  std::filesystem::remove(out);
  for (const char* suffix : {"-wal", "-shm"}) std::filesystem::remove(out + suffix);
  tuner::RecordDB db = tuner::RecordDB::open(out, tuner::RecordDB::Mode::kCreate);
  std::vector<tuner::Record> records;
  const double flops = t.flops(w);
  for (const schedule::Config& c : configs) {
    tuner::Record r;
    r.workload_key = w.key();
    r.target_key = "synthetic (kiln_tuner_replay_fixture)";
    r.config_json = c.to_json();
    r.gflops = synthetic_gflops(c);
    r.times_ms = {flops / (r.gflops * 1e6)};
    r.timestamp_unix = 1700000000 + static_cast<int64_t>(records.size());
    r.kiln_version = "fixture";
    records.push_back(std::move(r));
  }
  db.add_batch(records);
  std::printf("%s: %zu records of %s\n", out.c_str(), records.size(), w.key().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kiln_tuner_replay_fixture: error: %s\n", e.what());
    return 1;
  }
}
