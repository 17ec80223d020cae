#include "tuner/measure_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <stdexcept>

#include "ops/op_template.h"
#include "ops/reference.h"
#include "ops/workload.h"
#include "runtime/amx.h"
#include "runtime/c_runtime_api.h"
#include "runtime/cpu_features.h"
#include "runtime/module.h"
#include "schedule/config_space.h"

namespace kiln::tuner {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

int64_t product(const std::vector<int64_t>& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// Evicts the kernel's data from the caches by writing every line of a buffer
// larger than the last-level cache: twice the LLC, at least 64 MiB and at most
// 128 MiB (what Sapphire Rapids' L3 acts like for one VM, MACHINE.md). The
// cap matters: a VM on a many-CCD EPYC reports the whole socket's L3 (508 MiB
// seen, where one CCD has 32), and zeroing 1 GiB took longer than a
// measurement's timeout. The buffer is allocated on the first flush, so a worker that does
// not flush (flush-cache 0) never pays for it.
class CacheFlusher {
 public:
  static size_t buffer_bytes(long llc) {
    constexpr size_t kMin = size_t(64) << 20, kMax = size_t(128) << 20;
    return std::clamp<size_t>(llc > 0 ? size_t(llc) * 2 : 0, kMin, kMax);
  }
  void flush() {
    if (buf_.empty())
      buf_.assign(buffer_bytes(sysconf(_SC_LEVEL3_CACHE_SIZE)) / sizeof(uint64_t), 0);
    ++round_;
    for (size_t i = 0; i < buf_.size(); i += 8) buf_[i] = round_ + i;  // one store per 64 B line
    sink_ = buf_[buf_.size() / 2];
  }

 private:
  std::vector<uint64_t> buf_;
  uint64_t round_ = 0;
  volatile uint64_t sink_ = 0;
};

// The output buffer: ordinary memory filled with NaN (float32; an element the
// kernel never writes fails verification) or with 0xA5 bytes (integer outputs:
// an unwritten element fails unless the reference happens to be that pattern),
// or for the "crash" fault a mapping with no access rights, so that the
// kernel's first store faults.
class OutputBuffer {
 public:
  OutputBuffer(int64_t n, ir::DataType t, bool unmapped) : n_(n), bytes_(size_t(n) * t.bytes()) {
    if (!unmapped) {
      data_.resize(bytes_ + 1);  // +1: data() is never null, even for an empty output
      if (t == ir::DataType::f32())
        std::fill_n(reinterpret_cast<float*>(data_.data()), n, NAN);
      else
        std::fill(data_.begin(), data_.end(), 0xA5);
      ptr_ = data_.data();
      return;
    }
    map_bytes_ = std::max<size_t>(bytes_, 4096);
    void* p = mmap(nullptr, map_bytes_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    ptr_ = static_cast<uint8_t*>(p);
  }
  ~OutputBuffer() {
    if (map_bytes_) munmap(ptr_, map_bytes_);
  }
  uint8_t* data() { return ptr_; }
  int64_t size() const { return n_; }
  size_t bytes() const { return bytes_; }

 private:
  int64_t n_;
  size_t bytes_;
  // Placed as a package's storage is (runtime/buffer.h).
  runtime::Bytes data_;
  uint8_t* ptr_ = nullptr;
  size_t map_bytes_ = 0;
};

void call(kiln_kernel_fn fn, std::vector<void*>& args) {
  int32_t rc = fn(args.data());
  if (rc != 0) throw std::runtime_error("the kernel returned " + std::to_string(rc));
}

// Times `repeat` repeats; returns ms per call and the calls of each repeat.
// With a ring (cold weights), each call takes the ring's next copy.
void time_kernel(kiln_kernel_fn fn, std::vector<void*>& args, const WorkerArgs& a,
                 ColdWeightRing* ring, std::vector<double>& times_ms, std::vector<int64_t>& calls) {
  CacheFlusher flusher;
  int64_t n = std::max(1, a.number);
  for (int r = 0; r < a.repeat; ++r) {
    for (;;) {
      if (a.flush_cache) flusher.flush();
      auto t0 = Clock::now();
      for (int64_t i = 0; i < n; ++i) {
        if (ring) ring->next(args);
        call(fn, args);
      }
      double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (ms >= a.min_repeat_ms) {
        times_ms.push_back(ms / double(n));
        calls.push_back(n);
        break;
      }
      // Too short: aim 10% past min_repeat_ms, at least doubling, at most x1000 per step
      // (a step's estimate comes from one noisy short measurement).
      double want = double(n) * a.min_repeat_ms * 1.1 / std::max(ms, 1e-6);
      n = int64_t(std::clamp(std::ceil(want), double(2 * n), double(1000 * n)));
    }
  }
}

[[noreturn]] void hang(kiln_kernel_fn fn, std::vector<void*>& args) {
  for (;;) fn(args.data());
}

// The template's reference output for these inputs: read from
// a.reference_cache when an earlier worker left it there, else computed (and
// left there, written under a temporary name and renamed into place).
std::vector<uint8_t> reference_output(const WorkerArgs& a, const ops::OpTemplate& t,
                                      const ops::Workload& w, const schedule::Config& cfg,
                                      const std::vector<runtime::Bytes>& inputs, size_t bytes) {
  std::vector<uint8_t> ref(bytes);
  std::string path;
  if (!a.reference_cache.empty()) {
    std::string key = a.workload_key + "|" + std::to_string(a.seed);
    for (const auto& shape : t.input_shapes(w, cfg)) key += "|" + json(shape).dump();
    key += "|" + json(t.output_shape(w, cfg)).dump();
    char name[64];
    std::snprintf(name, sizeof name, "/ref-%016zx-%zu.bin", std::hash<std::string>{}(key), bytes);
    path = a.reference_cache + name;
    std::ifstream in(path, std::ios::binary);
    if (in && in.read(reinterpret_cast<char*>(ref.data()), std::streamsize(bytes)) &&
        in.peek() == std::char_traits<char>::eof())
      return ref;
  }
  std::vector<const void*> ptrs;
  for (auto& in : inputs) ptrs.push_back(in.data());
  t.reference_typed(w, cfg, ptrs, ref.data());
  if (!path.empty()) {
    std::string tmp = path + "." + std::to_string(getpid());
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(ref.data()), std::streamsize(bytes));
    out.close();
    if (out)
      std::rename(tmp.c_str(), path.c_str());
    else
      std::remove(tmp.c_str());
  }
  return ref;
}

}  // namespace

ColdWeightRing::ColdWeightRing(const std::vector<runtime::Bytes>& inputs, size_t ring_bytes) {
  size_t bytes = 0;
  for (size_t i = 1; i < inputs.size(); ++i) bytes += inputs[i].size();
  // None, or weights that outgrow the ring alone: each call's pass over them
  // evicts them before the next (and no copy costs gigabytes).
  if (bytes == 0 || bytes >= ring_bytes) return;
  size_t n = std::clamp<size_t>((ring_bytes + bytes - 1) / bytes, 3, kMaxCopies);
  copies_.resize(n);
  for (auto& copy : copies_)
    for (size_t i = 1; i < inputs.size(); ++i) copy.push_back(inputs[i]);
}

void ColdWeightRing::next(std::vector<void*>& args) {
  if (copies_.empty()) return;
  auto& copy = copies_[next_];
  for (size_t i = 0; i < copy.size(); ++i) args[i + 1] = copy[i].data();
  next_ = (next_ + 1) % copies_.size();
}

std::vector<std::string> worker_argv(const WorkerArgs& a) {
  std::vector<std::pair<std::string, std::string>> opts = {
      {"so", a.so_path},
      {"symbol", a.symbol},
      {"workload", a.workload_key},
      {"config", a.config_json},
      {"number", std::to_string(a.number)},
      {"repeat", std::to_string(a.repeat)},
      {"min-repeat-ms", json(a.min_repeat_ms).dump()},
      {"flush-cache", a.flush_cache ? "1" : "0"},
      {"cold-weights", a.cold_weights ? "1" : "0"},
      {"rtol", json(a.rtol).dump()},
      {"num-threads", std::to_string(a.num_threads)},
      {"seed", std::to_string(a.seed)},
      {"parent-pid", std::to_string(a.parent_pid)},
  };
  if (!a.fault.empty()) opts.emplace_back("fault", a.fault);
  if (!a.reference_cache.empty()) opts.emplace_back("reference-cache", a.reference_cache);
  std::vector<std::string> v;
  for (auto& [name, value] : opts) {
    v.push_back("--" + name);
    v.push_back(value);
  }
  return v;
}

WorkerArgs parse_worker_args(const std::vector<std::string>& argv) {
  std::map<std::string, std::string> opt;
  for (size_t i = 0; i < argv.size(); i += 2) {
    if (argv[i].rfind("--", 0) != 0 || i + 1 >= argv.size())
      throw std::invalid_argument("kiln-measure-worker: expected '--option value', got '" +
                                  argv[i] + "'");
    opt[argv[i].substr(2)] = argv[i + 1];
  }
  WorkerArgs a;
  auto take = [&](const char* name, auto& field, auto parse) {
    auto it = opt.find(name);
    if (it == opt.end()) return false;
    try {
      field = parse(it->second);
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string("kiln-measure-worker: bad value '") + it->second +
                                  "' for --" + name);
    }
    opt.erase(it);
    return true;
  };
  auto str = [](const std::string& s) { return s; };
  auto to_int = [](const std::string& s) { return std::stoi(s); };
  auto to_i64 = [](const std::string& s) { return int64_t(std::stoll(s)); };
  auto to_u64 = [](const std::string& s) { return uint64_t(std::stoull(s)); };
  auto to_double = [](const std::string& s) { return std::stod(s); };
  auto to_bool = [](const std::string& s) { return s != "0"; };
  for (const char* required : {"so", "symbol", "workload", "config"})
    if (!opt.count(required))
      throw std::invalid_argument(std::string("kiln-measure-worker: missing --") + required);
  take("so", a.so_path, str);
  take("symbol", a.symbol, str);
  take("workload", a.workload_key, str);
  take("config", a.config_json, str);
  take("number", a.number, to_int);
  take("repeat", a.repeat, to_int);
  take("min-repeat-ms", a.min_repeat_ms, to_double);
  take("flush-cache", a.flush_cache, to_bool);
  take("cold-weights", a.cold_weights, to_bool);
  take("rtol", a.rtol, to_double);
  take("num-threads", a.num_threads, to_int);
  take("seed", a.seed, to_u64);
  take("parent-pid", a.parent_pid, to_i64);
  take("fault", a.fault, str);
  take("reference-cache", a.reference_cache, str);
  if (!opt.empty())
    throw std::invalid_argument("kiln-measure-worker: unknown option --" + opt.begin()->first);
  if (a.number < 1 || a.repeat < 1)
    throw std::invalid_argument("kiln-measure-worker: --number and --repeat must be >= 1");
  return a;
}

