#include "tuner/tuned_configs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "codegen/target.h"
#include "ops/op_template.h"
#include "runtime/c_runtime_api.h"
#include "tuner/config_match.h"
#include "tuner/in_graph_records.h"
#include "tuner/target_key.h"

namespace kiln::tuner {
namespace {

namespace fs = std::filesystem;

// The fallback's channel blocks for workloads of blocked-layout templates.
std::pair<int64_t, int64_t> wanted_layout(const ops::OpTemplate& t, const ops::Workload& w) {
  return ops::fallback_layout_blocks(t, w);
}

// Which elements of a workload param are sizes that borrowing may change:
// the operand shapes, except a convolution kernel's window (dims 2..), which
// with strides, pads and dilation decides the loop nest's form.
bool is_size(const std::string& param, size_t dim) {
  if (param == "kernel") return dim < 2;
  return param == "data" || param == "weight" || param == "a" || param == "b";
}

// How far apart two workloads of one template are: the summed |log2| ratio
// of their sizes, element by element (a shape twice as large in one axis is
// 1 away). Workloads whose attributes or windows differ are infinitely far.
double shape_distance(const ops::Workload& a, const ops::Workload& b) {
  constexpr double kFar = std::numeric_limits<double>::infinity();
  if (a.params.size() != b.params.size() || a.dtype != b.dtype) return kFar;
  double d = 0;
  for (size_t i = 0; i < a.params.size(); ++i) {
    const std::string& name = a.params[i].first;
    const auto& x = a.params[i].second;
    const auto& y = b.params[i].second;
    if (name != b.params[i].first || x.size() != y.size()) return kFar;
    for (size_t k = 0; k < x.size(); ++k) {
      if (!is_size(name, k)) {
        if (x[k] != y[k]) return kFar;
        continue;
      }
      d += std::fabs(std::log2((static_cast<double>(x[k]) + 1) / (static_cast<double>(y[k]) + 1)));
    }
  }
  return d;
}

// The best of a donor's records (pick_best) among those whose config, as a
// point of w's space, fits the ISA: the donor's fastest may need more
// registers than the borrower's target has.
std::optional<Record> best_fitting(const ops::OpTemplate& t, const ops::Workload& w, const Isa& isa,
                                   const std::string& donor_key,
                                   const std::vector<Record>& records) {
  schedule::ConfigSpace space = t.space(w);
  std::vector<Record> fitting;
  for (const Record& r : records) {
    try {
      if (t.fits(w, schedule::Config::from_json(space, r.config_json), isa)) fitting.push_back(r);
    } catch (const std::exception&) {
      // Not a point of w's space.
    }
  }
  return pick_best(donor_key, fitting);
}

// The nearest workload of the same template in the sources whose best config
// is legal for `w`, keeps its channel blocks and fits `isa` (when given).
// other_isa sources serve only with `other_isa` (then the same workload too).
std::optional<ConfigChoice> borrow(const ops::Workload& w, const std::vector<RecordSource>& sources,
                                   const std::map<std::string, std::optional<Record>>& best_of,
                                   const Isa* isa, bool other_isa) {
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  schedule::ConfigSpace space = t.space(w);
  auto want = wanted_layout(t, w);
  std::optional<ConfigChoice> pick;
  double pick_distance = std::numeric_limits<double>::infinity();
  for (const RecordSource& src : sources) {
    if (src.other_isa != other_isa) continue;
    for (const auto& [key, records] : src.by_workload) {
      ops::Workload other;
      try {
        other = ops::Workload::parse(key);
      } catch (const std::exception&) {
        continue;
      }
      if (other.template_name != w.template_name || (other == w && !other_isa)) continue;
      double d = shape_distance(w, other);
      if (!(d < pick_distance)) continue;
      std::optional<Record> best = best_of.at(src.name + "\n" + key);
      if (isa && best) best = best_fitting(t, w, *isa, key, records);
      if (!best) continue;
      try {
        schedule::Config cfg = schedule::Config::from_json(space, best->config_json);
        if (want != std::pair<int64_t, int64_t>{0, 0} && ops::layout_blocks(t, w, cfg) != want)
          continue;
        if (isa && !t.fits(w, cfg, *isa)) continue;
        pick = ConfigChoice{ConfigChoice::Origin::kBorrowed, cfg.to_json(), src.name, key,
                            best->gflops};
        if (other_isa) pick->source += ", tuned for " + src.isa_class;
        pick_distance = d;
      } catch (const std::exception&) {
        // Not a point of this workload's space: a split that does not fit, say.
      }
    }
  }
  return pick;
}

// One in-graph step stamps its records together, once its rounds have run;
// a database may hold several steps' (kiln tune run again).
constexpr int64_t kSameStepS = 60;
bool same_step(const Record& a, const Record& b) {
  return std::abs(a.timestamp_unix - b.timestamp_unix) <= kSameStepS;
}

// A workload's in-graph records of its newest step only. Each step times
// its candidates and the untuned config side by side, in one model and one
// state of the machine; across steps the times do not compare (another
// day's load, another kiln), and the fastest record of all steps is the
// luckiest draw: on the Intel VM's zoo database of 2026-12-01 a direct
// config's record from an older step beat the Winograd untuned config timed
// only in the newer one, and 8 picks of the export had no untuned record
// of their step.
void keep_newest_step(std::vector<Record>& records) {
  const Record* newest = nullptr;
  for (const Record& r : records)
    if (!newest || r.timestamp_unix > newest->timestamp_unix) newest = &r;
  if (!newest) return;
  const Record last = *newest;
  std::erase_if(records, [&](const Record& r) { return !same_step(r, last); });
}

void keep_newest_steps(RecordSource& src) {
  for (auto& [workload, records] : src.by_workload) keep_newest_step(records);
}

}  // namespace

RecordSource load_database(const RecordDB& db, const std::string& target_key) {
  RecordSource src;
  src.name = db.path();
  for (const std::string& w : db.workloads(target_key))
    src.by_workload[w] = db.records(w, target_key);
  return src;
}

namespace {

// Times measured with another thread count do not compare with ours: where a
// workload has records of `threads`, only those stay.
void keep_thread_count(RecordSource& src, int threads) {
  for (auto& [key, records] : src.by_workload) {
    auto same_threads = [&](const Record& r) {
      try {
        return TargetKey::parse(r.target_key).threads == threads;
      } catch (const std::exception&) {
        return false;
      }
    };
    if (std::any_of(records.begin(), records.end(), same_threads))
      records.erase(std::remove_if(records.begin(), records.end(),
                                   [&](const Record& r) { return !same_threads(r); }),
                    records.end());
  }
}

}  // namespace

JsonlSources load_jsonl_sources(const std::string& path, int threads) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read records file '" + path + "'");
  JsonlSources out;
  out.isolated.name = path;
  out.in_graph.name = path + " (in-graph)";
  out.isolated.shipped = out.in_graph.shipped = true;
  out.in_graph.in_graph = true;
  const std::string in_graph_suffix = std::string("; measured=") + TargetKey::kInGraph;
  const std::string cold_suffix = std::string("; measured=") + TargetKey::kColdWeights;
  std::map<std::string, std::vector<Record>> cold;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      Record r = record_from_json_line(line);
      // Isolated and in-graph times do not compare with each other, so each
      // source holds one kind (an exported database holds both); layout
      // transforms' times are neither.
      if (r.target_key.ends_with(in_graph_suffix))
        out.in_graph.by_workload[r.workload_key].push_back(std::move(r));
      else if (r.target_key.find("; measured=") == std::string::npos)
        out.isolated.by_workload[r.workload_key].push_back(std::move(r));
      else if (r.target_key.ends_with(cold_suffix))
        cold[r.workload_key].push_back(std::move(r));
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ":" + std::to_string(line_no) + ": " + e.what());
    }
  }
  // A workload's cold-weight isolated times where the log has no warm ones:
  // each workload's records stay of one kind, comparable with each other.
  for (auto& [workload, records] : cold)
    if (!out.isolated.by_workload.count(workload))
      out.isolated.by_workload[workload] = std::move(records);
  keep_thread_count(out.isolated, threads);
  keep_thread_count(out.in_graph, threads);
  keep_newest_steps(out.in_graph);
  return out;
}

