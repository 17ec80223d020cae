// Measuring tuning candidates safely.
//
// measure_batch() takes candidates (a workload key and a config as JSON),
// compiles them in parallel threads (lower + shared library, one private
// temporary directory per batch), then runs each in its own worker process
// (kiln-measure-worker, see measure_worker.h) one at a time, because timing
// needs the machine to itself. The worker checks the kernel's output against
// the template's reference() on seeded random inputs before it times anything,
// so a time is only ever reported for a verified kernel (docs/design.md, invariant 2).
// A candidate that crashes, hangs or computes garbage is classified and
// returned as that error; it never takes the calling process down (invariant 3).
//
// Through a runner (options.runner, `kiln tune --runner "COMMAND"`), for a
// device that cannot run the compiler: the host still lowers and
// cross-compiles every candidate for the target, then streams it to one
// long-lived `kiln-measure-worker --serve` on the device, started by
// `/bin/sh -c COMMAND` (e.g. `ssh pi@device kiln-measure-worker --serve`; see
// measure_worker.h for the protocol and remote_runner.h for the host's end).
// Only loading, verification against reference() and timing happen there.
// The server runs each candidate in a forked child and kills it after the
// timeout, so that crashes, hangs and garbage come back as result lines and
// the server lives on; where fork() does not work (qemu-user here) it runs
// candidates itself and ends after a fatal one, and the host restarts it.
// check_host_runs() is replaced by check_runner_runs(): the device's
// architecture and CPU features, from the server's hello line; its thread
// count keys the records. A runner that answers a request with no result
// line (it exited, printed garbage) gives that candidate a runtime_error, one
// silent past the timeout plus a margin a timeout, both carrying the runner's
// stderr tail; it is then killed and restarted. A runner that cannot be
// started at all (or says no hello) is an exception, not a result, so that a
// wrong command or an unreachable device stores no records; when that
// happens on a restart within a batch, the batch returns the results before
// it (as after should_stop) and the next batch throws.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "codegen/target.h"
#include "schedule/code_size.h"
#include "tuner/error_class.h"

