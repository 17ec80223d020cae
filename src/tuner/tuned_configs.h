// Choosing the config a build uses for each workload, from tuning records.
//
// Where records come from, in order of trust:
//   1. the user's database (kiln tune --tuning-log DB): records of exactly this
//      workload on exactly this target key;
//   2. the shipped logs (logs/<isa>.jsonl in the repository or the install):
//      records of this workload tuned by kiln's developers on a CPU of the
//      same ISA class (AVX-512, AVX2), used when the database has none; the
//      CPU model's log before the class's, and in each, as in the database,
//      the in-graph records (kiln tune's last step) before the isolated ones;
//   3. borrowing: no record of this workload anywhere, but one of the same
//      template at a nearby shape whose config is a legal point of this
//      workload's space (and keeps its channel blocks): the nearest such
//      shape's best config. The build report names what it borrowed from.
//   4. borrowing across ISA classes: the shipped logs of other ISA classes
//      (an AVX-512 log for an AVX2 or Arm target, ...) are never used as
//      they are; their records, the same workload first, serve only as
//      borrowed configs, and only those that fit the target's registers
//      (OpTemplate::fits). The build report says so.
// Anything else runs the template's fallback config, and the build says so.
// In-graph records count only from each workload's newest step (a step
// times the candidates and the untuned config side by side; across steps
// the fastest record is the luckiest draw), and configs compare by what
// they configure, as today's space reads them (config_match.h).
//
// Within one workload's records the pick is the fastest verified record
// whose channel blocks match the fallback's (neighbouring convolutions then
// share one blocked layout and need no transform between them), else the
// fastest of all.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/isa.h"
#include "tuner/records.h"

namespace kiln::codegen {
struct Target;
}

