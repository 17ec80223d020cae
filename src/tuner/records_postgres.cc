// The PostgreSQL backend of RecordDB (record_backend.h), through libpq's C API.
//
// Many `kiln tune` processes, on one host or many, share one database. The
// semantics are sqlite's (records.h); the mechanisms are the server's:
//  - Every write is one transaction (READ COMMITTED). A process killed with
//    -9 loses only its open transaction: the server rolls it back when the
//    connection drops.
//  - Identical records are stored once: records.identity is the md5 of the
//    record's JSON line under a unique index, and inserts say ON CONFLICT DO
//    NOTHING, so racing importers and syncs never store a duplicate.
//  - Claims (leases) are rows of `claims` with an owner and an expiry compared
//    with the server's clock (now()), so hosts with skewed clocks agree. A
//    claim transaction takes, per config, a transaction-scoped advisory lock
//    with pg_try_advisory_xact_lock: a config that another transaction is
//    claiming or storing at this moment is skipped, not waited for (the
//    effect of SELECT ... FOR UPDATE SKIP LOCKED, for rows that may not exist
//    yet). Claimers therefore never block on each other's configs and never
//    get the same config: the claim row's primary key and the recheck of the
//    records after inserting it make that so even without the lock.
//  - The trial cap (max_trials > 0) counts records and live claims of the
//    task, which must not change between the count and the grants: claimers
//    of one task take a per-task advisory lock for that moment
//    (ClaimResult::lock_waits counts the claims that had to wait for it), so
//    claims of different tasks never wait for each other.
//  - A write that waits for a lock longer than the busy timeout (lock_timeout
//    on the server), a deadlock or a serialization
//    failure throws RecordDBBusy: nothing changed, the caller may retry.
//  - Claims of dead processes of this host are reaped at every claim, as in
//    sqlite; claims of dead processes elsewhere expire after their TTL.
//  - A dropped connection is re-established once per call (PQreset).
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <tuple>

#include "tuner/record_backend.h"

namespace kiln::tuner {

namespace {

using json = nlohmann::json;
using Param = std::optional<std::string>;  // nullopt: SQL NULL

// SQLSTATEs after which retrying may succeed: lock_not_available (lock_timeout),
// query_canceled (statement_timeout), serialization_failure, deadlock_detected.
bool retryable(const char* sqlstate) {
  if (!sqlstate) return false;
  for (const char* s : {"55P03", "57014", "40001", "40P01"})
    if (std::string(sqlstate) == s) return true;
  return false;
}

// libpq's messages span lines ("...failed: Connection refused\n\tIs the
// server running..."): one line, as every kiln error is.
std::string one_line(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\n') {
      while (i + 1 < text.size() && (text[i + 1] == '\t' || text[i + 1] == ' ')) ++i;
      if (i + 1 < text.size()) out += "; ";
    } else {
      out += text[i];
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

// One query's result; frees it.
class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  ~Result() { PQclear(r_); }
  Result(Result&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  int rows() const { return PQntuples(r_); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col); }
  std::string text(int row, int col) const {
    return std::string(PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col)));
  }
  int64_t int64(int row, int col) const {
    return std::strtoll(PQgetvalue(r_, row, col), nullptr, 10);
  }
  double real(int row, int col) const { return std::strtod(PQgetvalue(r_, row, col), nullptr); }

 private:
  PGresult* r_;
};

class Conn {
 public:
  explicit Conn(const std::string& url) : name_(redact_url(url)) {
    // connect_timeout first: a value in the URL overrides it (later wins).
    const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
    const char* values[] = {"10", "kiln", url.c_str(), nullptr};
    c_ = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
    if (!c_) throw std::runtime_error(where() + ": cannot connect: out of memory");
    if (PQstatus(c_) != CONNECTION_OK)
      throw std::runtime_error(where() + ": cannot connect: " + server_error());
    setup();
  }
  ~Conn() {
    if (c_) PQfinish(c_);
  }

  const std::string& name() const { return name_; }
  std::string where() const { return "records database '" + name_ + "'"; }
  std::string server_error() const {
    std::string e = one_line(c_ ? PQerrorMessage(c_) : "");
    return e.empty() ? "unknown error" : e;
  }

