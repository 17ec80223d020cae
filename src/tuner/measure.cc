#include "tuner/measure.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "codegen/codegen.h"
#include "ops/op_template.h"
#include "ops/workload.h"
#include "runtime/cpu_features.h"
#include "schedule/config_space.h"
#include "schedule/lower.h"
#include "support/process.h"
#include "support/temp_files.h"
#include "tuner/measure_worker.h"
#include "tuner/rank_test.h"
#include "tuner/remote_runner.h"

namespace kiln::tuner {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string find_measure_worker(const MeasureOptions& options) {
  std::vector<std::string> tried;
  auto usable = [&](const std::string& p) {
    tried.push_back(p);
    return !p.empty() && access(p.c_str(), X_OK) == 0 && fs::is_regular_file(p);
  };
  if (!options.worker_path.empty()) {
    if (usable(options.worker_path)) return options.worker_path;
  } else {
    const char* env = std::getenv("KILN_MEASURE_WORKER");
    if (env && *env) {
      if (usable(env)) return env;
    } else {
      std::error_code ec;
      fs::path self = fs::read_symlink("/proc/self/exe", ec);
      if (!ec && usable((self.parent_path() / "kiln-measure-worker").string())) return tried.back();
    }
  }
  std::string where;
  for (auto& p : tried) where += (where.empty() ? "" : ", ") + p;
  throw std::runtime_error("kiln-measure-worker not found or not executable (tried: " +
                           (where.empty() ? std::string("nothing") : where) +
                           "); set MeasureOptions::worker_path or KILN_MEASURE_WORKER");
}

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// One candidate after the compile stage.
struct Built {
  ErrorClass error = ErrorClass::kOk;
  std::string message;
  std::string so_path, symbol;
  double flops = 0;
  double compile_s = 0;
  int64_t code_size = 0;
};

Built build_candidate(const MeasureInput& in, const std::string& fault,
                      const codegen::Target& target, const fs::path& so_path,
                      const MeasureOptions& o) {
  Built b;
  auto t0 = Clock::now();
  auto fail = [&](ErrorClass e, const std::string& msg) {
    b.error = e;
    b.message = msg;
    b.compile_s = seconds_since(t0);
    return b;
  };
  const ops::OpTemplate* t = nullptr;
  ops::Workload w;
  schedule::ConfigSpace space;
  try {
    w = ops::Workload::parse(in.workload_key);
    t = &ops::get_template(w.template_name);
    space = t->space(w);
    b.flops = t->flops(w);
  } catch (const std::exception& e) {
    return fail(ErrorClass::kCompileError, std::string("bad workload: ") + e.what());
  } catch (...) {
    return fail(ErrorClass::kCompileError, "bad workload: unknown exception");
  }
  schedule::Config cfg;
  try {
    cfg = schedule::Config::from_json(space, in.config_json);
  } catch (const std::exception& e) {
    return fail(ErrorClass::kInvalidConfig,
                std::string("config not in the space of ") + t->name() + ": " + e.what());
  } catch (...) {
    return fail(ErrorClass::kInvalidConfig, "config not in the space of " + t->name());
  }
  try {
    if (fault == "compile")
      throw std::runtime_error("planted compile fault (fault_injection=\"compile\")");
    // Over the budget the candidate is rejected, not demoted: its config asks
    // for that unrolling, and a demoted kernel would be timed under its name.
    schedule::LowerOptions lo;
    lo.code_budget = o.code_budget;
    lo.vector_bits = target.isa().vector_bits;
    lo.demote_over_budget = false;
    schedule::LowerReport report;
    lo.report = &report;
    ir::LoweredFunc f = ops::lower_template_kernel(*t, w, cfg, lo);
    b.code_size = report.code_size;
    codegen::build_shared_library({f}, target, so_path.string());
    b.so_path = so_path.string();
    b.symbol = f.name;
  } catch (const schedule::CodeBudgetExceeded& e) {
    b.code_size = e.size;
    return fail(ErrorClass::kCompileBudget, e.what());
  } catch (const std::exception& e) {
    return fail(ErrorClass::kCompileError, e.what());
  } catch (...) {
    return fail(ErrorClass::kCompileError, "unknown exception while compiling");
  }
  b.compile_s = seconds_since(t0);
  if (o.compile_budget_s > 0 && b.compile_s > o.compile_budget_s) {
    b.error = ErrorClass::kCompileBudget;
    b.message = "compiling took " + json(b.compile_s).dump() + " s, over the compile budget of " +
                json(o.compile_budget_s).dump() + " s (estimated " + std::to_string(b.code_size) +
                " operations)";
    std::error_code ec;
    fs::remove(b.so_path, ec);
    b.so_path.clear();
  }
  return b;
}

std::string fault_of(const MeasureOptions& o, size_t i) {
  auto it = o.fault_injection.find(i);
  return it == o.fault_injection.end() ? "" : it->second;
}

std::vector<Built> build_all(const std::vector<MeasureInput>& inputs, const codegen::Target& target,
                             const fs::path& dir, const MeasureOptions& o) {
  std::vector<Built> built(inputs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < inputs.size();)
      built[i] = build_candidate(inputs[i], fault_of(o, i), target,
                                 dir / ("cand-" + std::to_string(i) + ".so"), o);
  };
  size_t n = std::clamp<size_t>(o.compile_threads, 1, std::max<size_t>(inputs.size(), 1));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& th : pool) th.join();
  return built;
}

