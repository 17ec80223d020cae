// The measurement worker: what kiln-measure-worker runs, one candidate per process.
//
// It loads a candidate's shared library through the runtime (dlopen, no
// LLVM), fills the template's inputs with seeded random floats in their
// physical shapes, runs the kernel once, compares the output with the
// template's reference() (max|out - ref| / max|ref| <= rtol), and only then
// times it: `repeat` repeats of `number` calls each, a repeat re-run with more
// calls until it lasts min_repeat_ms (the grown count is kept for the repeats
// after it), and a cache flush before every repeat. With cold_weights, every
// call reads its inputs after the first from another copy of them, last
// touched a flush-buffer's worth of bytes ago. It prints exactly one JSON
// line on stdout:
//   {"status": "ok", "times_ms": [...], "calls": [...], "max_rel_err": e}
//   {"status": "wrong_result", "max_rel_err": e, "message": "..."}
//   {"status": "error", "message": "..."}        (anything that threw)
// times_ms holds milliseconds per call, one entry per repeat; calls the calls
// each repeat made. The parent (measure.cc) classifies a missing line, a
// death by signal and a timeout itself.
//
// Serve mode (`kiln-measure-worker --serve`), for tuning a device that cannot
// run the compiler (MeasureOptions::runner): the worker runs on the device,
// behind a command such as `ssh pi@device kiln-measure-worker --serve`, and
// speaks a line protocol on stdin/stdout:
//   - on start it prints one hello line:
//       {"kiln_measure_worker": "serve", "protocol": 1, "isolation": "fork",
//        "arch": "aarch64", "features": [...the checkable CPU features it
//        has...], "num_threads": n}
//   - each request is one JSON header line (serve_request_header) followed by
//     so_size raw bytes, the candidate's shared library built on the host;
//   - it writes the library to a private temporary folder, runs the candidate
//     in a forked child (so a crash is a result line, not the server's death),
//     kills the child after the request's timeout_s, and prints one result
//     line: the lines above, plus
//       {"status": "error", "message": "worker killed by SIGSEGV (...)"}
//       {"status": "timeout", "message": "killed after the timeout of T s"}
//   - isolation "none" (`--serve --no-fork`, or where fork() does not work,
//     as under qemu-user): the candidate runs in the server; a fatal signal
//     or the timeout (SIGALRM) prints the error or timeout line with
//     "fatal": true from the signal handler and the server exits 3; the host
//     restarts it for the next candidate.
//   - EOF on stdin: it removes its folder and exits 0.
//   - test only: $KILN_MEASURE_WORKER_FAULT plants that fault (see
//     MeasureOptions::fault_injection) in every request that has none. A malformed request
//     (the stream can no longer be framed) prints an error line and exits 2.
// Reference outputs are cached in the server's folder for its lifetime.
// Nothing but protocol lines goes to stdout: the child's stdout is its stderr.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/buffer.h"

namespace kiln::tuner {

struct WorkerArgs {
  std::string so_path;
  std::string symbol;
  std::string workload_key;
  std::string config_json;
  int number = 1;
  int repeat = 3;
  double min_repeat_ms = 0;
  bool flush_cache = true;
  bool cold_weights = false;  // see MeasureOptions::cold_weights
  double rtol = 1e-4;
  int num_threads = 0;  // 0: the runtime's default
  uint64_t seed = 42;
  std::string fault;       // test only; see MeasureOptions::fault_injection
  int64_t parent_pid = 0;  // when set, the worker dies with its parent (PR_SET_PDEATHSIG)
  // Folder where reference outputs are kept between workers (empty: none).
  // The reference of a workload depends only on the workload, the physical
  // shapes (channel blocks) and the seed, and a naive reference conv costs
  // more than compiling a candidate; workers of one tuning run share it.
  std::string reference_cache;
};

// Copies of a kernel's inputs after the first (weights, bias, a residual),
// handed to successive calls in turn, so that every call reads them from
// memory while the first input (the activation the previous layer just wrote)
// stays warm: how a layer meets its weights inside a model whose weights
// outgrow the last-level cache (ResNet-18's 47 MB against a 32 MB L3). Timed
// warm, a Winograd F(4x4) config of its 512-channel convs (37.7 MB of
// transformed weights) ranked first at 1.03 ms and took 1.79 ms in the model;
// cold, 1.14 ms, behind the F(2x2) configs. The copies add up to at least ring_bytes (the worker
// passes its flush buffer's size, 64-128 MiB), and there are at least 3, so that a call's copy was
// last touched that many bytes ago. Weights of ring_bytes or more get no copies: each call's pass
// over them evicts them for the next.
class ColdWeightRing {
 public:
  ColdWeightRing(const std::vector<runtime::Bytes>& inputs, size_t ring_bytes);
  // Points args' inputs after the first at the next copy (args[0] is left alone).
  void next(std::vector<void*>& args);
  size_t copies() const { return copies_.size(); }
  // Bounds the bookkeeping for tiny weights (a depthwise conv's few KiB); the
  // ring then falls short of ring_bytes, but still far exceeds an L2.
  static constexpr size_t kMaxCopies = 4096;

 private:
  std::vector<std::vector<runtime::Bytes>> copies_;
  size_t next_ = 0;
};

// The command-line arguments (after argv[0]) that parse_worker_args reads back.
std::vector<std::string> worker_argv(const WorkerArgs& args);
// Parses `--name value` pairs; throws std::invalid_argument on an unknown or
// incomplete option or a missing required one (so, symbol, workload, config).
WorkerArgs parse_worker_args(const std::vector<std::string>& argv);

// Measures (and acts out a planted fault; "crash" and "hang" never return)
// and returns the JSON result line without its newline. Throws on setup
// errors (library, workload, config).
std::string run_worker(const WorkerArgs& args);

// The header line (without its newline) of a serve-mode request for `args`
// (so_path, parent_pid and reference_cache are not sent: the server has its
// own), whose library of so_size bytes follows it; timeout_s bounds the run on
// the device.
std::string serve_request_header(const WorkerArgs& args, double timeout_s, uint64_t so_size);
// Reads it back (so_path left empty); throws std::invalid_argument.
WorkerArgs parse_serve_request(const std::string& header, double& timeout_s, uint64_t& so_size);

// The serve loop on stdin/stdout (see above); returns the exit status.
// allow_fork false (`--serve --no-fork`), or a fork() that does not work here
// (a probe child at start must exit within 3 s; under qemu-user here it
// hangs): candidates run in the server itself, see the header comment.
int measure_worker_serve(bool allow_fork = true);

// "SIGSEGV (Segmentation fault)".
std::string signal_description(int sig);

// main() of kiln-measure-worker: parse, run, print one line; exit 0 for a
// result, 2 for an error line. `--serve`: measure_worker_serve().
int measure_worker_main(int argc, char** argv);

}  // namespace kiln::tuner