  void set_busy_timeout_ms(int64_t ms) {
    busy_timeout_ms_ = ms;
    if (c_ && PQstatus(c_) == CONNECTION_OK) setup();
  }
  int64_t busy_timeout_ms() const { return busy_timeout_ms_; }

  // Re-establishes a dropped connection once (a restarted server, a network blip).
  void ensure_connected() {
    if (PQstatus(c_) == CONNECTION_OK) return;
    PQreset(c_);
    if (PQstatus(c_) != CONNECTION_OK)
      throw std::runtime_error(where() + ": connection lost: " + server_error());
    setup();
  }

  // Runs one statement with text parameters ($1, $2, ...); throws on error,
  // RecordDBBusy when the server says retrying may succeed.
  Result q(const std::string& sql, const std::vector<Param>& params = {}) {
    std::vector<const char*> values;
    for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
    // Without parameters, the simple protocol: it also runs several statements (the schema).
    PGresult* r = params.empty() ? PQexec(c_, sql.c_str())
                                 : PQexecParams(c_, sql.c_str(), static_cast<int>(values.size()),
                                                nullptr, values.data(), nullptr, nullptr, 0);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) return Result(r);
    std::string err = one_line(r ? PQresultErrorMessage(r) : "");
    if (err.empty()) err = server_error();
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    const bool busy = retryable(state);
    PQclear(r);
    const size_t from = sql.find_first_not_of('\n');
    std::string first_line = sql.substr(from == std::string::npos ? 0 : from);
    first_line = first_line.substr(0, first_line.find('\n'));
    std::string msg = where() + ": " + err + " (in: " + first_line + ")";
    if (busy) throw RecordDBBusy(msg);
    throw std::runtime_error(msg);
  }

 private:
  void setup() {
    // lock_timeout is the busy timeout: a statement waiting longer for a row
    // or table lock fails with 55P03 (RecordDBBusy); notices stay off stderr.
    q("SET lock_timeout = " + std::to_string(std::max<int64_t>(busy_timeout_ms_, 1)));
    q("SET client_min_messages = warning");
  }

  std::string name_;
  PGconn* c_ = nullptr;
  int64_t busy_timeout_ms_ = 10000;
};

// A transaction; rolls back unless committed.
class Txn {
 public:
  explicit Txn(Conn& c) : c_(c) { c_.q("BEGIN"); }
  ~Txn() {
    if (!done_) {
      try {
        c_.q("ROLLBACK");
      } catch (...) {
        // The connection may be gone; the server rolls back on its own then.
      }
    }
  }
  void commit() {
    done_ = true;
    c_.q("COMMIT");
  }

 private:
  Conn& c_;
  bool done_ = false;
};

std::string num(int64_t v) { return std::to_string(v); }

// A text[] literal: {"a","b"} with quotes and backslashes escaped.
std::string pg_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    out += i ? ",\"" : "\"";
    for (char ch : items[i]) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  }
  return out + "}";
}
std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// ---- schema and migrations ----------------------------------------------------------------------
//
// The PostgreSQL layout starts at the sqlite layout's current version (2), so
// that one number names what a database holds whichever backend it is. A new
// version appends a step to kMigrations (from, SQL) and bumps
// RecordDB::kSchemaVersion; open() runs the missing steps in one transaction
// under an advisory lock, so that tuners starting together migrate once.

constexpr const char* kCreateV2 = R"sql(
CREATE TABLE records (
  id             bigserial PRIMARY KEY,  -- insertion order
  workload_key   text NOT NULL,
  target_key     text NOT NULL,
  config_json    text NOT NULL,          -- canonical JSON object
  times_ms       text NOT NULL,          -- JSON array of every measured time
  mean_ms        double precision,       -- mean of times_ms for ok records, else NULL
  error          text NOT NULL,          -- ErrorClass name
  error_message  text NOT NULL DEFAULT '',
  timestamp_unix bigint NOT NULL,
  kiln_version   text NOT NULL,
  gflops         double precision NOT NULL DEFAULT 0,
  identity       text NOT NULL           -- md5 of the record's JSON line
);
CREATE UNIQUE INDEX records_identity ON records (identity);
CREATE INDEX records_by_speed ON records (workload_key, target_key, mean_ms);
CREATE INDEX records_by_config ON records (workload_key, target_key, md5(config_json));
CREATE TABLE claims (
  workload_key   text NOT NULL,
  target_key     text NOT NULL,
  config_json    text NOT NULL,          -- canonical JSON object
  config_md5     text NOT NULL,          -- md5(config_json): keys stay short
  owner          text NOT NULL,          -- pid@host/random token
  created        timestamptz NOT NULL,
  expires        timestamptz NOT NULL,   -- ignored (may be taken over) from then on, server clock
  PRIMARY KEY (workload_key, target_key, config_md5)
);
CREATE INDEX claims_by_owner ON claims (owner);
CREATE TABLE schema_version (version integer NOT NULL);
)sql";