// ---- running a worker process -----------------------------------------------------------

std::string tail(const std::string& s, size_t n = 2000) {
  std::string t = s.size() > n ? "..." + s.substr(s.size() - n) : s;
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

// The verdict of a worker's result line (a JSON object with a "status").
template <class Fail>
void classify_line(const json& j, Fail&& fail, MeasureResult& r) {
  std::string status = j["status"];
  if (j.contains("max_rel_err") && j["max_rel_err"].is_number()) r.max_rel_err = j["max_rel_err"];
  std::string message = j.value("message", std::string());
  if (status == "wrong_result") return fail(ErrorClass::kWrongResult, message);
  if (status != "ok")
    return fail(ErrorClass::kRuntimeError,
                message.empty() ? "worker reported '" + status + "'" : message);
  try {
    r.times_ms = j.at("times_ms").get<std::vector<double>>();
    auto calls = j.at("calls").get<std::vector<int64_t>>();
    r.number_used = calls.empty() ? 0 : *std::max_element(calls.begin(), calls.end());
  } catch (const std::exception& e) {
    return fail(ErrorClass::kRuntimeError, std::string("malformed worker result: ") + e.what());
  }
  if (r.times_ms.empty()) return fail(ErrorClass::kRuntimeError, "worker reported no times");
  r.error = ErrorClass::kOk;
}

// The worker's verdict from its exit and its one JSON line.
void classify(const support::ProcessResult& p, double timeout_s, MeasureResult& r) {
  r.run_s = p.wall_s;
  auto fail = [&](ErrorClass e, std::string msg) {
    r.error = e;
    std::string err = tail(p.err);
    r.message = err.empty() ? msg : msg + "; stderr: " + err;
  };
  if (!p.spawn_error.empty()) return fail(ErrorClass::kRuntimeError, p.spawn_error);
  if (p.timed_out)
    return fail(ErrorClass::kTimeout,
                "killed after the timeout of " + json(timeout_s).dump() + " s");
  if (WIFSIGNALED(p.status))
    return fail(ErrorClass::kRuntimeError,
                "worker killed by " + signal_description(WTERMSIG(p.status)));
  int code = WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
  // The last non-empty stdout line is the result.
  std::string out = p.out;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  std::string line =
      out.substr(out.find_last_of('\n') == std::string::npos ? 0 : out.find_last_of('\n') + 1);
  json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("status") || !j["status"].is_string())
    return fail(ErrorClass::kRuntimeError,
                "worker exited with status " + std::to_string(code) + " without a result");
  classify_line(j, fail, r);
}

// A serve-mode worker's answer, or the runner's failure to give one.
void classify_remote(const RemoteRunner::Reply& reply, MeasureResult& r) {
  r.run_s = reply.wall_s;
  auto fail = [&](ErrorClass e, std::string msg) {
    r.error = e;
    r.message = std::move(msg);
  };
  if (!reply.error.empty())
    return fail(reply.timed_out ? ErrorClass::kTimeout : ErrorClass::kRuntimeError, reply.error);
  json j = json::parse(reply.line);  // checked by RemoteRunner::request
  if (j["status"] == "timeout")
    return fail(ErrorClass::kTimeout, j.value("message", std::string("timeout")));
  classify_line(j, fail, r);
}

}  // namespace

bool cold_weights_by_default(int64_t largest_weight_bytes, int64_t llc_bytes,
                             const MeasureOptions& options) {
  return options.runner.empty() && llc_bytes > 0 && largest_weight_bytes > llc_bytes / 2;
}

void check_host_runs(const codegen::Target& target) {
  if (target.arch() != runtime::host_arch())
    throw std::runtime_error("cannot measure kernels for " + target.str() +
                             " on this machine: it is " + runtime::host_arch() + ", the target " +
                             target.arch());
  std::vector<std::string> missing = runtime::missing_cpu_features(target.required_features());
  if (missing.empty()) return;
  std::string names;
  for (const std::string& m : missing) names += (names.empty() ? "" : ", ") + m;
  throw std::runtime_error("cannot measure kernels for " + target.str() +
                           " on this machine: it lacks " + names + " (tune on a machine of ISA " +
                           "class " + target.isa().isa_class + ")");
}

