// The storage behind RecordDB: one abstract backend, two implementations.
//
// RecordDB (records.h) is the one class the tuner, the build, the CLI and the
// Python bindings use. It validates records, canonicalises configs and parses
// JSON lines once, here in records.cc, and hands the storage work to a
// RecordBackend: SqliteBackend (records_sqlite.cc, one file, WAL) or
// PostgresBackend (records_postgres.cc, a shared server, libpq). Both keep the
// same semantics, spelled out in records.h; tests/postgres runs one set of
// tests against both.
//
// Internal to the tuner: nothing outside src/tuner includes this header but
// its tests (tests/postgres).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tuner/records.h"

namespace kiln::tuner {

class RecordBackend {
 public:
  virtual ~RecordBackend() = default;

  // The database as the user named it, for messages (a URL without its password).
  virtual const std::string& where_name() const = 0;
  virtual void set_busy_timeout_ms(int64_t ms) = 0;

  // Records passed in are validated and canonical (RecordDB did that).
  // add_batch: all or none, deleting the claims of the stored configs; a
  // record identical to a stored one is not stored again.
  virtual void add_batch(const std::vector<Record>& rs) = 0;
  // All or none; returns how many were new (identical ones are skipped).
  virtual size_t import_records(const std::vector<Record>& rs) = 0;

  // `configs` are canonical; see RecordDB::claim for the rules.
  virtual ClaimResult claim(const std::string& workload_key, const std::string& target_key,
                            const std::vector<std::string>& configs, const std::string& owner,
                            int64_t max_trials, int64_t ttl_s, double retry_timeouts_below_s) = 0;
  virtual void renew_claims(const std::string& owner, int64_t ttl_s) = 0;
  virtual void release_claims(const std::string& owner) = 0;
  virtual int64_t live_claims(const std::string& workload_key, const std::string& target_key) = 0;
  virtual std::vector<ClaimHolder> live_claim_holders() = 0;

  virtual std::optional<Record> best(const std::string& workload_key,
                                     const std::string& target_key) = 0;
  virtual std::vector<Record> records(const std::string& workload_key,
                                      const std::string& target_key) = 0;
  // `config_json` is canonical.
  virtual bool has_config(const std::string& workload_key, const std::string& target_key,
                          const std::string& config_json) = 0;
  virtual std::vector<std::string> workloads(const std::string& target_key) = 0;
  virtual std::vector<std::string> targets() = 0;
  virtual size_t count() = 0;
  // Every record (only workload_key's if non-empty), sorted by workload,
  // target, timestamp, then insertion order, read in one snapshot.
  virtual std::vector<Record> all_records(const std::string& workload_key) = 0;
};

// sqlite: `path` is a file name.
std::unique_ptr<RecordBackend> open_sqlite_backend(const std::string& path, RecordDB::Mode mode);
// PostgreSQL: `url` is a libpq connection URI (postgresql://user@host:port/db).
std::unique_ptr<RecordBackend> open_postgres_backend(const std::string& url, RecordDB::Mode mode);

// ---- helpers both backends share (records.cc)
// ----------------------------------------------------

// The config in canonical form (sorted keys, compact); throws
// std::invalid_argument if it is not a JSON object.
std::string canonical_config(const std::string& config_json);
// The record checked, with its config canonical; throws std::invalid_argument.
Record validated_record(const Record& r);
// Whether a record with this error class name and message is a timeout at a
// limit shorter than timeout_s (retried by a run with that timeout).
bool timed_out_below(const std::string& error, const std::string& message, double timeout_s);
// This host's name (gethostname), as claim owners spell it.
const std::string& this_host();
// Whether a claim owner ("pid@host/token") is a process of this host that no
// longer exists: its claims will never be stored or renewed.
bool owner_is_dead_local_process(const std::string& owner);

}  // namespace kiln::tuner
