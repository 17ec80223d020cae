// The sqlite backend of RecordDB (record_backend.h): one file, WAL journal,
// write transactions that take the lock up front (BEGIN IMMEDIATE) and a busy
// handler that polls so that concurrent writers take turns.
#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <ctime>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "tuner/record_backend.h"

namespace kiln::tuner {

namespace {

using json = nlohmann::json;
struct Impl {
  std::string path;
  sqlite3* db = nullptr;
  std::mutex mu;                                     // one transaction at a time on this connection
  std::chrono::steady_clock::time_point busy_since;  // see wait_for_lock
  int64_t busy_timeout_ms = 10000;

  ~Impl() {
    if (db) sqlite3_close_v2(db);
  }

  std::string where() const { return "records database '" + path + "'"; }
  static bool busy(int rc) { return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED; }
  [[noreturn]] void fail(const std::string& what) const {
    std::string msg = where() + ": " + what + ": " + sqlite3_errmsg(db);
    if (busy(sqlite3_extended_errcode(db))) throw RecordDBBusy(msg);
    throw std::runtime_error(msg);
  }
  void exec(const char* sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db, sql, nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
      std::string msg = err ? err : sqlite3_errmsg(db);
      sqlite3_free(err);
      msg = where() + ": " + msg + " (in: " + sql + ")";
      if (busy(rc)) throw RecordDBBusy(msg);
      throw std::runtime_error(msg);
    }
  }
};

// A prepared statement; bind() takes 1-based positions like sqlite.
class Stmt {
 public:
  Stmt(const Impl& impl, const char* sql) : impl_(impl) {
    if (sqlite3_prepare_v2(impl.db, sql, -1, &s_, nullptr) != SQLITE_OK)
      impl.fail(std::string("cannot prepare \"") + sql + "\"");
  }
  ~Stmt() { sqlite3_finalize(s_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& bind(int i, const std::string& v) {
    check(sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
    return *this;
  }
  Stmt& bind(int i, int64_t v) {
    check(sqlite3_bind_int64(s_, i, v));
    return *this;
  }
  Stmt& bind(int i, double v) {
    check(sqlite3_bind_double(s_, i, v));
    return *this;
  }
  Stmt& bind_null(int i) {
    check(sqlite3_bind_null(s_, i));
    return *this;
  }
  // True while there is a row; false when done.
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    impl_.fail(std::string("query failed (") + sqlite3_sql(s_) + ")");
  }
  std::string text(int col) const {
    const unsigned char* p = sqlite3_column_text(s_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(s_, col)))
             : std::string();
  }
  int64_t int64(int col) const { return sqlite3_column_int64(s_, col); }
  int type(int col) const { return sqlite3_column_type(s_, col); }
  double real(int col) const { return sqlite3_column_double(s_, col); }

 private:
  void check(int rc) {
    if (rc != SQLITE_OK) impl_.fail("cannot bind a parameter");
  }
  const Impl& impl_;
  sqlite3_stmt* s_ = nullptr;
};

// A write transaction that takes the write lock at once (BEGIN IMMEDIATE), so
// that concurrent writers wait in sqlite's busy handler instead of failing with
// SQLITE_BUSY when a read transaction would have to upgrade. Rolls back unless
// committed.
class WriteTxn {
 public:
  explicit WriteTxn(Impl& impl) : impl_(impl) { impl_.exec("BEGIN IMMEDIATE"); }
  ~WriteTxn() {
    if (!done_) sqlite3_exec(impl_.db, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  void commit() {
    impl_.exec("COMMIT");
    done_ = true;
  }

 private:
  Impl& impl_;
  bool done_ = false;
};

constexpr const char* kColumns =
    "workload_key, target_key, config_json, times_ms, error, error_message, timestamp_unix, "
    "kiln_version, gflops";

Record read_record(const Stmt& s, const Impl& impl) {
  Record r;
  r.workload_key = s.text(0);
  r.target_key = s.text(1);
  r.config_json = s.text(2);
  try {
    json times = json::parse(s.text(3));
    r.times_ms = times.get<std::vector<double>>();
    r.error = parse_error_class(s.text(4));
  } catch (const std::exception& e) {
    throw std::runtime_error(impl.where() + ": corrupt record of workload \"" + r.workload_key +
                             "\": " + e.what());
  }
  r.error_message = s.text(5);
  r.timestamp_unix = s.int64(6);
  r.kiln_version = s.text(7);
  r.gflops = s.real(8);
  return r;
}

bool has_table(Impl& impl, const char* name) {
  Stmt s(impl, "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?");
  s.bind(1, std::string(name));
  return s.step();
}

// Stores a validated record; with skip_duplicates, not if an identical one is stored.
bool insert(Impl& impl, const Record& r, bool skip_duplicates) {
  std::string times = json(r.times_ms).dump();
  std::string error = to_string(r.error);
  if (skip_duplicates) {
    Stmt s(impl,
           "SELECT 1 FROM records WHERE workload_key = ?1 AND target_key = ?2 AND "
           "config_json = ?3 AND times_ms = ?4 AND error = ?5 AND error_message = ?6 AND "
           "timestamp_unix = ?7 AND kiln_version = ?8 AND gflops = ?9 LIMIT 1");
    s.bind(1, r.workload_key).bind(2, r.target_key).bind(3, r.config_json).bind(4, times);
    s.bind(5, error).bind(6, r.error_message).bind(7, r.timestamp_unix).bind(8, r.kiln_version);
    s.bind(9, r.gflops);
    if (s.step()) return false;
  }
  Stmt s(impl,
         "INSERT INTO records (workload_key, target_key, config_json, times_ms, mean_ms, error, "
         "error_message, timestamp_unix, kiln_version, gflops) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
  s.bind(1, r.workload_key).bind(2, r.target_key).bind(3, r.config_json).bind(4, times);
  if (r.error == ErrorClass::kOk)
    s.bind(5, r.mean_ms());
  else
    s.bind_null(5);
  s.bind(6, error).bind(7, r.error_message).bind(8, r.timestamp_unix).bind(9, r.kiln_version);
  s.bind(10, r.gflops);
  s.step();
  return true;
}

// ---- schema and migrations ----------------------------------------------------------------------
//
// Version 0 is the layout before versioning: a records table (workload_key,
// target_key, config_json, times_ms, error, timestamp_unix) and no
// schema_version table. Version 1 adds the mean time best() ranks by, the error
// message, the generating kiln version and GFLOP/s, plus indexes for the
// tuner's lookups. A new version appends a step to kMigrations and bumps
// RecordDB::kSchemaVersion; open() runs the missing steps in one transaction.

constexpr const char* kCreateV1 = R"sql(
CREATE TABLE records (
  id             INTEGER PRIMARY KEY,  -- insertion order, stable across VACUUM
  workload_key   TEXT NOT NULL,
  target_key     TEXT NOT NULL,
  config_json    TEXT NOT NULL,     -- canonical JSON object
  times_ms       TEXT NOT NULL,     -- JSON array of every measured time
  mean_ms        REAL,              -- mean of times_ms for ok records, else NULL
  error          TEXT NOT NULL,     -- ErrorClass name
  error_message  TEXT NOT NULL DEFAULT '',
  timestamp_unix INTEGER NOT NULL,
  kiln_version   TEXT NOT NULL,
  gflops         REAL NOT NULL DEFAULT 0
);
CREATE INDEX records_by_speed ON records (workload_key, target_key, mean_ms);
CREATE INDEX records_by_config ON records (workload_key, target_key, config_json);
)sql";

void migrate_0_to_1(Impl& impl) {
  impl.exec("ALTER TABLE records RENAME TO records_v0");
  impl.exec(kCreateV1);
  // Through the same validation and canonical form as new records: a v0 row
  // that does not pass fails the whole migration, which then changes nothing.
  Stmt rows(impl,
            "SELECT workload_key, target_key, config_json, times_ms, error, timestamp_unix, "
            "rowid FROM records_v0 ORDER BY rowid");
  while (rows.step()) {
    Record r;
    r.workload_key = rows.text(0);
    r.target_key = rows.text(1);
    r.config_json = rows.text(2);
    r.timestamp_unix = rows.int64(5);
    r.kiln_version = "unknown";
    try {
      r.times_ms = json::parse(rows.text(3)).get<std::vector<double>>();
      r.error = parse_error_class(rows.text(4));
      insert(impl, validated_record(r), false);
    } catch (const std::exception& e) {
      throw std::runtime_error(impl.where() + ": cannot migrate record " +
                               std::to_string(rows.int64(6)) +
                               " from schema version 0: " + e.what());
    }
  }
  impl.exec("DROP TABLE records_v0");
}

// Version 2: claims of configs being measured (see records.h).
constexpr const char* kCreateClaims = R"sql(
CREATE TABLE claims (
  workload_key   TEXT NOT NULL,
  target_key     TEXT NOT NULL,
  config_json    TEXT NOT NULL,     -- canonical JSON object
  owner          TEXT NOT NULL,     -- pid@host/random token
  created_unix   INTEGER NOT NULL,
  expires_unix   INTEGER NOT NULL,  -- ignored (may be taken over) from then on
  PRIMARY KEY (workload_key, target_key, config_json)
);
CREATE INDEX claims_by_owner ON claims (owner);
)sql";

void migrate_1_to_2(Impl& impl) { impl.exec(kCreateClaims); }

struct Migration {
  int from;
  void (*apply)(Impl&);
};
constexpr Migration kMigrations[] = {{0, migrate_0_to_1}, {1, migrate_1_to_2}};

// -1: no kiln tables at all (a new file); 0: the unversioned layout.
int schema_version(Impl& impl) {
  if (has_table(impl, "schema_version")) {
    Stmt s(impl, "SELECT version FROM schema_version");
    if (!s.step()) throw std::runtime_error(impl.where() + ": schema_version table is empty");
    // kiln writes versions from 1 on, as integers; anything else (0, -1,
    // text) is damage or another program's table, not an old layout to migrate.
    if (s.type(0) != SQLITE_INTEGER || s.int64(0) < 1)
      throw std::runtime_error(impl.where() + ": schema_version holds '" + s.text(0) +
                               "', which no kiln writes: a damaged or foreign database (the file "
                               "was left unchanged)");
    return static_cast<int>(s.int64(0));
  }
  if (has_table(impl, "records")) {
    for (const char* col :
         {"workload_key", "target_key", "config_json", "times_ms", "error", "timestamp_unix"}) {
      Stmt s(impl, "SELECT 1 FROM pragma_table_info('records') WHERE name = ?");
      s.bind(1, std::string(col));
      if (!s.step())
        throw std::runtime_error(impl.where() + ": not a kiln records database (table records " +
                                 "has no column " + col + ")");
    }
    return 0;
  }
  Stmt s(impl, "SELECT count(*) FROM sqlite_master");
  s.step();
  if (s.int64(0) != 0)
    throw std::runtime_error(impl.where() +
                             ": not a kiln records database (it has tables, but no records table)");
  return -1;
}

// schema_version in one read transaction, so that its statements see one
// snapshot of the file. Read one by one, a new file that another process is
// creating the schema in at that moment can show no records table and then
// tables: 6 tuners opening one new database at once refused it as "not a kiln
// records database" about once in 300 runs.
int schema_version_snapshot(Impl& impl) {
  impl.exec("BEGIN");
  try {
    int version = schema_version(impl);
    impl.exec("COMMIT");
    return version;
  } catch (...) {
    sqlite3_exec(impl.db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void set_version(Impl& impl, int version) {
  if (!has_table(impl, "schema_version"))
    impl.exec("CREATE TABLE schema_version (version INTEGER NOT NULL)");
  impl.exec("DELETE FROM schema_version");
  Stmt s(impl, "INSERT INTO schema_version (version) VALUES (?)");
  s.bind(1, static_cast<int64_t>(version));
  s.step();
}

void check_not_newer(const Impl& impl, int version) {
  if (version > RecordDB::kSchemaVersion)
    throw std::runtime_error(impl.where() + " has schema version " + std::to_string(version) +
                             ", newer than this kiln knows (" +
                             std::to_string(RecordDB::kSchemaVersion) +
                             "); use a newer kiln (the file was left unchanged)");
}

void create_or_migrate(Impl& impl) {
  // The common case reads only: a current file needs no write lock.
  int version = schema_version_snapshot(impl);
  check_not_newer(impl, version);
  if (version == RecordDB::kSchemaVersion) return;
  WriteTxn txn(impl);
  version = schema_version(impl);  // another process may have got here first
  check_not_newer(impl, version);
  if (version == RecordDB::kSchemaVersion) return;
  if (version < 0) {
    impl.exec(kCreateV1);
    version = 1;
  }
  for (const Migration& m : kMigrations)
    if (m.from >= version) m.apply(impl);
  set_version(impl, RecordDB::kSchemaVersion);
  txn.commit();
}

// The busy timeout: wait up to 10 s (busy_timeout_ms) for another process's write transaction.
// sqlite's own busy_timeout backs off to 100 ms sleeps, so a process that
// commits often starves one that waits; short polls take turns fairly.
int wait_for_lock(void* arg, int tries) {
  auto* impl = static_cast<Impl*>(arg);
  auto now = std::chrono::steady_clock::now();
  if (tries == 0) impl->busy_since = now;
  if (now - impl->busy_since > std::chrono::milliseconds(impl->busy_timeout_ms))
    return 0;  // give up: SQLITE_BUSY
  std::this_thread::sleep_for(std::chrono::microseconds(tries < 100 ? 500 : 2000));
  return 1;
}

// journal_mode=WAL needs a moment of exclusive access; two processes creating
// the same file at once can see SQLITE_BUSY here even with a busy timeout.
void enable_wal(Impl& impl) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    sqlite3_stmt* s = nullptr;
    int rc = sqlite3_prepare_v2(impl.db, "PRAGMA journal_mode=WAL", -1, &s, nullptr);
    std::string mode;
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(s);
      if (rc == SQLITE_ROW) {
        mode = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
        rc = SQLITE_OK;
      }
    }
    sqlite3_finalize(s);
    if (rc == SQLITE_OK) {
      if (mode != "wal")
        throw std::runtime_error(impl.where() + ": cannot use a write-ahead log (journal mode '" +
                                 mode + "')");
      return;
    }
    if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) impl.fail("cannot open");
    if (std::chrono::steady_clock::now() > deadline) impl.fail("busy for 10 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

int64_t now_unix() { return static_cast<int64_t>(std::time(nullptr)); }

// Records + live claims of a workload on a target, less the timeouts that a
// run with a timeout of retry_below_s retries (they are not trials of it).
int64_t count_taken(Impl& impl, const std::string& w, const std::string& t, int64_t now,
                    double retry_below_s) {
  Stmt s(impl,
         "SELECT (SELECT count(*) FROM records WHERE workload_key = ?1 AND target_key = ?2) + "
         "(SELECT count(*) FROM claims WHERE workload_key = ?1 AND target_key = ?2 AND "
         "expires_unix > ?3)");
  s.bind(1, w).bind(2, t).bind(3, now);
  s.step();
  int64_t taken = s.int64(0);
  if (retry_below_s > 0) {
    Stmt timeouts(impl,
                  "SELECT error, error_message FROM records WHERE workload_key = ? AND "
                  "target_key = ? AND error = ?");
    timeouts.bind(1, w).bind(2, t).bind(3, to_string(ErrorClass::kTimeout));
    while (timeouts.step())
      if (timed_out_below(timeouts.text(0), timeouts.text(1), retry_below_s)) --taken;
  }
  return taken;
}

// Deletes the live claims of owners that died on this host: an owner is
// "pid@host/token" (make_claim_owner), and a pid of this host that no longer
// exists (kill(pid, 0) fails with ESRCH) will never store or renew what it
// claimed. Without this, a tuner killed with -9 would hold its batch, and its
// share of the trial cap, until the claims expire (kClaimTtlS). Claims of other
// hosts wait for their expiry. A reused pid only keeps a claim until then.
void reap_dead_local_claims(Impl& impl, int64_t now) {
  std::vector<std::string> dead;
  Stmt owners(impl, "SELECT DISTINCT owner FROM claims WHERE expires_unix > ?");
  owners.bind(1, now);
  while (owners.step())
    if (owner_is_dead_local_process(owners.text(0))) dead.push_back(owners.text(0));
  for (const std::string& owner : dead) {
    Stmt del(impl, "DELETE FROM claims WHERE owner = ?");
    del.bind(1, owner);
    del.step();
  }
}

// Whether a stored record holds the config: any record but a timeout that a
// run with a timeout of retry_below_s retries.
bool recorded(Impl& impl, const std::string& w, const std::string& t, const std::string& config,
              double retry_below_s) {
  Stmt rec(impl,
           "SELECT error, error_message FROM records WHERE workload_key = ? AND target_key = ? "
           "AND config_json = ?");
  rec.bind(1, w).bind(2, t).bind(3, config);
  while (rec.step())
    if (!timed_out_below(rec.text(0), rec.text(1), retry_below_s)) return true;
  return false;
}

// ---- the backend --------------------------------------------------------------------------------

class SqliteBackend final : public RecordBackend {
 public:
  explicit SqliteBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

  const std::string& where_name() const override { return impl_->path; }
  void set_busy_timeout_ms(int64_t ms) override { impl_->busy_timeout_ms = ms; }

  void add_batch(const std::vector<Record>& rs) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    WriteTxn txn(*impl_);
    for (const Record& r : rs) {
      insert(*impl_, r, true);
      Stmt d(*impl_,
             "DELETE FROM claims WHERE workload_key = ? AND target_key = ? AND config_json = ?");
      d.bind(1, r.workload_key).bind(2, r.target_key).bind(3, r.config_json);
      d.step();
    }
    txn.commit();
  }

  size_t import_records(const std::vector<Record>& rs) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    WriteTxn txn(*impl_);
    size_t added = 0;
    for (const Record& r : rs) added += insert(*impl_, r, true) ? 1 : 0;
    txn.commit();
    return added;
  }

  ClaimResult claim(const std::string& workload_key, const std::string& target_key,
                    const std::vector<std::string>& canonical, const std::string& owner,
                    int64_t max_trials, int64_t ttl_s, double retry_timeouts_below_s) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    WriteTxn txn(*impl_);
    const int64_t now = now_unix();
    reap_dead_local_claims(*impl_, now);
    ClaimResult out;
    out.granted.assign(canonical.size(), false);
    out.taken = count_taken(*impl_, workload_key, target_key, now, retry_timeouts_below_s);
    int64_t left = max_trials > 0 ? max_trials - out.taken : INT64_MAX;
    if (left <= 0) out.capped = true;
    for (size_t i = 0; i < canonical.size() && left > 0; ++i) {
      if (recorded(*impl_, workload_key, target_key, canonical[i], retry_timeouts_below_s))
        continue;
      Stmt held(*impl_,
                "SELECT owner, expires_unix FROM claims WHERE workload_key = ? AND target_key = ? "
                "AND config_json = ?");
      held.bind(1, workload_key).bind(2, target_key).bind(3, canonical[i]);
      if (held.step()) {
        // A live claim, ours (a repeat in this batch) or another's, holds it.
        if (held.int64(1) > now) continue;
      }
      Stmt ins(*impl_,
               "INSERT OR REPLACE INTO claims (workload_key, target_key, config_json, owner, "
               "created_unix, expires_unix) VALUES (?, ?, ?, ?, ?, ?)");
      ins.bind(1, workload_key).bind(2, target_key).bind(3, canonical[i]).bind(4, owner);
      ins.bind(5, now).bind(6, now + ttl_s);
      ins.step();
      out.granted[i] = true;
      --left;
    }
    txn.commit();
    return out;
  }