void check_runner_runs(RemoteRunner& runner, const codegen::Target& target) {
  const RemoteRunner::Hello& h = runner.hello();
  const std::string where = "through the runner '" + runner.command() + "'";
  if (target.arch() != h.arch)
    throw std::runtime_error("cannot measure kernels for " + target.str() + " " + where +
                             ": its device is " + h.arch + ", the target " + target.arch());
  std::string names;
  for (const std::string& f : target.required_features())
    if (std::find(h.features.begin(), h.features.end(), f) == h.features.end())
      names += (names.empty() ? "" : ", ") + f;
  if (!names.empty())
    throw std::runtime_error("cannot measure kernels for " + target.str() + " " + where +
                             ": its device lacks " + names);
}

std::shared_ptr<RemoteRunner> runner_for(const MeasureOptions& options) {
  if (options.runner_session) return options.runner_session;
  // Starting may mean qemu, or ssh and a login: more than a candidate's timeout.
  return std::make_shared<RemoteRunner>(options.runner, std::max(30.0, options.timeout_s));
}

std::vector<MeasureResult> measure_batch(const std::vector<MeasureInput>& inputs,
                                         const codegen::Target& target,
                                         const MeasureOptions& options) {
  std::string worker;
  std::shared_ptr<RemoteRunner> runner;
  if (options.runner.empty()) {
    check_host_runs(target);  // a candidate would die with SIGILL: not a result
    worker = find_measure_worker(options);
  } else {
    runner = runner_for(options);
    check_runner_runs(*runner, target);  // the device's hello: its arch and features
  }
  std::vector<MeasureResult> results(inputs.size());
  if (inputs.empty()) return results;
  // A private directory for the batch's libraries: removed with its contents on
  // return and by kiln's signal handler (support/temp_files.h).
  support::TempDir dir("measure");
  std::vector<Built> built = build_all(inputs, target, dir.path(), options);
  support::test_pause_point("measure");

  // One at a time: concurrent workers would time each other.
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (options.should_stop && options.should_stop()) {
      results.resize(i);
      break;
    }
    MeasureResult& r = results[i];
    const Built& b = built[i];
    r.compile_s = b.compile_s;
    r.code_size = b.code_size;
    if (b.error != ErrorClass::kOk) {
      r.error = b.error;
      r.message = b.message;
      if (options.on_result) options.on_result(i, r);
      continue;
    }
    WorkerArgs a;
    a.so_path = b.so_path;
    a.symbol = b.symbol;
    a.workload_key = inputs[i].workload_key;
    a.config_json = inputs[i].config_json;
    a.number = std::max(1, options.number);
    a.repeat = std::max(1, options.repeat);
    a.min_repeat_ms = options.min_repeat_ms;
    a.flush_cache = options.flush_cache;
    a.cold_weights = options.cold_weights;
    a.rtol = options.rtol;
    a.num_threads = options.num_threads;
    a.seed = options.seed;
    a.reference_cache = options.reference_cache;
    a.fault = fault_of(options, i);
    if (a.fault == "compile") a.fault.clear();
    a.parent_pid = getpid();
    // The timeout bounds loading, verification and `number` calls per repeat; the time
    // that min_repeat_ms asks for comes on top (a repeat's growth attempts sum to < 3x it).
    double limit_s = options.timeout_s + 3e-3 * a.repeat * std::max(0.0, options.min_repeat_ms);
    if (runner) {
      // The server enforces limit_s on the device; the margin covers the transfer, and
      // a runner silent past it is killed and restarted.
      std::ifstream so(b.so_path, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(so)), std::istreambuf_iterator<char>());
      if (!so.good() && !so.eof()) {
        r.error = ErrorClass::kRuntimeError;
        r.message = "cannot read " + b.so_path;
      } else {
        RemoteRunner::Reply reply;
        try {
          reply = runner->request(serve_request_header(a, limit_s, bytes.size()), bytes,
                                  1.5 * limit_s + 10);
        } catch (const std::runtime_error&) {
          // The runner could not be started again (the device went away): no result for
          // this candidate. The ones measured so far are returned, to be stored; the next
          // batch meets the same error at its start, unless the device is back.
          if (i == 0) throw;
          results.resize(i);
          break;
        }
        classify_remote(reply, r);
      }
    } else {
      std::vector<std::string> argv = worker_argv(a);
      argv.insert(argv.begin(), worker);
      classify(support::run_process(argv, limit_s), limit_s, r);
    }
    if (r.error == ErrorClass::kOk) r.gflops = b.flops / (median(r.times_ms) * 1e6);
    std::error_code ec;
    fs::remove(b.so_path, ec);
    if (options.on_result) options.on_result(i, r);
  }
  return results;
}

}  // namespace kiln::tuner
