// Where the tuning loop writes what it measured. The loop only appends
// records, one batch per round, so a store (the sqlite RecordDB today, a
// shared server database later) or a test's recorder plugs in here.
//
// Before measuring a batch the loop claims it (claim()): a store shared with
// other tuners grants only configs nobody recorded or holds, within the trial
// cap, so that concurrent runs measure no config twice. A sink of its own
// (memory, tests) grants everything.
#pragma once

#include <unistd.h>

#include <string>
#include <vector>

#include "tuner/records.h"

namespace kiln::tuner {

class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Stores the batch whole or not at all; throws on failure. RecordDBBusy
  // means "locked, retry": the loop keeps the round and tries again.
  virtual void add_batch(const std::vector<Record>& records) = 0;
  // Which of `configs` (JSON) of the workload on the target this run may
  // measure; max_trials > 0 caps the task's records plus live claims;
  // records that timed out below retry_timeouts_below_s are retried
  // (RecordDB::claim). May throw RecordDBBusy (the loop retries).
  virtual ClaimResult claim(const std::string& workload_key, const std::string& target_key,
                            const std::vector<std::string>& configs, int64_t max_trials,
                            double retry_timeouts_below_s) {
    (void)workload_key, (void)target_key, (void)max_trials, (void)retry_timeouts_below_s;
    ClaimResult r;
    r.granted.assign(configs.size(), true);
    return r;
  }
  // Heartbeat for this run's claims while it measures (best effort).
  virtual void renew_claims() {}
  // Drops this run's claims that were not stored (after each round and at the end).
  virtual void release_claims() {}
  // Where the records of a round that cannot be stored go (JSON lines), and
  // how to import them; empty: nowhere (the loop only throws).
  virtual std::string unsaved_path() const { return ""; }
  virtual std::string import_hint(const std::string& unsaved) const {
    (void)unsaved;
    return "";
  }
};

// Appends to a records database (one transaction per batch), claiming
// configs in it as owner "pid@host/token".
class RecordDBSink : public RecordSink {
 public:
  explicit RecordDBSink(RecordDB& db) : db_(db), owner_(make_claim_owner()) {}
  void add_batch(const std::vector<Record>& records) override { db_.add_batch(records); }
  ClaimResult claim(const std::string& workload_key, const std::string& target_key,
                    const std::vector<std::string>& configs, int64_t max_trials,
                    double retry_timeouts_below_s) override {
    return db_.claim(workload_key, target_key, configs, owner_, max_trials, ttl_s,
                     retry_timeouts_below_s);
  }
  void renew_claims() override { db_.renew_claims(owner_, ttl_s); }
  void release_claims() override { db_.release_claims(owner_); }
  std::string unsaved_path() const override {
    // Beside a sqlite file; a PostgreSQL URL names no directory: the current one.
    const std::string base = is_postgres_url(db_.path()) ? "kiln-records" : db_.path();
    return base + ".unsaved-" + std::to_string(::getpid()) + ".jsonl";
  }
  std::string import_hint(const std::string& unsaved) const override {
    const std::string db = is_postgres_url(db_.path()) ? "'" + db_.path() + "'" : db_.path();
    return "kiln records import " + db + " " + unsaved;
  }
  const std::string& owner() const { return owner_; }

  int64_t ttl_s = RecordDB::kClaimTtlS;  // claims expire this long after the last heartbeat

 private:
  RecordDB& db_;
  std::string owner_;
};

}  // namespace kiln::tuner