RecordSource load_jsonl(const std::string& path, int threads, JsonlMeasurement which) {
  JsonlSources both = load_jsonl_sources(path, threads);
  return which == JsonlMeasurement::kInGraph ? std::move(both.in_graph) : std::move(both.isolated);
}

std::string isa_class(const codegen::Target& target) {
  // The Target's own ISA table decides; logs/ holds these two classes today.
  std::string cls = target.isa().isa_class;
  return cls == "x86_64-avx512" || cls == "x86_64-avx2" ? cls : "";
}

namespace {

// The folders shipped logs are looked for in: $KILN_LOGS_DIR if set, else
// logs/ next to the executable's parent folder (the repository's build/kiln)
// and an install's share/kiln/logs.
std::vector<fs::path> shipped_log_dirs() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("KILN_LOGS_DIR")) {
    dirs.emplace_back(env);
    return dirs;
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path().parent_path() / "logs");
    dirs.push_back(exe.parent_path().parent_path() / "share" / "kiln" / "logs");
  }
  return dirs;
}

std::string first_existing(const std::string& file_name) {
  for (const fs::path& d : shipped_log_dirs()) {
    fs::path p = d / file_name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  return "";
}

// "x86_64-avx512.znver4.jsonl" -> "x86_64-avx512": a log's ISA class is its
// file name up to the first dot.
std::string class_of_log(const fs::path& file) {
  std::string stem = file.stem().string();
  return stem.substr(0, stem.find('.'));
}

}  // namespace