struct Migration {
  int from;
  const char* sql;
};
// None yet: version 2 is the first PostgreSQL layout.
constexpr Migration kMigrations[] = {{-1, nullptr}};

// A fixed key for the advisory lock that serialises schema changes.
constexpr const char* kSchemaLock = "SELECT pg_advisory_xact_lock(7165438221)";

// -1: none of kiln's tables (a new database).
int schema_version(Conn& c) {
  // information_schema, not to_regclass: a plain query reads a fresh snapshot,
  // so after the schema lock it sees tables another process just committed
  // (to_regclass reads caches that an advisory lock does not refresh).
  Result t =
      c.q("SELECT coalesce(bool_or(table_name = 'schema_version'), false), "
          "coalesce(bool_or(table_name = 'records'), false) FROM information_schema.tables "
          "WHERE table_schema = current_schema() AND table_name IN ('schema_version', 'records')");
  const bool has_version = t.text(0, 0) == "t", has_records = t.text(0, 1) == "t";
  if (!has_version) {
    if (has_records)
      throw std::runtime_error(c.where() +
                               ": not a kiln records database (it has a records table but no "
                               "schema_version table; it was left unchanged)");
    return -1;
  }
  Result v = c.q("SELECT version FROM schema_version");
  if (v.rows() != 1 || v.null(0, 0) || v.int64(0, 0) < 1)
    throw std::runtime_error(c.where() +
                             ": schema_version holds no single version >= 1: a damaged or "
                             "foreign database (it was left unchanged)");
  return static_cast<int>(v.int64(0, 0));
}

void check_not_newer(Conn& c, int version) {
  if (version > RecordDB::kSchemaVersion)
    throw std::runtime_error(c.where() + " has schema version " + std::to_string(version) +
                             ", newer than this kiln knows (" +
                             std::to_string(RecordDB::kSchemaVersion) +
                             "); use a newer kiln (the database was left unchanged)");
}

void create_or_migrate(Conn& c, RecordDB::Mode mode) {
  int version = schema_version(c);
  check_not_newer(c, version);
  if (version == RecordDB::kSchemaVersion) return;
  if (version < 0 && mode == RecordDB::Mode::kMustExist)
    throw std::runtime_error(c.where() + " holds no kiln records (no schema_version table)");
  Txn txn(c);
  c.q(kSchemaLock);
  version = schema_version(c);  // another process may have got here first
  check_not_newer(c, version);
  if (version == RecordDB::kSchemaVersion) return;
  if (version < 0) {
    c.q(kCreateV2);
    version = 2;
  }
  for (const Migration& m : kMigrations)
    if (m.sql && m.from >= version) c.q(m.sql);
  c.q("DELETE FROM schema_version");
  c.q("INSERT INTO schema_version (version) VALUES ($1)", {num(int64_t{RecordDB::kSchemaVersion})});
  txn.commit();
}

constexpr const char* kColumns =
    "workload_key, target_key, config_json, times_ms, error, error_message, timestamp_unix, "
    "kiln_version, gflops";

Record read_record(const Conn& c, const Result& r, int row) {
  Record out;
  out.workload_key = r.text(row, 0);
  out.target_key = r.text(row, 1);
  out.config_json = r.text(row, 2);
  try {
    out.times_ms = json::parse(r.text(row, 3)).get<std::vector<double>>();
    out.error = parse_error_class(r.text(row, 4));
  } catch (const std::exception& e) {
    throw std::runtime_error(c.where() + ": corrupt record of workload \"" + out.workload_key +
                             "\": " + e.what());
  }
  out.error_message = r.text(row, 5);
  out.timestamp_unix = r.int64(row, 6);
  out.kiln_version = r.text(row, 7);
  out.gflops = r.real(row, 8);
  return out;
}