std::string run_worker(const WorkerArgs& a) {
  static const char* const kFaults[] = {"", "crash", "hang", "garbage", "abort", "exit"};
  if (std::find(std::begin(kFaults), std::end(kFaults), a.fault) == std::end(kFaults))
    throw std::invalid_argument("kiln-measure-worker: unknown fault '" + a.fault + "'");
  if (a.num_threads > 0) kiln_set_num_threads(a.num_threads);

  ops::Workload w = ops::Workload::parse(a.workload_key);
  const ops::OpTemplate& t = ops::get_template(w.template_name);
  schedule::Config cfg = schedule::Config::from_json(t.space(w), a.config_json);

  // Inputs in the template's physical layouts and element types (ops::fill_random:
  // float32 uniform in [-1, 1], uint8/int8 over their full range, unless the
  // template narrows them: OpTemplate::fill_random_input).
  std::mt19937_64 rng(a.seed);
  std::vector<ir::DataType> in_types = t.input_dtypes(w);
  ir::DataType out_type = t.output_dtype(w);
  // Each input placed as a package places its tensors (runtime/buffer.h): a
  // kernel's speed can depend on where in a page its buffers start.
  std::vector<runtime::Bytes> inputs;
  auto shapes = t.input_shapes(w, cfg);
  if (shapes.size() != in_types.size())
    throw std::logic_error(t.name() + ": " + std::to_string(in_types.size()) +
                           " input dtypes for " + std::to_string(shapes.size()) + " inputs");
  for (size_t i = 0; i < shapes.size(); ++i) {
    int64_t n = product(shapes[i]);
    inputs.emplace_back(size_t(n) * in_types[i].bytes() + 1);  // +1: never a null data()
    t.fill_random_input(w, i, in_types[i], inputs.back().data(), n, rng);
  }
  OutputBuffer out(product(t.output_shape(w, cfg)), out_type, a.fault == "crash");
  // The reference comes first, before the candidate runs, so that a kernel
  // scribbling over memory cannot corrupt it (nor the cached copy).
  std::vector<uint8_t> ref = reference_output(a, t, w, cfg, inputs, out.bytes());

  // Tile instructions (dense_int8_amx.x86) need the process's AMX permission,
  // as the graph executor asks for it (runtime/amx.h); without AMX nothing is asked.
  if (runtime::host_has_cpu_feature("amx-tile")) {
    std::string refused = runtime::request_amx_permission();
    if (!refused.empty()) std::cerr << "kiln-measure-worker: " << refused << "\n";
  }
  runtime::Module lib = runtime::Module::load(a.so_path);
  kiln_kernel_fn fn = lib.get_function(a.symbol);
  std::vector<void*> args;
  for (auto& in : inputs) args.push_back(in.data());
  args.push_back(out.data());

  if (a.fault == "abort") std::abort();
  if (a.fault == "exit") std::_Exit(3);
  if (a.fault == "hang") hang(fn, args);
  call(fn, args);
  if (a.fault == "crash") raise(SIGSEGV);  // only if the kernel somehow did not fault

  // Verify before timing: a time is only reported for a correct kernel.
  if (a.fault == "garbage" && out.size() > 0) {
    if (out_type == ir::DataType::f32())
      reinterpret_cast<float*>(out.data())[out.size() / 2] += 1000.0f;
    else
      out.data()[out.bytes() / 2] ^= 0x5a;
  }
  double err = ops::max_error(out_type, out.data(), ref.data(), out.size());
  json result;
  result["max_rel_err"] = std::isfinite(err) ? err : 1e300;
  if (!(err <= a.rtol)) {
    result["status"] = "wrong_result";
    result["message"] = "max relative error " + std::to_string(err) + " > rtol " +
                        std::to_string(a.rtol) + " against the reference of " + t.name();
    return result.dump();
  }

  std::vector<double> times_ms;
  std::vector<int64_t> calls;
  std::optional<ColdWeightRing> ring;
  if (a.cold_weights)
    ring.emplace(inputs, CacheFlusher::buffer_bytes(sysconf(_SC_LEVEL3_CACHE_SIZE)));
  time_kernel(fn, args, a, ring ? &*ring : nullptr, times_ms, calls);
  result["status"] = "ok";
  result["times_ms"] = times_ms;
  result["calls"] = calls;
  return result.dump();
}