  void renew_claims(const std::string& owner, int64_t ttl_s) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    WriteTxn txn(*impl_);
    Stmt s(*impl_, "UPDATE claims SET expires_unix = ? WHERE owner = ?");
    s.bind(1, now_unix() + ttl_s).bind(2, owner);
    s.step();
    txn.commit();
  }

  void release_claims(const std::string& owner) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    WriteTxn txn(*impl_);
    Stmt s(*impl_, "DELETE FROM claims WHERE owner = ?");
    s.bind(1, owner);
    s.step();
    txn.commit();
  }

  int64_t live_claims(const std::string& workload_key, const std::string& target_key) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_,
           "SELECT count(*) FROM claims WHERE workload_key = ? AND target_key = ? AND "
           "expires_unix > ?");
    s.bind(1, workload_key).bind(2, target_key).bind(3, now_unix());
    s.step();
    return s.int64(0);
  }

  std::vector<ClaimHolder> live_claim_holders() override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_,
           "SELECT DISTINCT owner, target_key FROM claims WHERE expires_unix > ? ORDER BY owner, "
           "target_key");
    s.bind(1, now_unix());
    std::vector<ClaimHolder> out;
    while (s.step()) out.push_back({s.text(0), s.text(1)});
    return out;
  }

  std::optional<Record> best(const std::string& workload_key,
                             const std::string& target_key) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_, (std::string("SELECT ") + kColumns +
                    " FROM records WHERE workload_key = ? AND target_key = ? AND error = 'ok' "
                    "ORDER BY mean_ms, id LIMIT 1")
                       .c_str());
    s.bind(1, workload_key).bind(2, target_key);
    if (!s.step()) return std::nullopt;
    return read_record(s, *impl_);
  }

  std::vector<Record> records(const std::string& workload_key,
                              const std::string& target_key) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_, (std::string("SELECT ") + kColumns +
                    " FROM records WHERE workload_key = ? AND target_key = ? "
                    "ORDER BY timestamp_unix, id")
                       .c_str());
    s.bind(1, workload_key).bind(2, target_key);
    std::vector<Record> out;
    while (s.step()) out.push_back(read_record(s, *impl_));
    return out;
  }

  bool has_config(const std::string& workload_key, const std::string& target_key,
                  const std::string& canonical) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_,
           "SELECT 1 FROM records WHERE workload_key = ? AND target_key = ? AND config_json = ? "
           "LIMIT 1");
    s.bind(1, workload_key).bind(2, target_key).bind(3, canonical);
    return s.step();
  }

  std::vector<std::string> workloads(const std::string& target_key) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_,
           "SELECT DISTINCT workload_key FROM records WHERE target_key = ? ORDER BY workload_key");
    s.bind(1, target_key);
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
  }

  std::vector<std::string> targets() override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_, "SELECT DISTINCT target_key FROM records ORDER BY target_key");
    std::vector<std::string> out;
    while (s.step()) out.push_back(s.text(0));
    return out;
  }

  size_t count() override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    Stmt s(*impl_, "SELECT count(*) FROM records");
    s.step();
    return static_cast<size_t>(s.int64(0));
  }

  std::vector<Record> all_records(const std::string& workload_key) override {
    std::lock_guard<std::mutex> lock(impl_->mu);
    // One statement reads one consistent snapshot, even while others write.
    std::string sql = std::string("SELECT ") + kColumns + " FROM records" +
                      (workload_key.empty() ? "" : " WHERE workload_key = ?") +
                      " ORDER BY workload_key, target_key, timestamp_unix, id";
    Stmt s(*impl_, sql.c_str());
    if (!workload_key.empty()) s.bind(1, workload_key);
    std::vector<Record> out;
    while (s.step()) out.push_back(read_record(s, *impl_));
    return out;
  }

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace

std::unique_ptr<RecordBackend> open_sqlite_backend(const std::string& path, RecordDB::Mode mode) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  if (path.empty()) throw std::runtime_error("records database: empty path");
  std::error_code ec;
  if (mode == RecordDB::Mode::kMustExist && !std::filesystem::exists(path, ec))
    throw std::runtime_error(impl->where() + " does not exist");
  // A database is a regular file (a symlink is followed to one). sqlite would open a device or
  // FIFO as an empty database and write "<path>-journal" beside it (/dev/null-journal in /dev),
  // then fail with "disk I/O error"; a directory gave "unable to open database file".
  if (auto st = std::filesystem::status(path, ec);
      !ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st)) {
    using std::filesystem::file_type;
    const char* what = st.type() == file_type::directory ? "a directory"
                       : st.type() == file_type::character ? "a character device"
                       : st.type() == file_type::block ? "a block device"
                       : st.type() == file_type::fifo ? "a FIFO"
                       : st.type() == file_type::socket ? "a socket"
                                                        : "not a regular file";
    throw std::runtime_error(impl->where() + " is " + what +
                             ", not a records database (a sqlite file)");
  }
  // A zero-length file is no database (a truncated copy, `touch`, an editor):
  // refused, not initialised. A fresh one may be another kiln tune's that
  // sqlite has created but not yet written, so only kMustExist and files
  // older than a few seconds are refused.
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0 &&
      !ec) {
    auto age =
        std::filesystem::file_time_type::clock::now() - std::filesystem::last_write_time(path, ec);
    if (mode == RecordDB::Mode::kMustExist || (!ec && age > std::chrono::seconds(5)))
      throw std::runtime_error(impl->where() +
                               " is an empty file, not a records database (remove it to start a "
                               "new one)");
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX |
              (mode == RecordDB::Mode::kCreate ? SQLITE_OPEN_CREATE : 0);
  if (sqlite3_open_v2(path.c_str(), &impl->db, flags, nullptr) != SQLITE_OK) {
    std::string msg = impl->db ? sqlite3_errmsg(impl->db) : "out of memory";
    throw std::runtime_error(impl->where() + ": cannot open: " + msg);
  }
  sqlite3_extended_result_codes(impl->db, 1);
  sqlite3_busy_handler(impl->db, wait_for_lock, impl.get());
  // A foreign or damaged file is refused before anything is written to it:
  // switching it to WAL would already change it.
  check_not_newer(*impl, schema_version_snapshot(*impl));
  enable_wal(*impl);
  // FULL: a committed record survives power loss too, not only a killed
  // process; one fsync per measured candidate costs nothing next to measuring.
  impl->exec("PRAGMA synchronous=FULL");
  create_or_migrate(*impl);
  return std::make_unique<SqliteBackend>(std::move(impl));
}

}  // namespace kiln::tuner
