// The lease simulation (issue 15, item 7): many simulated tuners against one
// records database, to see how far one PostgreSQL server carries.
//
// Each worker is a thread with its own RecordDB connection, acting as one
// `kiln tune` process does: it picks a task, proposes a batch of random
// configs of that task's space, claims them (RecordDB::claim, the lease, with
// the task's trial cap), "measures" the granted ones by sleeping, stores one
// record per granted config in one add_batch, and goes on, until the time is
// up or every task reached its cap. Measured: leases and records per second,
// the lease latency (p50, p99, max), and contention: configs refused (held or
// recorded by others: the conflicts a real tuner re-proposes), configs
// skipped because another transaction held them at that instant, polls of a
// task's lock (lease waits), busy errors retried. At the end the database is
// read back: no config may be stored twice, and every granted config must be
// stored.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::bench {

struct LeaseSimOptions {
  std::string url;          // the records database (PostgreSQL URL or sqlite file)
  int workers = 100;        // threads, one connection each
  double seconds = 20;      // wall-clock bound
  int tasks = 50;           // workloads to tune
  int space = 4000;         // configs per task's space
  int trials = 0;           // cap per task (0: space / 2)
  int batch = 8;            // configs proposed per lease
  double measure_ms = 100;  // simulated measurement of one config
  uint64_t seed = 1;
};

struct LeaseSimReport {
  double elapsed_s = 0;
  int64_t leases = 0;          // claim() calls
  int64_t proposed = 0;        // configs proposed
  int64_t granted = 0;         // configs granted (leased)
  int64_t refused = 0;         // proposed, not granted, cap aside: held or recorded already
  int64_t skipped_locked = 0;  // of those: held by another transaction at that instant
  int64_t lock_waits = 0;      // leases that waited for a task lock held by another
  int64_t busy_retries = 0;    // RecordDBBusy, retried
  int64_t errors = 0;          // any other error (the run is then a failure)
  int64_t records = 0;         // records stored by the workers
  int64_t stored = 0;          // records read back at the end
  int64_t duplicates = 0;      // configs stored more than once
  int64_t tasks_capped = 0;    // tasks that reached their cap
  double lease_p50_ms = 0, lease_p99_ms = 0, lease_max_ms = 0;
  double store_p50_ms = 0, store_p99_ms = 0;
  std::string first_error;

  double leases_per_s() const { return elapsed_s > 0 ? leases / elapsed_s : 0; }
  double records_per_s() const { return elapsed_s > 0 ? records / elapsed_s : 0; }
  // One line per figure, for logs and the results file.
  std::string to_text() const;
};

LeaseSimReport run_lease_sim(const LeaseSimOptions& o);

}  // namespace kiln::bench