namespace kiln::tuner {

struct MeasureResult;
class RemoteRunner;

struct MeasureOptions {
  int number = 1;            // kernel calls per repeat (grown by min_repeat_ms)
  int repeat = 3;            // timed repeats; times_ms has one entry per repeat
  double min_repeat_ms = 0;  // a repeat is re-run with more calls until it lasts this long
  // Wall clock per worker run (load, verify, time), plus 3 x repeat x min_repeat_ms.
  double timeout_s = 10;
  bool flush_cache = true;  // overwrite a buffer larger than the LLC before each repeat
  // Every call reads the kernel's inputs after the first (weights, bias) from
  // memory, the first (the activation) warm: as in a model whose weights
  // outgrow the last-level cache (measure_worker.cc, ColdWeightRing).
  // Records measured so are kept under their own target key
  // (TargetKey::kColdWeights).
  bool cold_weights = false;
  int compile_threads = 2;  // candidates lowered and linked concurrently
  // The compile-time budget: a candidate whose estimated size
  // (schedule::estimate_code_size, after unrolling) is over code_budget is
  // not compiled, and one whose compile took longer than compile_budget_s
  // (wall clock: candidates compile in threads and cannot be stopped) is not
  // run; both are results of class kCompileBudget. <= 0: no such budget.
  int64_t code_budget = schedule::kDefaultCodeBudget;
  double compile_budget_s = 20;
  double rtol = 1e-4;   // max|out - ref| / max|ref| allowed
  int num_threads = 0;  // kernel threads in the worker; 0 = the runtime's default
  uint64_t seed = 42;   // of the random inputs
  // Folder shared by the workers for reference outputs (see
  // WorkerArgs::reference_cache); empty: each worker computes its own.
  std::string reference_cache;
  // The kiln-measure-worker executable. Empty: $KILN_MEASURE_WORKER, else the
  // file of that name next to the running executable.
  std::string worker_path;
  // A shell command that runs `kiln-measure-worker --serve` where the
  // target's code can run (another machine, qemu-user). Empty: a local worker
  // process per candidate, as always.
  std::string runner;
  // The running runner, kept across batches (tune() starts one per run);
  // when null, measure_batch starts one for the batch.
  std::shared_ptr<RemoteRunner> runner_session;
  // Test only: planted faults by input position, acted out instead of
  // behaving: "crash" (the kernel writes to an unmapped output: SIGSEGV),
  // "hang" (the worker calls the kernel forever), "garbage" (the output is
  // corrupted before verification), "abort" (SIGABRT), "exit" (the worker
  // exits 3 with no result), or "compile" (the build step throws).
  std::map<size_t, std::string> fault_injection;
  // Called after each candidate's result is known (input position, result),
  // e.g. for a live progress line. May be empty.
  std::function<void(size_t, const MeasureResult&)> on_result;
  // Asked before each worker run; when it answers true, measure_batch stops
  // and returns the results so far (Ctrl-C: stop after the measurement in
  // flight). May be empty.
  std::function<bool()> should_stop;
};

struct MeasureInput {
  std::string workload_key;  // ops::Workload::key() text
  std::string config_json;   // schedule::Config::to_json() text for the template's space
};

struct MeasureResult {
  ErrorClass error = ErrorClass::kOk;
  std::string message;           // why, for every error; empty when kOk
  std::vector<double> times_ms;  // per repeat: milliseconds per kernel call
  double gflops = 0;             // template flops / median of times_ms
  double compile_s = 0;          // lower + codegen + link wall time
  int64_t code_size = 0;         // estimated operations (schedule/code_size.h); 0: not lowered
  double run_s = 0;              // worker wall time (spawn to exit)
  int64_t number_used = 0;       // calls per repeat after min_repeat_ms growth
  double max_rel_err = -1;       // of the verification run; -1 when it did not happen
};

// Measures every input; results are in input order. Throws std::runtime_error
// only when this machine (or the runner's device) cannot run the target's code
// (check_host_runs, check_runner_runs), the worker executable cannot be found
// or the runner cannot be started; every per-candidate failure is a result. When
// options.should_stop() turns true, or a runner cannot be restarted mid-batch, the result
// is the prefix of inputs measured so far.
std::vector<MeasureResult> measure_batch(const std::vector<MeasureInput>& inputs,
                                         const codegen::Target& target,
                                         const MeasureOptions& options);

// Whether kiln tune (and kiln.tune) time candidates with cold weights when
// not told: when the largest model's weights exceed half this machine's
// last-level cache (the callers count the weights its kernels read, in their
// layouts: tuner::kernel_weight_bytes). Inside such a model a layer's weights come from memory,
// the previous layers' having evicted them, and warm repeated calls rank
// configs as the model does not: ResNet-18's (47 MB, 32 MB L3) Winograd
// F(4x4) config of its 512-channel convs took 1.03 ms warm, 1.14 cold, 1.79 in
// the model (bench/tuner/results/cold-weights-resnet18-2026-11-29-zen4.md).
// Half: the activations share the cache, and a tuned Winograd config's
// transformed weights may be larger than its fallback's (F(4x4): 4x the ONNX
// ones). Never through a runner: the device's caches
// are not known here. `llc_bytes` <= 0 (unknown): warm.
bool cold_weights_by_default(int64_t largest_weight_bytes, int64_t llc_bytes,
                             const MeasureOptions& options);

// Throws std::runtime_error naming what this machine lacks when it cannot run
// code for `target` (another architecture, or missing CPU features): its
// candidates would die with SIGILL, which is no tuning result. measure_batch() and
// tune() call it first.
void check_host_runs(const codegen::Target& target);

// Throws std::runtime_error naming what the runner's device lacks (another
// architecture, missing CPU features) when it cannot run code for `target`.
// Starts the runner when it is not running.
void check_runner_runs(RemoteRunner& runner, const codegen::Target& target);

// The runner options.runner names: options.runner_session, or a new one.
std::shared_ptr<RemoteRunner> runner_for(const MeasureOptions& options);

// The worker executable measure_batch would use for these options (checked to
// exist and be executable); throws std::runtime_error naming the places tried.
std::string find_measure_worker(const MeasureOptions& options);

}  // namespace kiln::tuner
