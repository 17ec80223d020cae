// The tuning records database: every measured candidate, in one sqlite file
// or in a PostgreSQL database shared by tuners on many hosts.
//
// RecordDB::open(path_or_url) picks the backend (record_backend.h): a
// "postgresql://" or "postgres://" URL (libpq's form,
// postgresql://user[:password]@host[:port]/db[?param=value]) opens PostgreSQL,
// anything else a sqlite file. Both keep every guarantee below, with the
// server's transactions in place of sqlite's file locking: in PostgreSQL a
// claim takes row locks (a per-task advisory lock only for the trial cap),
// expiry is compared with the server's clock (now()), and a unique index on
// the whole record makes a duplicate impossible even for racing importers.
// The guarantees below name sqlite's mechanisms; PostgreSQL's equivalents are
// described in records_postgres.cc.
//
// A record is one config of one workload measured on one target (TargetKey):
// every time measured, or the error class that stopped it. The tuner adds a
// record per candidate as it goes, so re-running resumes (has_config) and a
// kill loses nothing committed; a build reads best(). Guarantees:
//  - WAL journal, synchronous=FULL, one transaction per add()/add_batch()/
//    import: a kill -9 at any moment leaves a database that opens, passes
//    integrity_check and holds every record committed before it.
//  - Several processes may write the same file at once: write transactions
//    take the lock up front (BEGIN IMMEDIATE) and wait up to 10 s for it
//    (polling every 0.5-2 ms, so that writers take turns).
//  - The schema carries its version (table schema_version); open() migrates
//    older files in one transaction and refuses files a newer kiln wrote.
//  - Nothing stored is ever lost: a failed add or import changes nothing.
//  - Claims (schema version 2, table claims): concurrent tuners measure no
//    config twice. Before measuring a batch a tuner claims its configs in one
//    transaction (claim()): a config already recorded, or held by a live claim
//    of another owner, is refused, and the trial cap is checked against
//    records + live claims in the same transaction, so that two runs together
//    respect it. A claim row is (workload, target, canonical config, owner =
//    "pid@host/random token", created, expires); storing a record deletes the
//    claims of its config, release_claims() drops an owner's leftovers and
//    renew_claims() is the owner's heartbeat. A claim past its expiry (its
//    owner died or stopped renewing) is ignored and may be taken over.
//    Overshoot: none while an owner renews its claims (the loop does every
//    60 s of measuring). An owner of this host whose pid is gone (a tuner
//    killed with -9) loses its live claims at the next claim() of any owner,
//    without waiting for the expiry. Only a run whose claims expired under it (no
//    heartbeat for kClaimTtlS, e.g. stalled 10 min on a locked database) can
//    have its configs taken over and measured twice: at most one batch per
//    task, which may also exceed the trial cap by that batch.
// A write that finds the database locked for longer than the busy timeout
// throws RecordDBBusy (a std::runtime_error): the caller may retry it.
// Errors name the database (or JSONL) file, or the URL without its password:
// std::invalid_argument for a bad record passed in, std::runtime_error for
// everything else (a PostgreSQL server that cannot be reached included).
// Storing a record identical in every field to a stored one is a no-op (add,
// import and sync alike), so copying records twice adds nothing.
//
// JSON lines (export/import), one record per line, fields in this order:
//   {"workload":K,"target":T,"config":{...},"times_ms":[...],"error":"ok",
//    "error_message":"","timestamp":1700000000,"kiln_version":"0.1.0","gflops":12.5}
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tuner/error_class.h"

namespace kiln::tuner {

// The database stayed locked by another connection (SQLITE_BUSY/LOCKED) for
// longer than the busy timeout; nothing was changed, and retrying may succeed.
class RecordDBBusy : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What claim() granted.
struct ClaimResult {
  std::vector<bool> granted;  // per config: this owner may measure it
  int64_t taken = 0;          // records + others' live claims before this batch
  bool capped = false;        // the trial cap is reached: no more trials for the task
  // Contention, for measuring a shared database (PostgreSQL; always 0 in sqlite):
  int64_t lock_waits = 0;      // 1 if the claim waited for the task's lock (held by another)
  int64_t skipped_locked = 0;  // configs skipped: another transaction held them right now
};

// An owner holding live claims on a target key (RecordDB::live_claim_holders).
struct ClaimHolder {
  std::string owner;  // "pid@host/token" (make_claim_owner)
  std::string target_key;
  bool operator==(const ClaimHolder&) const = default;
};

struct Record {
  std::string workload_key;      // ops::Workload::key()
  std::string target_key;        // TargetKey::key()
  std::string config_json;       // a JSON object; stored in canonical form (sorted keys, compact)
  std::vector<double> times_ms;  // every measured run; non-empty for kOk
  ErrorClass error = ErrorClass::kOk;
  std::string error_message;
  int64_t timestamp_unix = 0;
  std::string kiln_version;
  double gflops = 0;

  // Mean of times_ms (what best() ranks by); 0 if there are none.
  double mean_ms() const;
  bool operator==(const Record&) const = default;
};

class RecordBackend;  // record_backend.h: the sqlite or PostgreSQL storage

class RecordDB {
 public:
  static constexpr int kSchemaVersion = 2;
  static constexpr int64_t kClaimTtlS = 600;  // a claim not renewed for 10 min is expired