// ---- serve mode -------------------------------------------------------------------------

std::string signal_description(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  std::string name = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
  const char* desc = strsignal(sig);
  return desc ? name + " (" + desc + ")" : name;
}

std::string serve_request_header(const WorkerArgs& a, double timeout_s, uint64_t so_size) {
  json h = {{"workload", a.workload_key},
            {"config", a.config_json},
            {"symbol", a.symbol},
            {"number", a.number},
            {"repeat", a.repeat},
            {"min_repeat_ms", a.min_repeat_ms},
            {"flush_cache", a.flush_cache},
            {"cold_weights", a.cold_weights},
            {"rtol", a.rtol},
            {"num_threads", a.num_threads},
            {"seed", a.seed},
            {"timeout_s", timeout_s},
            {"so_size", so_size}};
  if (!a.fault.empty()) h["fault"] = a.fault;
  return h.dump();
}

WorkerArgs parse_serve_request(const std::string& header, double& timeout_s, uint64_t& so_size) {
  json h = json::parse(header, nullptr, /*allow_exceptions=*/false);
  if (!h.is_object()) throw std::invalid_argument("request header is not a JSON object");
  WorkerArgs a;
  try {
    a.workload_key = h.at("workload").get<std::string>();
    a.config_json = h.at("config").get<std::string>();
    a.symbol = h.at("symbol").get<std::string>();
    a.number = h.value("number", 1);
    a.repeat = h.value("repeat", 3);
    a.min_repeat_ms = h.value("min_repeat_ms", 0.0);
    a.flush_cache = h.value("flush_cache", true);
    a.cold_weights = h.value("cold_weights", false);
    a.rtol = h.value("rtol", 1e-4);
    a.num_threads = h.value("num_threads", 0);
    a.seed = h.value("seed", uint64_t(42));
    a.fault = h.value("fault", std::string());
    timeout_s = h.value("timeout_s", 10.0);
    so_size = h.at("so_size").get<uint64_t>();
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("bad request header: ") + e.what());
  }
  if (a.number < 1 || a.repeat < 1)
    throw std::invalid_argument("bad request header: number and repeat must be >= 1");
  return a;
}