std::string shipped_log_path(const codegen::Target& target) {
  std::string cls = isa_class(target);
  return cls.empty() ? "" : first_existing(cls + ".jsonl");
}

std::string shipped_cpu_log_path(const codegen::Target& target) {
  std::string cls = isa_class(target);
  std::string cpu = codegen::cpu_model_name(target);
  if (cls.empty() || cpu.empty()) return "";
  return first_existing(cls + "." + cpu + ".jsonl");
}

std::vector<RecordSource> other_isa_logs(const codegen::Target& target, int threads) {
  std::vector<RecordSource> out;
  std::string own_class = isa_class(target);
  fs::path dir;
  for (const fs::path& d : shipped_log_dirs()) {
    std::error_code ec;
    if (fs::is_directory(d, ec)) {
      dir = d;
      break;
    }
  }
  if (dir.empty()) return out;
  std::error_code ec;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".jsonl" && class_of_log(e.path()) != own_class)
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    RecordSource src = load_jsonl(f.string(), threads);
    src.other_isa = true;
    src.isa_class = class_of_log(f);
    out.push_back(std::move(src));
  }
  return out;
}

std::optional<Record> pick_best(const std::string& workload_key,
                                const std::vector<Record>& records) {
  ops::Workload w;
  try {
    w = ops::Workload::parse(workload_key);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  const ops::OpTemplate* t = nullptr;
  try {
    t = &ops::get_template(w.template_name);
  } catch (const std::exception&) {
    return std::nullopt;  // a template this kiln does not have
  }
  schedule::ConfigSpace space = t->space(w);
  auto want = wanted_layout(*t, w);
  const Record* fastest = nullptr;
  const Record* fastest_in_layout = nullptr;
  for (const Record& r : records) {
    if (r.error != ErrorClass::kOk || r.times_ms.empty()) continue;
    std::pair<int64_t, int64_t> blocks;
    try {
      blocks = ops::layout_blocks(*t, w, schedule::Config::from_json(space, r.config_json));
    } catch (const std::exception&) {
      continue;  // a record of an older space
    }
    if (!fastest || r.mean_ms() < fastest->mean_ms()) fastest = &r;
    if (blocks == want && (!fastest_in_layout || r.mean_ms() < fastest_in_layout->mean_ms()))
      fastest_in_layout = &r;
  }
  if (fastest_in_layout) return *fastest_in_layout;
  if (fastest) return *fastest;
  return std::nullopt;
}

std::map<std::string, ConfigChoice> choose_configs(const std::vector<std::string>& workloads,
                                                   const std::vector<RecordSource>& sources,
                                                   bool borrow_nearby, const Isa* isa) {
  // Every source workload's best record, computed once (borrowing scans them all).
  std::map<std::string, std::optional<Record>> best_of;
  for (const RecordSource& src : sources)
    for (const auto& [key, records] : src.by_workload)
      best_of[src.name + "\n" + key] = pick_best(key, records);

  std::map<std::string, ConfigChoice> out;
  for (const std::string& key : workloads) {
    for (size_t i = 0; i < sources.size() && !out.count(key); ++i) {
      if (sources[i].other_isa) continue;
      auto it = best_of.find(sources[i].name + "\n" + key);
      if (it == best_of.end() || !it->second) continue;
      out[key] = ConfigChoice{
          sources[i].shipped ? ConfigChoice::Origin::kShippedLog : ConfigChoice::Origin::kDatabase,
          it->second->config_json, sources[i].name, "", it->second->gflops};
    }
    if (out.count(key) || !borrow_nearby) continue;
    try {
      ops::Workload w = ops::Workload::parse(key);
      if (auto b = borrow(w, sources, best_of, isa, false))
        out[key] = *b;
      else if (isa)
        if (auto o = borrow(w, sources, best_of, isa, true)) out[key] = *o;
    } catch (const std::exception&) {
      // A workload of a template this kiln lacks: the build reports it.
    }
  }
  return out;
}

namespace {

// The OK records of `config_json` among `records` (of `workload_key`),
// compared as today's space reads them (ConfigMatcher).
std::vector<const Record*> records_of(const std::vector<Record>& records,
                                      const std::string& workload_key,
                                      const std::string& config_json) {
  const ConfigMatcher want(workload_key, config_json);
  std::vector<const Record*> out;
  for (const Record& r : records)
    if (r.error == ErrorClass::kOk && !r.times_ms.empty() && want.matches(r.config_json))
      out.push_back(&r);
  return out;
}

bool in_graph_target(const std::string& target) {
  try {
    return TargetKey::parse(target).measured == TargetKey::kInGraph;
  } catch (const std::exception&) {
    return false;
  }
}

// An in-graph target's record of the workload's untuned config from the
// step that measured `best` (`best` itself where it is that config), or null:
// a build on the exported records then weighs `best` against it as it would
// on the database (keep_untuned_unless_clearly_faster).
const Record* untuned_in_graph_record(const std::string& target, const std::string& key,
                                      const std::vector<Record>& records, const Record& best) {
  try {
    const TargetKey k = TargetKey::parse(target);
    if (k.measured != TargetKey::kInGraph) return nullptr;
    // The host's own target where the key is this machine's: its caches (which
    // size the fallback) are the host's, where a parsed target gets the table's.
    const codegen::Target host = codegen::Target::host();
    const TargetKey host_key = TargetKey::for_target(host, k.threads);
    const Isa isa = host_key.target == k.target && host_key.features == k.features
                        ? host.isa()
                        : codegen::Target::parse(k.codegen_target()).isa();
    ops::Workload w = ops::Workload::parse(key);
    for (const Record* r :
         records_of(records, key, ops::get_template(w.template_name).fallback(w, isa).to_json()))
      if (same_step(*r, best)) return r;
  } catch (const std::exception&) {
    // A target or workload this kiln cannot parse: nothing to add.
  }
  return nullptr;
}

}  // namespace

std::vector<Record> best_records(const RecordDB& db, size_t* unweighed) {
  std::vector<Record> out;
  if (unweighed) *unweighed = 0;
  for (const std::string& target : db.targets()) {
    const bool in_graph = in_graph_target(target);
    for (const std::string& key : db.workloads(target)) {
      std::vector<Record> records = db.records(key, target);
      if (in_graph) keep_newest_step(records);
      std::optional<Record> best = pick_best(key, records);
      if (!best) continue;
      out.push_back(*best);
      const Record* fastest = nullptr;
      for (const Record& r : records)
        if (r.error == ErrorClass::kOk && !r.times_ms.empty() &&
            (!fastest || r.mean_ms() < fastest->mean_ms()))
          fastest = &r;
      if (fastest && !(*fastest == *best)) out.push_back(*fastest);
      const Record* untuned = untuned_in_graph_record(target, key, records, *best);
      if (untuned && !(*untuned == *best) && !(fastest && *untuned == *fastest))
        out.push_back(*untuned);
      if (unweighed && !untuned && in_graph) ++*unweighed;
    }
  }
  return out;
}

namespace {

// require_tuned: throws naming (up to 20 of) the nodes without a record of
// their own for any of their implementations.
void require_own_records(const BuildRecordOptions& o,
                         const std::vector<std::vector<std::string>>& implementations,
                         const std::map<std::string, ConfigChoice>& chosen) {
  std::string missing;
  size_t n = 0;
  for (const std::vector<std::string>& keys : implementations) {
    bool own = false, borrowed = false;
    for (const std::string& w : keys) {
      auto it = chosen.find(w);
      if (it == chosen.end()) continue;
      (it->second.origin == ConfigChoice::Origin::kBorrowed ? borrowed : own) = true;
    }
    if (own || n++ >= 20) continue;
    std::string names;
    for (const std::string& w : keys) names += (names.empty() ? "" : " or ") + w;
    missing += "\n  " + names + (borrowed ? " (only a borrowed config)" : "");
  }
  if (n)
    throw std::runtime_error(std::to_string(n) + " of " + std::to_string(implementations.size()) +
                             " workloads have no record in " +
                             (o.tuning_log.empty() ? std::string("") : o.tuning_log + " or ") +
                             "the shipped logs (--require-tuned):" + missing);
}

// A node with several implementations (direct and Winograd) whose records
// come only from the shipped logs or borrowing, and not for all of them:
// those records were measured without the others (the shipped logs predate
// Winograd, and another machine's times do not rank this one's), so they
// must not switch the node away from its untuned default. Measured on Zen 4
// (bench/models/results/bf16-2026-11-24-zen4.md): ResNet-18 fp32 built on
// the shipped log's direct records ran 1.58x slower than untuned Winograd.
// The records are dropped for such nodes; the build reports them untuned.
// A record in the user's database always counts (kiln tune measured it here),
// and so does the untuned default that an in-graph step weighed against the
// other implementation's records and kept (ConfigChoice::kept_untuned, from
// keep_untuned_unless_clearly_faster): the node runs that config either way,
// and the build counts it as kept rather than as missing a record.
void keep_untuned_alternatives(const std::vector<std::vector<std::string>>& implementations,
                               std::map<std::string, ConfigChoice>& chosen) {
  for (const std::vector<std::string>& keys : implementations) {
    if (keys.size() < 2) continue;
    bool own = false;
    size_t with_choice = 0;
    for (const std::string& w : keys) {
      auto it = chosen.find(w);
      if (it == chosen.end()) continue;
      ++with_choice;
      own |= it->second.origin == ConfigChoice::Origin::kDatabase || it->second.kept_untuned;
    }
    if (own || with_choice == keys.size()) continue;
    for (const std::string& w : keys) chosen.erase(w);
  }
}

// A node whose chosen config is an in-graph record keeps its untuned config
// (its untuned default's fallback, timed in the same step) unless the chosen
// one ran clearly faster (in_graph_records.h). The chosen implementation is
// the one graph::choose_implementations will build: the highest GFLOP/s.
//
// A shipped log's in-graph record whose step timed no record of today's
// untuned config is dropped, and the node runs its fallback: the log was made
// before kiln tune's step timed the untuned config beside the tuned ones
// (2026-11-29), or against an older fallback, and its records were never shown
// to beat today's. Measured: the AVX2 log tuned on the Zen 5 VM on 2026-11-28
// ran 1.02x today's fallback there (1.08x on SqueezeNet;
// bench/models/results/stale-logs-2026-11-30-zen5.md). The user's database
// keeps such records: its step may have been cut short before it timed the
// untuned config, and kiln tune run again re-times them. Both are counted per
// source, for the build's notes.
struct UnweighedPicks {
  std::map<std::string, size_t> dropped;  // shipped logs': the node runs its fallback
  std::map<std::string, size_t> kept;     // the user's database's: the pick stands
};
void keep_untuned_unless_clearly_faster(
    const std::vector<std::vector<std::string>>& implementations,
    const std::vector<RecordSource>& sources, const Isa& isa,
    std::map<std::string, ConfigChoice>& chosen, UnweighedPicks& unweighed) {
  for (const std::vector<std::string>& keys : implementations) {
    const std::string* winner = nullptr;
    for (const std::string& w : keys) {
      auto it = chosen.find(w);
      if (it != chosen.end() && (!winner || it->second.gflops > chosen.at(*winner).gflops))
        winner = &w;
    }
    if (!winner) continue;
    const ConfigChoice& choice = chosen.at(*winner);
    if (choice.origin == ConfigChoice::Origin::kBorrowed) continue;
    auto src = std::find_if(sources.begin(), sources.end(), [&](const RecordSource& s) {
      return s.in_graph && s.name == choice.source;
    });
    if (src == sources.end()) continue;
    // A record that was never timed beside today's untuned config: a shipped
    // log's is dropped, the user's database's stands.
    auto unweighed_pick = [&] {
      if (!src->shipped) {
        ++unweighed.kept[src->name];
        return;
      }
      for (const std::string& w : keys) chosen.erase(w);
      ++unweighed.dropped[src->name];
    };
    if (!src->by_workload.count(keys.front())) {
      unweighed_pick();  // no in-graph record of the untuned default at all
      continue;
    }
    // The chosen record as pick_best found it (the fastest of its config),
    // and the untuned config's record of the same step.
    const Record* pick = nullptr;
    for (const Record* r : records_of(src->by_workload.at(*winner), *winner, choice.config_json))
      if (!pick || r->mean_ms() < pick->mean_ms()) pick = r;
    std::string fallback;
    try {
      ops::Workload w = ops::Workload::parse(keys.front());
      fallback = ops::get_template(w.template_name).fallback(w, isa).to_json();
    } catch (const std::exception&) {
      continue;  // a workload this kiln cannot parse: the build reports it
    }
    const Record* untuned = nullptr;
    for (const Record* r : records_of(src->by_workload.at(keys.front()), keys.front(), fallback))
      if (pick && same_step(*r, *pick)) untuned = r;
    if (!untuned) {
      unweighed_pick();
      continue;
    }
    if (untuned == pick) continue;
    size_t others = 0;
    for (const std::string& w : keys)
      if (auto it = src->by_workload.find(w); it != src->by_workload.end())
        for (const Record& r : it->second)
          others += &r != untuned && r.error == ErrorClass::kOk && !r.times_ms.empty() &&
                    same_step(r, *pick);
    if (clearly_faster(*pick, *untuned, others)) continue;
    for (const std::string& w : keys) chosen.erase(w);
    chosen[keys.front()] = ConfigChoice{
        src->shipped ? ConfigChoice::Origin::kShippedLog : ConfigChoice::Origin::kDatabase,
        untuned->config_json,
        src->name,
        "",
        untuned->gflops,
        /*kept_untuned=*/true};
  }
}

void add_unweighed_notes(const UnweighedPicks& unweighed, std::vector<std::string>& notes) {
  auto count = [](size_t n, const char* one, const char* many) {
    return std::to_string(n) + (n == 1 ? one : many);
  };
  for (const auto& [log, n] : unweighed.dropped)
    notes.push_back(
        count(n, " workload runs its", " workloads run their") + " fallback config: " + log +
        " timed no record of today's untuned config beside " + (n == 1 ? "its" : "their") +
        " tuned ones (the log predates it; logs/README.md says how to re-tune)");
  // A database tuned before a kiln upgrade that changed a fallback, or whose
  // step was cut short: its picks were never shown to beat today's untuned
  // configs, which may now run faster.
  for (const auto& [db, n] : unweighed.kept)
    notes.push_back(count(n, " workload takes its", " workloads take their") + " config from " +
                    db + " without a record of today's untuned config from the same step (" +
                    "kiln's fallback changed since, or the step was cut short): `kiln tune` " +
                    "with this database re-times " + (n == 1 ? "it" : "them") +
                    " against the untuned config");
}

}  // namespace

std::map<std::string, ConfigChoice> configs_for_build(const BuildRecordOptions& o,
                                                      const codegen::Target& target,
                                                      const std::vector<std::string>& workloads,
                                                      std::vector<std::string>* notes) {
  std::vector<std::vector<std::string>> one_each;
  for (const std::string& w : workloads) one_each.push_back({w});
  return configs_for_build(o, target, one_each, notes);
}

std::map<std::string, ConfigChoice> configs_for_build(
    const BuildRecordOptions& o, const codegen::Target& target,
    const std::vector<std::vector<std::string>>& implementations, std::vector<std::string>* notes) {
  std::vector<std::string> workloads;
  for (const auto& keys : implementations)
    for (const std::string& w : keys)
      if (std::find(workloads.begin(), workloads.end(), w) == workloads.end())
        workloads.push_back(w);
  int threads = kiln_get_num_threads();
  std::string key = TargetKey::for_target(target, threads).key();
  std::vector<RecordSource> sources;
  if (!o.tuning_log.empty()) {
    RecordDB db = RecordDB::open(o.tuning_log, RecordDB::Mode::kMustExist);
    // In-graph times first (kiln tune's last step re-measures each task's
    // best configs inside the compiled model): where a workload has them, the
    // build takes the config that ran fastest in the model, not in isolation.
    RecordSource in_graph =
        load_database(db, TargetKey::for_target(target, threads).in_graph().key());
    in_graph.name = db.path() + " (in-graph)";
    in_graph.in_graph = true;
    keep_newest_steps(in_graph);
    if (!in_graph.by_workload.empty()) sources.push_back(std::move(in_graph));
    // Then isolated times taken with cold weights (kiln tune's measurement
    // for models whose weights outgrow the last-level cache), closer to the
    // model's than warm ones, then warm ones.
    RecordSource cold =
        load_database(db, TargetKey::for_target(target, threads).isolated(true).key());
    cold.name = db.path() + " (cold weights)";
    bool any_isolated = !cold.by_workload.empty();
    if (any_isolated) sources.push_back(std::move(cold));
    sources.push_back(load_database(db, key));
    any_isolated = any_isolated || !sources.back().by_workload.empty();
    if (notes && !any_isolated && db.count() > 0)
      notes->push_back(o.tuning_log + " holds " + std::to_string(db.count()) +
                       " records, none for this target (" + key + ")");
  }
  if (o.shipped_logs) {
    // This CPU model's own log first (records measured on the same
    // micro-architecture), then the ISA class's log (another CPU of the class).
    for (const std::string& shipped : {shipped_cpu_log_path(target), shipped_log_path(target)})
      if (!shipped.empty()) {
        // Like the database's: a log's in-graph records first, so that a
        // build on the CPU model a log was made on runs the configs that ran
        // fastest inside the models there, as the tuned build measured then.
        JsonlSources log = load_jsonl_sources(shipped, threads);
        if (!log.in_graph.by_workload.empty()) sources.push_back(std::move(log.in_graph));
        sources.push_back(std::move(log.isolated));
      }
    // Other ISA classes' logs: borrowed configs that fit this target only.
    if (o.borrow)
      for (RecordSource& src : other_isa_logs(target, threads)) sources.push_back(std::move(src));
  }
  std::map<std::string, ConfigChoice> chosen;
  if (!sources.empty()) {
    Isa isa = target.isa();
    chosen = choose_configs(workloads, sources, o.borrow, &isa);
    UnweighedPicks unweighed;
    keep_untuned_unless_clearly_faster(implementations, sources, isa, chosen, unweighed);
    if (notes) add_unweighed_notes(unweighed, *notes);
  }
  if (o.require_tuned)
    require_own_records(o, implementations, chosen);
  else
    keep_untuned_alternatives(implementations, chosen);
  return chosen;
}

TunedSummary summarize_choices(const std::vector<std::string>& workloads,
                               const std::map<std::string, ConfigChoice>& choices) {
  TunedSummary s;
  s.total = workloads.size();
  for (const std::string& w : workloads) {
    auto it = choices.find(w);
    if (it == choices.end()) continue;
    const ConfigChoice& c = it->second;
    if (c.origin == ConfigChoice::Origin::kBorrowed) {
      s.borrowed.push_back({w, c.borrowed_from, c.source});
      continue;
    }
    ++s.tuned;
    s.kept_untuned += c.kept_untuned;
    ++s.by_source[(c.origin == ConfigChoice::Origin::kShippedLog ? "shipped log " : "") + c.source];
  }
  return s;
}

}  // namespace kiln::tuner