  enum class Mode { kCreate, kMustExist };
  // Opens (kCreate: creating if absent) and migrates to kSchemaVersion. A
  // PostgreSQL database must exist (CREATE DATABASE is the administrator's);
  // kCreate creates kiln's tables in it, kMustExist refuses one without them.
  static RecordDB open(const std::string& path_or_url, Mode mode = Mode::kCreate);

  RecordDB(RecordDB&&) noexcept;
  RecordDB& operator=(RecordDB&&) noexcept;
  ~RecordDB();

  // The file, or the URL without its password.
  const std::string& path() const;
  // How long a write waits for another connection's lock before throwing
  // RecordDBBusy (default 10 s).
  void set_busy_timeout_ms(int64_t ms);

  // Validates the record (throws std::invalid_argument naming the problem)
  // and stores it in one transaction.
  void add(const Record& r);
  // All or none, in one transaction; deletes the claims of the stored configs.
  void add_batch(const std::vector<Record>& rs);

  // Claims configs of a workload on a target for `owner`, in one transaction:
  // a config is granted unless it is recorded, held by a live (unexpired)
  // claim of another owner, or repeated in `configs`; with max_trials > 0,
  // at most max_trials - (records + live claims of any owner) are granted.
  // Granted claims expire ttl_s seconds from now (renewed by renew_claims).
  // Records that timed_out_below(retry_timeouts_below_s) neither hold their
  // config nor count toward the cap: a run with a longer timeout retries them.
  ClaimResult claim(const std::string& workload_key, const std::string& target_key,
                    const std::vector<std::string>& configs, const std::string& owner,
                    int64_t max_trials = 0, int64_t ttl_s = kClaimTtlS,
                    double retry_timeouts_below_s = 0);
  // Extends the owner's claims to expire ttl_s from now (a heartbeat).
  void renew_claims(const std::string& owner, int64_t ttl_s = kClaimTtlS);
  // Deletes every claim of the owner (what it claimed and did not store).
  void release_claims(const std::string& owner);
  // Live (unexpired) claims on a workload and target, of every owner.
  int64_t live_claims(const std::string& workload_key, const std::string& target_key) const;
  // Every (owner, target key) with a live claim, sorted: who is measuring
  // what right now (tuner/in_graph_records.h reads the owners of this host).
  std::vector<ClaimHolder> live_claim_holders() const;

  // The kOk record with the smallest mean time; ties go to the older record.
  std::optional<Record> best(const std::string& workload_key, const std::string& target_key) const;
  // Every record of the workload on the target, oldest first.
  std::vector<Record> records(const std::string& workload_key, const std::string& target_key) const;
  // Whether this config was measured already (with any outcome); config_json is
  // compared in canonical form, so key order and spacing do not matter.
  bool has_config(const std::string& workload_key, const std::string& target_key,
                  const std::string& config_json) const;
  // The workloads with at least one record on the target, sorted.
  std::vector<std::string> workloads(const std::string& target_key) const;
  // The target keys with at least one record, sorted.
  std::vector<std::string> targets() const;
  size_t count() const;

  // JSON lines, sorted by workload, target, timestamp (then insertion order);
  // only `workload_key`'s records if it is non-empty. Returns the number written.
  size_t export_jsonl(std::ostream& out, const std::string& workload_key = "") const;
  // Writes `path` whole or not at all (a temporary file renamed into place).
  size_t export_jsonl(const std::string& path, const std::string& workload_key = "") const;
  // Parses every line first (a bad line throws "FILE:LINE: why"), then adds the
  // records in one transaction, skipping exact duplicates of stored ones.
  // Returns the number added; on any error nothing is added.
  size_t import_jsonl(const std::string& path);

  // Every record (only workload_key's if non-empty), in export_jsonl's order.
  std::vector<Record> all_records(const std::string& workload_key = "") const;
  // Validates every record first (as import_jsonl does), then adds them in one
  // transaction, skipping records identical to stored ones. Returns the number
  // added; on any error nothing is added.
  size_t import_records(const std::vector<Record>& rs);

 private:
  explicit RecordDB(std::unique_ptr<RecordBackend> backend);
  std::unique_ptr<RecordBackend> impl_;
};

// Copies every record of `from` into `to` (any two stores: sqlite files,
// PostgreSQL databases, either direction) in one transaction of `to`;
// idempotent. Returns the number of records added to `to`.
size_t sync_records(const RecordDB& from, RecordDB& to);
// Whether a --tuning-log names a PostgreSQL database (postgresql:// or
// postgres://) rather than a sqlite file.
bool is_postgres_url(const std::string& path_or_url);
// A database's name for messages and reports: a URL without its password
// (postgresql://user:secret@h/db -> postgresql://user@h/db); a file name as it is.
std::string redact_url(const std::string& url);

// One JSON line for a record (no newline), and its inverse; parse throws
// std::invalid_argument saying which field is wrong.
std::string record_to_json_line(const Record& r);
// The timeout a kTimeout record's candidate was killed at ("killed after the
// timeout of T s", the measure worker's message); nullopt for other records.
std::optional<double> record_timeout_s(const Record& r);
// Whether a record is a timeout at a shorter limit than `timeout_s`: the
// config may finish within the longer one, so a run with a raised --timeout
// measures it again (the record does not count as a trial or a visit).
bool timed_out_below(const Record& r, double timeout_s);
// A claim owner unique to this process and call: "pid@host/random hex".
std::string make_claim_owner();
Record record_from_json_line(const std::string& line);

}  // namespace kiln::tuner