namespace kiln::tuner {

// Records grouped by workload key, with a name for messages (a file path).
struct RecordSource {
  std::string name;
  bool shipped = false;  // a shipped log (logs/), not the user's database
  // Times kiln tune's in-graph step took inside the model (target_key.h's
  // measured=in-graph), which a build reads with clearly_faster's margin.
  bool in_graph = false;
  // Records measured for another ISA class (isa_class names it): never used
  // as they are, only borrowed, and only where they fit the target (4. above).
  bool other_isa = false;
  std::string isa_class;
  std::map<std::string, std::vector<Record>> by_workload;
};

// Every record of `target_key` in the database.
RecordSource load_database(const RecordDB& db, const std::string& target_key);
// Which of an exported database's measurements a source loaded from JSON lines holds:
// the tuner's isolated ones, or those of kiln tune's in-graph step ("; measured=in-graph").
enum class JsonlMeasurement { kIsolated, kInGraph };
// A JSON-lines file of records (kiln records export), marked shipped: its records of one
// measurement (the in-graph source is named "FILE (in-graph)"). Where a workload has
// records measured with `threads` threads, only those are kept. Throws
// std::runtime_error "FILE:LINE: why" for a bad line.
RecordSource load_jsonl(const std::string& path, int threads,
                        JsonlMeasurement which = JsonlMeasurement::kIsolated);
// Both of a file's sources from one read.
struct JsonlSources {
  RecordSource isolated, in_graph;
};
JsonlSources load_jsonl_sources(const std::string& path, int threads);

// The ISA class a target's shipped log is named by: "x86_64-avx512",
// "x86_64-avx2", or "" when kiln ships none for it.
std::string isa_class(const codegen::Target& target);
// The shipped log for the target: $KILN_LOGS_DIR/<class>.jsonl if that
// variable is set, else logs/ next to the executable's parent folder (the
// repository's build/ or an install's share/kiln/logs). Empty when none exists.
std::string shipped_log_path(const codegen::Target& target);
// The shipped log of the target's CPU model, searched like shipped_log_path:
// <class>.<cpu>.jsonl (e.g. x86_64-avx512.znver4.jsonl), records measured on
// that micro-architecture, which builds prefer to the class's log: another
// CPU's tuned tiles can run slower than the fallback (Sapphire Rapids records
// on Zen 4). The <cpu> is codegen::cpu_model_name: the -mcpu name, or for a
// host LLVM calls "generic", kiln's own name for it ("znver5"). Empty when the
// target names no CPU or there is no such file.
std::string shipped_cpu_log_path(const codegen::Target& target);
// The shipped logs of the other ISA classes (for borrowing, 4. above), each
// loaded with load_jsonl and marked other_isa.
std::vector<RecordSource> other_isa_logs(const codegen::Target& target, int threads);

struct ConfigChoice {
  enum class Origin { kDatabase, kShippedLog, kBorrowed };
  Origin origin = Origin::kDatabase;
  std::string config_json;
  std::string source;         // RecordSource::name it came from
  std::string borrowed_from;  // kBorrowed: the workload whose record it is
  double gflops = 0;          // as measured for that record's own workload
  // The node's untuned config, kept because no tuned config of any of its
  // implementations ran clearly faster in the in-graph step (configs_for_build).
  bool kept_untuned = false;
};

// The best usable record's config of one workload among its records, or
// nullopt (none verified, or none a legal point of the workload's space).
std::optional<Record> pick_best(const std::string& workload_key,
                                const std::vector<Record>& records);

// A choice for every workload that any source can serve; sources are tried in
// order for exact matches (other_isa sources never), then, if `borrow`, the
// sources of the target's class for a nearby shape, then the other_isa ones.
// A borrowed config must fit `isa` (the target's; nullptr: no register check,
// and then other_isa sources are not used at all).
std::map<std::string, ConfigChoice> choose_configs(const std::vector<std::string>& workloads,
                                                   const std::vector<RecordSource>& sources,
                                                   bool borrow, const Isa* isa = nullptr);

// Where a build takes its records from (kiln build --tuning-log DB,
// --no-shipped-logs, --no-borrow; kiln.build in Python).
struct BuildRecordOptions {
  std::string tuning_log;      // the user's database; empty: none
  bool shipped_logs = true;    // logs/<isa class>.jsonl (shipped_log_path)
  bool borrow = true;          // nearby shapes, and other ISA classes' logs
  bool require_tuned = false;  // every workload needs a record of its own
};

// The config each of a build's workloads gets from tuning records: the
// user's database first (its in-graph records before its isolated ones), then
// the shipped logs, the CPU model's and then the ISA class's (each likewise),
// then a nearby shape's record (choose_configs). Records are keyed by the
// target and the runtime's thread count. With require_tuned, throws
// std::runtime_error naming every workload without a record of its own (a
// borrowed config does not count). `notes` (may be null) receives a line when
// the database holds records, none for this target, and one per shipped log
// whose in-graph records some nodes could not use (below).
std::map<std::string, ConfigChoice> configs_for_build(const BuildRecordOptions& options,
                                                      const codegen::Target& target,
                                                      const std::vector<std::string>& workloads,
                                                      std::vector<std::string>* notes = nullptr);
// The same for a build's nodes, each with its implementations (workload
// keys; driver::ConfigChooser): with require_tuned, each node needs a record
// of its own for one of its implementations. Without it, a node with several
// implementations whose only records come from the shipped logs or borrowing,
// and not for every implementation, gets none of them: it runs its untuned
// default (Winograd for a 3x3 convolution), which those records never
// competed with. `implementations`' first key must be the node's untuned
// default (driver::template_workload_sets' order): where the in-graph step
// timed its fallback config and the node's chosen config is an in-graph
// record that is not clearly_faster (in_graph_records.h) than that one, the
// node gets the fallback (ConfigChoice::kept_untuned) and its other
// implementations no choice. Where that record comes from a shipped log whose
// step timed no record of today's untuned config (a log made before the step
// timed it, or against an older fallback), the node gets no choice at all: it
// runs the fallback, listed as such, and `notes` says why.
std::map<std::string, ConfigChoice> configs_for_build(
    const BuildRecordOptions& options, const codegen::Target& target,
    const std::vector<std::vector<std::string>>& implementations,
    std::vector<std::string>* notes = nullptr);

// What a build report says about the records it used ("tuned: N of M").
struct TunedSummary {
  size_t tuned = 0;  // workloads with a record of their own (DB or shipped log)
  size_t total = 0;  // the build's template workloads
  // Record source ("DB", "shipped log FILE") -> workloads it served, sorted.
  std::map<std::string, size_t> by_source;
  struct Borrowed {
    std::string workload, donor, source;  // donor: the workload whose record it is
  };
  std::vector<Borrowed> borrowed;  // in the build's workload order
  // Of `tuned`, the workloads whose choice is their untuned config, kept for
  // want of a clear in-graph win (ConfigChoice::kept_untuned).
  size_t kept_untuned = 0;
};
TunedSummary summarize_choices(const std::vector<std::string>& workloads,
                               const std::map<std::string, ConfigChoice>& choices);

// The records worth shipping from a database: per workload and target, the
// pick_best record and, when it differs, the fastest one; for an in-graph
// target (of the workload's newest step only) also the untuned config's
// record of the same step, so that a build
// on the shipped records keeps the untuned config where the database's would.
// `unweighed` (if given) counts the in-graph picks whose step timed no record
// of today's untuned config: a build on the exported log runs their fallback
// instead (configs_for_build's rule for shipped logs).
std::vector<Record> best_records(const RecordDB& db, size_t* unweighed = nullptr);

}  // namespace kiln::tuner