namespace {

// Runs one candidate in a forked child and returns its result line. The
// child's stdout goes to stderr; its line comes back through a pipe.
std::string serve_one(const WorkerArgs& a, double timeout_s) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0)
    return json{{"status", "error"}, {"message", std::string("pipe: ") + std::strerror(errno)}}
        .dump();
  std::fflush(stdout);
  std::fflush(stderr);
  auto t0 = Clock::now();
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return json{{"status", "error"}, {"message", std::string("fork: ") + std::strerror(errno)}}
        .dump();
  }
  if (pid == 0) {
    close(fds[0]);
    prctl(PR_SET_PDEATHSIG, SIGKILL);  // a server killed mid-run takes its candidate along
    dup2(2, 1);
    int null = open("/dev/null", O_RDONLY);
    if (null >= 0) dup2(null, 0);
    std::string line;
    try {
      line = run_worker(a);
    } catch (const std::exception& e) {
      line = json{{"status", "error"}, {"message", e.what()}}.dump();
    }
    line += "\n";
    for (size_t off = 0; off < line.size();) {
      ssize_t n = write(fds[1], line.data() + off, line.size() - off);
      if (n <= 0 && errno != EINTR) break;
      if (n > 0) off += size_t(n);
    }
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  bool timed_out = false;
  auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(std::max(0.0, timeout_s)));
  for (;;) {
    double ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    if (ms <= 0) {
      timed_out = true;
      break;
    }
    pollfd p = {fds[0], POLLIN, 0};
    int n = poll(&p, 1, int(std::clamp(std::ceil(ms), 1.0, 100.0)));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    char buf[4096];
    ssize_t got = read(fds[0], buf, sizeof buf);
    if (got > 0)
      out.append(buf, size_t(got));
    else if (got == 0 || errno != EINTR)
      break;
  }
  close(fds[0]);
  int status = 0;
  if (timed_out) kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out)
    return json{{"status", "timeout"},
                {"message", "killed after the timeout of " + json(timeout_s).dump() + " s"}}
        .dump();
  if (WIFSIGNALED(status))
    return json{{"status", "error"},
                {"message", "worker killed by " + signal_description(WTERMSIG(status))}}
        .dump();
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  json j = json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("status"))
    return json{{"status", "error"},
                {"message", "worker exited with status " +
                                std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
                                " without a result"}}
        .dump();
  return j.dump();
}

