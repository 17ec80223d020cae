#include "lease_sim.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "tuner/records.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;
using tuner::ClaimResult;
using tuner::Record;
using tuner::RecordDB;
using tuner::RecordDBBusy;

const char* kTarget =
    "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver4; features=+avx2,+avx512f,+fma; threads=2; "
    "kiln=0.1.0; llvm=16.0.6";

std::string task_key(int t) { return "sim_task(n=[" + std::to_string(t) + "])"; }

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

// Calls f until it does not throw RecordDBBusy (as the tune loop does).
template <typename F>
auto retry_busy(std::atomic<int64_t>& busy, F&& f) {
  for (int attempt = 0;; ++attempt) {
    try {
      return f();
    } catch (const RecordDBBusy&) {
      ++busy;
      if (attempt > 50) throw;
      std::this_thread::sleep_for(std::chrono::milliseconds(10 * (1 + attempt % 10)));
    }
  }
}

}  // namespace

std::string LeaseSimReport::to_text() const {
  char buf[2048];
  std::snprintf(buf, sizeof buf,
                "elapsed_s        %.1f\n"
                "leases           %lld (%.1f/s)\n"
                "records          %lld (%.1f/s); read back %lld, duplicates %lld\n"
                "proposed         %lld; granted %lld; refused %lld (%.1f%%)\n"
                "skipped_locked   %lld\n"
                "lock_waits     %lld (leases that waited for a task lock)\n"
                "busy_retries     %lld\n"
                "errors           %lld%s%s\n"
                "lease_ms         p50 %.2f  p99 %.2f  max %.2f\n"
                "store_ms         p50 %.2f  p99 %.2f\n"
                "tasks_capped     %lld\n",
                elapsed_s, static_cast<long long>(leases), leases_per_s(),
                static_cast<long long>(records), records_per_s(), static_cast<long long>(stored),
                static_cast<long long>(duplicates), static_cast<long long>(proposed),
                static_cast<long long>(granted), static_cast<long long>(refused),
                proposed ? 100.0 * refused / proposed : 0.0, static_cast<long long>(skipped_locked),
                static_cast<long long>(lock_waits), static_cast<long long>(busy_retries),
                static_cast<long long>(errors), first_error.empty() ? "" : ": ",
                first_error.c_str(), lease_p50_ms, lease_p99_ms, lease_max_ms, store_p50_ms,
                store_p99_ms, static_cast<long long>(tasks_capped));
  return buf;
}

LeaseSimReport run_lease_sim(const LeaseSimOptions& o) {
  const int cap = o.trials > 0 ? o.trials : o.space / 2;
  RecordDB::open(o.url);  // the schema, once, before the workers start

  std::atomic<int64_t> leases{0}, proposed{0}, granted{0}, refused{0}, skipped{0}, lock_waits{0},
      busy{0}, errors{0}, records{0};
  std::vector<std::atomic<bool>> capped(static_cast<size_t>(o.tasks));
  for (auto& c : capped) c = false;
  std::mutex mu;  // guards the latency lists and first_error
  std::vector<double> lease_ms, store_ms;
  std::string first_error;

  const Clock::time_point start = Clock::now();
  const Clock::time_point deadline =
      start + std::chrono::milliseconds(static_cast<int64_t>(o.seconds * 1000));
  std::vector<std::thread> threads;
  for (int w = 0; w < o.workers; ++w) {
    threads.emplace_back([&, w] {
      std::vector<double> my_lease, my_store;
      try {
        RecordDB db = RecordDB::open(o.url);
        const std::string owner = tuner::make_claim_owner();
        std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(w));
        int task = static_cast<int>(rng() % static_cast<uint64_t>(o.tasks));
        while (Clock::now() < deadline) {
          // A task that reached its cap is done: the next one that is not.
          int tries = 0;
          while (capped[static_cast<size_t>(task)] && tries++ < o.tasks)
            task = (task + 1) % o.tasks;
          if (capped[static_cast<size_t>(task)]) break;
          std::vector<std::string> configs;
          for (int i = 0; i < o.batch; ++i)
            configs.push_back(
                "{\"tile\":" + std::to_string(rng() % static_cast<uint64_t>(o.space)) + "}");
          const Clock::time_point t0 = Clock::now();
          ClaimResult c = retry_busy(
              busy, [&] { return db.claim(task_key(task), kTarget, configs, owner, cap); });
          my_lease.push_back(ms_since(t0));
          ++leases;
          proposed += static_cast<int64_t>(configs.size());
          lock_waits += c.lock_waits;
          skipped += c.skipped_locked;
          if (c.capped) {
            capped[static_cast<size_t>(task)] = true;
            continue;
          }
          std::vector<Record> rs;
          for (size_t i = 0; i < configs.size(); ++i) {
            if (!c.granted[i]) continue;
            Record r;
            r.workload_key = task_key(task);
            r.target_key = kTarget;
            r.config_json = configs[i];
            r.times_ms = {1.0 + static_cast<double>(rng() % 1000) / 100.0};
            r.timestamp_unix = 1700000000;
            r.kiln_version = "0.1.0";
            rs.push_back(r);
          }
          int64_t not_granted = static_cast<int64_t>(configs.size() - rs.size());
          // Short of the cap, a refusal is a conflict: recorded, held, or a repeat.
          refused += not_granted;
          granted += static_cast<int64_t>(rs.size());
          std::this_thread::sleep_for(std::chrono::microseconds(
              static_cast<int64_t>(o.measure_ms * 1000 * static_cast<double>(rs.size()))));
          if (!rs.empty()) {
            const Clock::time_point t1 = Clock::now();
            retry_busy(busy, [&] {
              db.add_batch(rs);
              return 0;
            });
            my_store.push_back(ms_since(t1));
            records += static_cast<int64_t>(rs.size());
          }
          // Tuners stay on a task for a while: the next task now and then.
          if (rng() % 4 == 0) task = static_cast<int>(rng() % static_cast<uint64_t>(o.tasks));
        }
        db.release_claims(owner);
      } catch (const std::exception& e) {
        ++errors;
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty()) first_error = e.what();
      }
      std::lock_guard<std::mutex> lock(mu);
      lease_ms.insert(lease_ms.end(), my_lease.begin(), my_lease.end());
      store_ms.insert(store_ms.end(), my_store.begin(), my_store.end());
    });
  }
  for (std::thread& t : threads) t.join();

  LeaseSimReport r;
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
  r.leases = leases;
  r.proposed = proposed;
  r.granted = granted;
  r.refused = refused;
  r.skipped_locked = skipped;
  r.lock_waits = lock_waits;
  r.busy_retries = busy;
  r.errors = errors;
  r.records = records;
  r.first_error = first_error;
  for (auto& c : capped) r.tasks_capped += c ? 1 : 0;
  r.lease_p50_ms = percentile(lease_ms, 0.5);
  r.lease_p99_ms = percentile(lease_ms, 0.99);
  r.lease_max_ms = lease_ms.empty() ? 0 : lease_ms.back();
  r.store_p50_ms = percentile(store_ms, 0.5);
  r.store_p99_ms = percentile(store_ms, 0.99);

  // Read back: every stored config once.
  RecordDB db = RecordDB::open(o.url);
  std::set<std::pair<std::string, std::string>> seen;
  for (const Record& rec : db.all_records()) {
    ++r.stored;
    if (!seen.insert({rec.workload_key, rec.config_json}).second) ++r.duplicates;
  }
  return r;
}

}  // namespace kiln::bench