// Stores a validated record unless an identical one is stored; true if stored.
bool insert(Conn& c, const Record& r) {
  Param mean = r.error == ErrorClass::kOk ? Param(num(r.mean_ms())) : std::nullopt;
  Result res =
      c.q("INSERT INTO records (workload_key, target_key, config_json, times_ms, mean_ms, error, "
          "error_message, timestamp_unix, kiln_version, gflops, identity) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, md5($11)) "
          "ON CONFLICT (identity) DO NOTHING RETURNING 1",
          {r.workload_key, r.target_key, r.config_json, json(r.times_ms).dump(), mean,
           std::string(to_string(r.error)), r.error_message, num(r.timestamp_unix), r.kiln_version,
           num(r.gflops), record_to_json_line(r)});
  return res.rows() == 1;
}

// The advisory-lock key of a config of a task (64-bit hash, server side).
constexpr const char* kConfigKey = "hashtextextended($1 || chr(31) || $2 || chr(31) || $3, 0)";

class PostgresBackend final : public RecordBackend {
 public:
  explicit PostgresBackend(std::unique_ptr<Conn> c) : c_(std::move(c)) {}

  const std::string& where_name() const override { return c_->name(); }
  void set_busy_timeout_ms(int64_t ms) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->set_busy_timeout_ms(ms);
  }

  void add_batch(const std::vector<Record>& rs) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Txn txn(*c_);
    // Hold each config's lock while storing it, so that a concurrent claim
    // skips it instead of waiting for this transaction's claim deletions.
    // Sorted, so that two batches sharing configs cannot deadlock.
    std::vector<const Record*> order;
    for (const Record& r : rs) order.push_back(&r);
    std::sort(order.begin(), order.end(), [](const Record* a, const Record* b) {
      return std::tie(a->workload_key, a->target_key, a->config_json) <
             std::tie(b->workload_key, b->target_key, b->config_json);
    });
    for (const Record* r : order)
      c_->q(std::string("SELECT pg_advisory_xact_lock(") + kConfigKey + ")",
            {r->workload_key, r->target_key, r->config_json});
    for (const Record& r : rs) {
      insert(*c_, r);
      c_->q(
          "DELETE FROM claims WHERE workload_key = $1 AND target_key = $2 AND "
          "config_md5 = md5($3)",
          {r.workload_key, r.target_key, r.config_json});
    }
    txn.commit();
  }

  size_t import_records(const std::vector<Record>& rs) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Txn txn(*c_);
    size_t added = 0;
    for (const Record& r : rs) added += insert(*c_, r) ? 1 : 0;
    txn.commit();
    return added;
  }

  // A few round trips whatever the batch size: the task lock (with a cap),
  // one statement for every config's try-lock, one reading the records of the
  // batch (after the locks, so in a snapshot that sees every record committed
  // by a writer that held one), then inserts of the eligible configs in order
  // until the cap's share is granted.
  ClaimResult claim(const std::string& w, const std::string& t,
                    const std::vector<std::string>& canonical, const std::string& owner,
                    int64_t max_trials, int64_t ttl_s, double retry_below_s) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    ClaimResult out;
    out.granted.assign(canonical.size(), false);
    Txn txn(*c_);
    reap_dead_local_claims();
    if (max_trials > 0) lock_task(w, t, out);
    out.taken = count_taken(w, t, retry_below_s);
    int64_t left = max_trials > 0 ? max_trials - out.taken : INT64_MAX;
    if (left <= 0) out.capped = true;
    if (left <= 0 || canonical.empty()) {
      txn.commit();
      return out;
    }
    // First occurrences only: a repeat in the batch is refused.
    std::vector<size_t> firsts;
    std::map<std::string, size_t> index;
    for (size_t i = 0; i < canonical.size(); ++i)
      if (index.emplace(canonical[i], i).second) firsts.push_back(i);
    std::vector<std::string> configs;
    for (size_t i : firsts) configs.push_back(canonical[i]);
    const std::string array = pg_array(configs);

    // Another transaction claims or stores a config right now: skip it rather
    // than wait (it would be refused anyway once that commits).
    std::set<std::string> free;
    {
      Result locks = c_->q(
          "SELECT c, pg_try_advisory_xact_lock(hashtextextended($1 || chr(31) || $2 || chr(31) "
          "|| c, 0)) FROM unnest($3::text[]) WITH ORDINALITY AS u(c, n) ORDER BY n",
          {w, t, array});
      for (int i = 0; i < locks.rows(); ++i) {
        if (locks.text(i, 1) == "t")
          free.insert(locks.text(i, 0));
        else
          ++out.skipped_locked;
      }
    }
    {
      Result recs = c_->q(
          "SELECT config_json, error, error_message FROM records WHERE workload_key = $1 AND "
          "target_key = $2 AND md5(config_json) IN (SELECT md5(c) FROM unnest($3::text[]) AS "
          "u(c))",
          {w, t, array});
      for (int i = 0; i < recs.rows(); ++i)
        if (!timed_out_below(recs.text(i, 1), recs.text(i, 2), retry_below_s))
          free.erase(recs.text(i, 0));
    }
    std::vector<std::string> eligible;
    for (const std::string& c : configs)
      if (free.count(c)) eligible.push_back(c);
    // Insert `left` at a time, in order; a live claim of another refuses its config.
    size_t next = 0;
    while (left > 0 && next < eligible.size()) {
      const size_t n = std::min<size_t>(eligible.size() - next, static_cast<size_t>(left));
      std::vector<std::string> chunk(eligible.begin() + static_cast<std::ptrdiff_t>(next),
                                     eligible.begin() + static_cast<std::ptrdiff_t>(next + n));
      next += n;
      Result ins = c_->q(
          "INSERT INTO claims (workload_key, target_key, config_json, config_md5, owner, created, "
          "expires) SELECT $1, $2, c, md5(c), $4, now(), now() + $5 * interval '1 second' "
          "FROM unnest($3::text[]) AS u(c) "
          "ON CONFLICT (workload_key, target_key, config_md5) DO UPDATE SET "
          "config_json = EXCLUDED.config_json, owner = EXCLUDED.owner, "
          "created = EXCLUDED.created, expires = EXCLUDED.expires "
          "WHERE claims.expires <= now() RETURNING config_json",
          {w, t, pg_array(chunk), owner, num(ttl_s)});
      for (int i = 0; i < ins.rows(); ++i) {
        out.granted[index.at(ins.text(i, 0))] = true;
        --left;
      }
    }
    txn.commit();
    return out;
  }

  void renew_claims(const std::string& owner, int64_t ttl_s) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    c_->q("UPDATE claims SET expires = now() + $2 * interval '1 second' WHERE owner = $1",
          {owner, num(ttl_s)});
  }

  void release_claims(const std::string& owner) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    c_->q("DELETE FROM claims WHERE owner = $1", {owner});
  }

  int64_t live_claims(const std::string& w, const std::string& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    return c_
        ->q("SELECT count(*) FROM claims WHERE workload_key = $1 AND target_key = $2 AND "
            "expires > now()",
            {w, t})
        .int64(0, 0);
  }

  std::vector<ClaimHolder> live_claim_holders() override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Result r = c_->q(
        "SELECT DISTINCT owner, target_key FROM claims WHERE expires > now() ORDER BY owner, "
        "target_key",
        {});
    std::vector<ClaimHolder> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back({r.text(i, 0), r.text(i, 1)});
    return out;
  }

  std::optional<Record> best(const std::string& w, const std::string& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Result r = c_->q(std::string("SELECT ") + kColumns +
                         " FROM records WHERE workload_key = $1 AND target_key = $2 AND "
                         "error = 'ok' ORDER BY mean_ms, id LIMIT 1",
                     {w, t});
    if (r.rows() == 0) return std::nullopt;
    return read_record(*c_, r, 0);
  }

  std::vector<Record> records(const std::string& w, const std::string& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Result r = c_->q(std::string("SELECT ") + kColumns +
                         " FROM records WHERE workload_key = $1 AND target_key = $2 "
                         "ORDER BY timestamp_unix, id",
                     {w, t});
    std::vector<Record> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_record(*c_, r, i));
    return out;
  }

  bool has_config(const std::string& w, const std::string& t, const std::string& config) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    return c_->q("SELECT 1 FROM records WHERE workload_key = $1 AND target_key = $2 AND "
                 "md5(config_json) = md5($3) AND config_json = $3 LIMIT 1",
                 {w, t, config})
               .rows() == 1;
  }

  // Keys sort as bytes (COLLATE "C"), as in sqlite, whatever the database's locale.
  std::vector<std::string> workloads(const std::string& t) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Result r = c_->q(
        "SELECT DISTINCT workload_key COLLATE \"C\" AS k FROM records WHERE target_key = $1 "
        "ORDER BY k",
        {t});
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
    return out;
  }

  std::vector<std::string> targets() override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    Result r = c_->q("SELECT DISTINCT target_key COLLATE \"C\" AS k FROM records ORDER BY k");
    std::vector<std::string> out;
    for (int i = 0; i < r.rows(); ++i) out.push_back(r.text(i, 0));
    return out;
  }

  size_t count() override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    return static_cast<size_t>(c_->q("SELECT count(*) FROM records").int64(0, 0));
  }

  std::vector<Record> all_records(const std::string& w) override {
    std::lock_guard<std::mutex> lock(mu_);
    c_->ensure_connected();
    // One statement reads one snapshot, even while others write.
    std::string sql = std::string("SELECT ") + kColumns + " FROM records" +
                      (w.empty() ? "" : " WHERE workload_key = $1") +
                      " ORDER BY workload_key COLLATE \"C\", target_key COLLATE \"C\", "
                      "timestamp_unix, id";
    Result r = w.empty() ? c_->q(sql) : c_->q(sql, {w});
    std::vector<Record> out;
    out.reserve(static_cast<size_t>(r.rows()));
    for (int i = 0; i < r.rows(); ++i) out.push_back(read_record(*c_, r, i));
    return out;
  }

 private:
  // The task's lock, for the cap's count-then-grant. Tried first, so that a
  // claim that has to wait is counted (lock_waits); then waited for in the
  // server's lock queue, up to lock_timeout (the busy timeout: RecordDBBusy).
  void lock_task(const std::string& w, const std::string& t, ClaimResult& out) {
    const std::string key = "hashtextextended($1 || chr(30) || $2, 0)";
    if (c_->q("SELECT pg_try_advisory_xact_lock(" + key + ")", {w, t}).text(0, 0) == "t") return;
    ++out.lock_waits;
    c_->q("SELECT pg_advisory_xact_lock(" + key + ")", {w, t});
  }

  int64_t count_taken(const std::string& w, const std::string& t, double retry_below_s) {
    int64_t taken = c_->q("SELECT (SELECT count(*) FROM records WHERE workload_key = $1 AND "
                          "target_key = $2) + (SELECT count(*) FROM claims WHERE "
                          "workload_key = $1 AND target_key = $2 AND expires > now())",
                          {w, t})
                        .int64(0, 0);
    if (retry_below_s > 0) {
      Result r = c_->q(
          "SELECT error, error_message FROM records WHERE workload_key = $1 AND "
          "target_key = $2 AND error = 'timeout'",
          {w, t});
      for (int i = 0; i < r.rows(); ++i)
        if (timed_out_below(r.text(i, 0), r.text(i, 1), retry_below_s)) --taken;
    }
    return taken;
  }

  bool recorded(const std::string& w, const std::string& t, const std::string& config,
                double retry_below_s) {
    Result r = c_->q(
        "SELECT error, error_message FROM records WHERE workload_key = $1 AND target_key = $2 "
        "AND md5(config_json) = md5($3) AND config_json = $3",
        {w, t, config});
    for (int i = 0; i < r.rows(); ++i)
      if (!timed_out_below(r.text(i, 0), r.text(i, 1), retry_below_s)) return true;
    return false;
  }

  void reap_dead_local_claims() {
    Result owners = c_->q(
        "SELECT DISTINCT owner FROM claims WHERE expires > now() AND "
        "position($1 in owner) > 0",
        {"@" + this_host() + "/"});
    for (int i = 0; i < owners.rows(); ++i) {
      const std::string owner = owners.text(i, 0);
      if (owner_is_dead_local_process(owner)) c_->q("DELETE FROM claims WHERE owner = $1", {owner});
    }
  }

  std::mutex mu_;  // one call at a time on this connection
  std::unique_ptr<Conn> c_;
};

}  // namespace

std::unique_ptr<RecordBackend> open_postgres_backend(const std::string& url, RecordDB::Mode mode) {
  auto c = std::make_unique<Conn>(url);
  create_or_migrate(*c, mode);
  return std::make_unique<PostgresBackend>(std::move(c));
}

}  // namespace kiln::tuner