// Protocol lines go to this descriptor (the server's original stdout); fd 1
// itself is pointed at stderr, so that nothing a kernel or library prints can
// break the protocol.
int g_protocol_fd = 1;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    n -= size_t(w);
  }
}

void print_line(const std::string& line) {
  std::string l = line + "\n";
  write_all(g_protocol_fd, l.data(), l.size());
}

// ---- in-process isolation: where fork() cannot be used (qemu-user here hangs in
// a forked child), the candidate runs in the server itself. A fatal signal or
// the request's timer (SIGALRM) then writes a result line marked "fatal" from
// the signal handler and ends the server; the host restarts it.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGALRM};
char g_fatal_lines[std::size(kFatalSignals)][256];
// The kernel's threads fault together (an output they may not write): the
// first to enter the handler writes the line and ends the process; the others
// wait for it (a bounded wait: should the first fault inside the handler, the
// process still ends), so that none ends it before the line is written.
std::atomic<bool> g_fatal_claimed{false};
std::atomic<bool> g_fatal_written{false};
static_assert(std::atomic<bool>::is_always_lock_free);

extern "C" void on_fatal_signal(int sig) {
  if (g_fatal_claimed.exchange(true)) {
    for (int i = 0; i < 1000 && !g_fatal_written.load(); ++i) usleep(1000);
    _exit(3);
  }
  for (size_t i = 0; i < std::size(kFatalSignals); ++i)
    if (kFatalSignals[i] == sig)
      write_all(g_protocol_fd, g_fatal_lines[i], strlen(g_fatal_lines[i]));
  g_fatal_written.store(true);
  _exit(3);
}

void set_fatal_line(int sig, const json& line) {
  for (size_t i = 0; i < std::size(kFatalSignals); ++i)
    if (kFatalSignals[i] == sig)
      std::snprintf(g_fatal_lines[i], sizeof g_fatal_lines[i], "%s\n", line.dump().c_str());
}

std::string serve_in_process(const WorkerArgs& a, double timeout_s) {
  for (int sig : kFatalSignals)
    if (sig != SIGALRM)
      set_fatal_line(sig, {{"status", "error"},
                           {"message", "worker killed by " + signal_description(sig)},
                           {"fatal", true}});
  set_fatal_line(SIGALRM,
                 {{"status", "timeout"},
                  {"message", "killed after the timeout of " + json(timeout_s).dump() + " s"},
                  {"fatal", true}});
  struct sigaction sa = {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  // Not SA_RESETHAND: a second thread's fault must reach the handler too,
  // not end the process before the first has written the line.
  sa.sa_flags = SA_NODEFER;
  for (int sig : kFatalSignals) sigaction(sig, &sa, nullptr);
  itimerval timer = {};
  double t = std::max(timeout_s, 1e-3);
  timer.it_value.tv_sec = time_t(t);
  timer.it_value.tv_usec = suseconds_t((t - std::floor(t)) * 1e6);
  setitimer(ITIMER_REAL, &timer, nullptr);
  std::string line;
  try {
    line = run_worker(a);
  } catch (const std::exception& e) {
    line = json{{"status", "error"}, {"message", e.what()}}.dump();
  }
  timer = {};
  setitimer(ITIMER_REAL, &timer, nullptr);
  sa.sa_handler = SIG_DFL;
  sa.sa_flags = 0;
  for (int sig : kFatalSignals) sigaction(sig, &sa, nullptr);
  return line;
}

// A server that ended by a fatal signal (isolation "none") left its folder
// (library, reference cache) behind: the next one removes the folders whose
// server process is gone. Their names carry the pid: kiln-serve-PID-XXXXXX.
void remove_dead_servers_folders() {
  namespace fs = std::filesystem;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::temp_directory_path(), ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("kiln-serve-", 0) != 0) continue;
    long pid = std::strtol(name.c_str() + 11, nullptr, 10);
    if (pid <= 0 || pid == getpid() || !e.is_directory(ec)) continue;
    if (kill(pid_t(pid), 0) == 0 || errno != ESRCH) continue;  // alive (or not ours to judge)
    std::error_code rm;
    fs::remove_all(e.path(), rm);
  }
}

// Whether a forked child runs here: it must exit within a few seconds.
bool fork_works() {
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) _exit(0);
  auto deadline = Clock::now() + std::chrono::seconds(3);
  int status = 0;
  for (;;) {
    pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (w < 0 && errno != EINTR) return false;
    if (Clock::now() >= deadline) break;
    usleep(2000);
  }
  kill(pid, SIGKILL);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return false;
}

}  // namespace

int measure_worker_serve(bool allow_fork) {
  namespace fs = std::filesystem;
  signal(SIGPIPE, SIG_IGN);  // a host gone away shows as a failed write, then EOF
  std::fflush(stdout);
  g_protocol_fd = fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (g_protocol_fd < 0)
    g_protocol_fd = 1;
  else
    dup2(2, 1);
  remove_dead_servers_folders();
  std::string tmpl =
      (fs::temp_directory_path() / ("kiln-serve-" + std::to_string(getpid()) + "-XXXXXX")).string();
  if (!mkdtemp(tmpl.data())) {
    print_line(json{
        {"status", "error"},
        {"message", "cannot create a temporary directory: " + std::string(std::strerror(errno))}}
                   .dump());
    return 2;
  }
  const fs::path dir = tmpl;
  std::error_code ec;
  fs::create_directories(dir / "refs", ec);
  struct Cleanup {
    fs::path dir;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  } cleanup{dir};

  std::vector<std::string> features;
  for (const std::string& f : runtime::checkable_cpu_features(runtime::host_arch()))
    if (runtime::host_has_cpu_feature(f)) features.push_back(f);
  const bool forking = allow_fork && fork_works();
  // Test only: a planted fault for every request (tests/e2e/run_arm_qemu_tune.sh
  // checks verification and fault handling on the device this way).
  const char* env_fault = std::getenv("KILN_MEASURE_WORKER_FAULT");
  const std::string planted = env_fault ? env_fault : "";
  print_line(json{{"kiln_measure_worker", "serve"},
                  {"protocol", 1},
                  {"isolation", forking ? "fork" : "none"},
                  {"arch", runtime::host_arch()},
                  {"features", features},
                  {"num_threads", kiln_get_num_threads()}}
                 .dump());

  char* raw = nullptr;
  size_t cap = 0;
  for (uint64_t n = 0;; ++n) {
    ssize_t len = getline(&raw, &cap, stdin);
    if (len < 0) break;  // EOF: the host is done
    std::string header(raw, size_t(len));
    while (!header.empty() && (header.back() == '\n' || header.back() == '\r')) header.pop_back();
    if (header.empty()) continue;
    WorkerArgs a;
    double timeout_s = 10;
    uint64_t so_size = 0;
    try {
      a = parse_serve_request(header, timeout_s, so_size);
    } catch (const std::exception& e) {
      print_line(json{{"status", "error"}, {"message", e.what()}}.dump());
      std::free(raw);
      return 2;  // the stream cannot be framed any more
    }
    a.so_path = (dir / ("cand-" + std::to_string(n) + ".so")).string();
    a.reference_cache = (dir / "refs").string();
    if (a.fault.empty()) a.fault = planted;
    {
      std::ofstream so(a.so_path, std::ios::binary);
      std::vector<char> buf(1 << 16);
      uint64_t left = so_size;
      while (left > 0) {
        size_t want = size_t(std::min<uint64_t>(left, buf.size()));
        size_t got = std::fread(buf.data(), 1, want, stdin);
        if (got == 0) break;
        so.write(buf.data(), std::streamsize(got));
        left -= got;
      }
      if (left > 0) {
        print_line(json{{"status", "error"},
                        {"message", "request truncated: " + std::to_string(left) + " of " +
                                        std::to_string(so_size) + " library bytes missing"}}
                       .dump());
        std::free(raw);
        return 2;
      }
      so.close();
      if (!so) {
        print_line(json{{"status", "error"}, {"message", "cannot write " + a.so_path}}.dump());
        fs::remove(a.so_path, ec);
        continue;
      }
    }
    print_line(forking ? serve_one(a, timeout_s) : serve_in_process(a, timeout_s));
    fs::remove(a.so_path, ec);
  }
  std::free(raw);
  return 0;
}

int measure_worker_main(int argc, char** argv) {
  if (argc >= 2 && std::string(argv[1]) == "--serve") {
    if (argc == 2) return measure_worker_serve(/*allow_fork=*/true);
    if (argc == 3 && std::string(argv[2]) == "--no-fork") return measure_worker_serve(false);
    std::fputs("usage: kiln-measure-worker --serve [--no-fork]\n", stderr);
    return 2;
  }
  std::string line;
  int rc = 0;
  try {
    WorkerArgs a = parse_worker_args(std::vector<std::string>(argv + 1, argv + argc));
    if (a.parent_pid > 0) {
      // A tuner killed mid-measurement must not leave a hanging worker behind.
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != a.parent_pid) return 2;
    }
    line = run_worker(a);
  } catch (const std::exception& e) {
    line = json{{"status", "error"}, {"message", e.what()}}.dump();
    rc = 2;
  }
  std::cout << line << "\n" << std::flush;
  return rc;
}

}  // namespace kiln::tuner
