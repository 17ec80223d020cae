// The tuning records database: schema and migration, lookups, JSON lines,
// concurrent writer processes and a writer killed with SIGKILL; target keys;
// the `kiln records` command.
#include "tuner/records.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "codegen/target.h"
#include "ops/op_template.h"
#include "records_writer.h"
#include "support/version.h"
#include "tuner/target_key.h"

namespace fs = std::filesystem;
using kiln::tuner::ClaimResult;
using kiln::tuner::ErrorClass;
using kiln::tuner::make_claim_owner;
using kiln::tuner::Record;
using kiln::tuner::RecordDB;
using kiln::tuner::RecordDBBusy;
using kiln::tuner::TargetKey;

extern char** environ;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

// Raw SQL on a database file, for fixtures and for checking what RecordDB wrote.
class RawDB {
 public:
  explicit RawDB(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK) << path;
  }
  ~RawDB() { sqlite3_close(db_); }
  void exec(const std::string& sql) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    ASSERT_EQ(rc, SQLITE_OK) << (err ? err : "") << " in " << sql;
  }
  // The first column of every row, as text.
  std::vector<std::string> column(const std::string& sql) {
    sqlite3_stmt* s = nullptr;
    std::vector<std::string> out;
    EXPECT_EQ(sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    while (s && sqlite3_step(s) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(s, 0);
      out.push_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    sqlite3_finalize(s);
    return out;
  }
  std::string one(const std::string& sql) {
    std::vector<std::string> c = column(sql);
    return c.empty() ? "<no rows>" : c[0];
  }

 private:
  sqlite3* db_ = nullptr;
};

const std::string kTarget =
    "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512; features=+avx2,+avx512f,+fma; "
    "threads=4; kiln=0.1.0; llvm=16.0.6";

Record make(const std::string& workload, const std::string& config, std::vector<double> times,
            ErrorClass error = ErrorClass::kOk, int64_t ts = 1700000000) {
  Record r;
  r.workload_key = workload;
  r.target_key = kTarget;
  r.config_json = config;
  r.times_ms = std::move(times);
  r.error = error;
  r.error_message = error == ErrorClass::kOk ? "" : "failed: " + std::string(to_string(error));
  r.timestamp_unix = ts;
  r.kiln_version = "0.1.0";
  r.gflops = r.times_ms.empty() ? 0 : 2.0 / r.mean_ms();
  return r;
}

class RecordsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::path(::testing::TempDir()) / "kiln_records_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_;
};

// Expects `f` to throw E with every string of `parts` in its message.
template <typename E, typename F>
void expect_throw_with(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception; expected one mentioning " << parts[0];
  } catch (const E& e) {
    for (const std::string& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "message \"" << e.what() << "\" lacks \"" << p << "\"";
  }
}

// ---- error classes and target keys ------------------------------------------------------------

TEST(ErrorClassTest, NamesRoundTrip) {
  for (ErrorClass e :
       {ErrorClass::kOk, ErrorClass::kCompileError, ErrorClass::kRuntimeError, ErrorClass::kTimeout,
        ErrorClass::kWrongResult, ErrorClass::kInvalidConfig, ErrorClass::kCompileBudget})
    EXPECT_EQ(kiln::tuner::parse_error_class(to_string(e)), e) << to_string(e);
  EXPECT_STREQ(to_string(ErrorClass::kCompileBudget), "compile_budget");
  EXPECT_STREQ(to_string(ErrorClass::kRuntimeError), "runtime_error");
  expect_throw_with<std::invalid_argument>([] { kiln::tuner::parse_error_class("crashed"); },
                                           {"crashed", "runtime_error"});
}

TEST(TargetKeyTest, InGraphKeyRoundTripsAndDiffersOnlyInHowItWasMeasured) {
  TargetKey k = TargetKey::for_target(kiln::codegen::Target::host(), 2);
  TargetKey g = k.in_graph();
  EXPECT_EQ(g.key(), k.key() + "; measured=in-graph");
  EXPECT_EQ(TargetKey::parse(g.key()), g);
  EXPECT_EQ(TargetKey::parse(k.key()), k);
  EXPECT_EQ(k.differences(g), "measured isolated vs in-graph");
  EXPECT_THROW(TargetKey::parse(k.key() + "; measured=somewhere"), std::invalid_argument);
  TargetKey c = k.isolated(true);
  EXPECT_EQ(c.key(), k.key() + "; measured=cold-weights");
  EXPECT_EQ(TargetKey::parse(c.key()), c);
  EXPECT_EQ(c.isolated(false), k);
  EXPECT_THROW(TargetKey::parse(k.key() + "; other=in-graph"), std::invalid_argument);
}

TEST(TargetKeyTest, FeaturesThatMatterFromCpuAndAttrs) {
  using kiln::codegen::Target;
  TargetKey skx = TargetKey::for_target(
      Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512"), 4);
  EXPECT_EQ(skx.target, "llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512");
  EXPECT_EQ(skx.features,
            "+avx,+avx2,+avx512bw,+avx512cd,+avx512dq,+avx512f,+avx512vl,+f16c,+fma,+sse4.2");
  EXPECT_EQ(skx.threads, 4);
  EXPECT_EQ(skx.kiln_version, std::string(kiln::kiln_version()));
  EXPECT_EQ(skx.llvm_version.substr(0, 3), "16.");

  TargetKey hsw =
      TargetKey::for_target(Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=haswell"), 4);
  EXPECT_EQ(hsw.features, "+avx,+avx2,+f16c,+fma,+sse4.2");

  // An explicit -mattr overrides the CPU's own features.
  TargetKey no512 = TargetKey::for_target(
      Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=skylake-avx512 -mattr=-avx512f"), 4);
  EXPECT_EQ(no512.features.find("avx512f"), std::string::npos) << no512.features;
  EXPECT_NE(no512.features.find("+avx512bw"), std::string::npos) << no512.features;
  EXPECT_NE(no512.key(), skx.key());

  // Features that do not change codegen do not split records.
  TargetKey a = TargetKey::for_target(
      Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx2,+fma"), 2);
  TargetKey b = TargetKey::for_target(
      Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+fma,+sgx,+rdrnd,+avx2"),
      2);
  EXPECT_EQ(a.key(), b.key());
  EXPECT_EQ(a.features, "+avx2,+fma");
  // ... but the CPU model, fast-math and the thread count do.
  TargetKey fm = TargetKey::for_target(
      Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx2,+fma -fast-math"), 2);
  EXPECT_NE(fm.key(), a.key());
  TargetKey a8 = TargetKey::for_target(
      Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64 -mattr=+avx2,+fma"), 8);
  EXPECT_NE(a8.key(), a.key());
  EXPECT_EQ(a.differences(a8), "threads 2 vs 8");
  EXPECT_EQ(a.differences(a), "");
  EXPECT_NE(skx.differences(hsw).find("features"), std::string::npos);
  EXPECT_NE(skx.differences(hsw).find("skylake-avx512"), std::string::npos);

  EXPECT_THROW(TargetKey::for_target(Target::parse("llvm -mcpu=haswell"), 0),
               std::invalid_argument);
}

TEST(TargetKeyTest, ArmFeaturesWithoutX86Names) {
  kiln::codegen::Target t;
  t.triple = "aarch64-unknown-linux-gnu";
  t.features = {"+neon", "+dotprod", "+crc"};
  TargetKey k = TargetKey::for_target(t, 1);
  EXPECT_EQ(k.features, "+dotprod,+neon");
  EXPECT_EQ(k.target, "llvm -mtriple=aarch64-unknown-linux-gnu");
}

TEST(TargetKeyTest, KeyParsesBack) {
  TargetKey host = TargetKey::for_target(kiln::codegen::Target::host(), 3);
  std::printf("host: %s\n", host.key().c_str());
  EXPECT_EQ(TargetKey::parse(host.key()), host);
  EXPECT_NE(host.key().find("threads=3"), std::string::npos);
  EXPECT_NE(host.key().find("llvm=" + kiln::codegen::llvm_version_string()), std::string::npos);
  TargetKey k = TargetKey::parse(kTarget);
  EXPECT_EQ(k.key(), kTarget);
  EXPECT_EQ(k.threads, 4);
  EXPECT_EQ(k.features, "+avx2,+avx512f,+fma");
  for (std::string bad :
       {std::string("cpu"), std::string("llvm; features=; threads=0; kiln=1; llvm=2"),
        std::string("llvm; features=; threads=x; kiln=1; llvm=2"),
        std::string("llvm; features=; threads=4; kiln=1"),
        std::string("llvm; feature=; threads=4; kiln=1; llvm=2")})
    expect_throw_with<std::invalid_argument>([&] { TargetKey::parse(bad); }, {bad});
}

// A candidate rejected by the compile budget is a stored record like any
// failure: it reads back, exports and imports as "compile_budget", and a
// later search does not try its config again.
TEST_F(RecordsTest, CompileBudgetRecordsRoundTrip) {
  std::string path = file("budget.db");
  RecordDB db = RecordDB::open(path);
  const std::string w = "dense_pack.x86(data=[197,768],weight=[768,768],dtype=float32)";
  // A point of the workload's space (an import checks that): the fallback's.
  const std::string cfg =
      nlohmann::json::parse(kiln::ops::get_template("dense_pack.x86")
                                .fallback(kiln::ops::Workload::parse(w), kiln::Isa{})
                                .to_json())
          .dump();  // canonical: sorted keys, compact
  Record big = make(w, cfg, {}, ErrorClass::kCompileBudget, 20);
  big.error_message = "kernel 'dense_pack' is estimated at 558433 operations after unrolling";
  db.add(big);
  ASSERT_EQ(db.records(w, kTarget).size(), 1u);
  EXPECT_EQ(db.records(w, kTarget)[0], big);
  EXPECT_EQ(db.records(w, kTarget)[0].error, ErrorClass::kCompileBudget);
  EXPECT_TRUE(db.has_config(w, kTarget, big.config_json));
  EXPECT_FALSE(db.best(w, kTarget).has_value());

  std::string line = kiln::tuner::record_to_json_line(big);
  EXPECT_NE(line.find("\"compile_budget\""), std::string::npos) << line;
  EXPECT_EQ(kiln::tuner::record_from_json_line(line), big);

  std::string jsonl = file("budget.jsonl");
  EXPECT_EQ(db.export_jsonl(jsonl), 1u);
  RecordDB other = RecordDB::open(file("other.db"));
  EXPECT_EQ(other.import_jsonl(jsonl), 1u);
  EXPECT_EQ(other.records(w, kTarget), std::vector<Record>({big}));
}

// ---- schema, versions, migration ----------------------------------------------------------------

TEST_F(RecordsTest, NewDatabaseHasSchemaVersionAndWal) {
  std::string path = file("new.db");
  {
    RecordDB db = RecordDB::open(path);
    EXPECT_EQ(db.count(), 0u);
    EXPECT_EQ(db.path(), path);
  }
  RawDB raw(path);
  EXPECT_EQ(raw.one("SELECT version FROM schema_version"),
            std::to_string(RecordDB::kSchemaVersion));
  EXPECT_EQ(raw.one("PRAGMA journal_mode"), "wal");
  // Opening again changes nothing.
  RecordDB::open(path);
  EXPECT_EQ(raw.column("SELECT version FROM schema_version").size(), 1u);
}

TEST_F(RecordsTest, MigratesVersion0Fixture) {
  std::string path = file("v0.db");
  std::string fresh = file("fresh.db");
  {
    RawDB raw(path);
    raw.exec(
        "CREATE TABLE records (workload_key TEXT NOT NULL, target_key TEXT NOT NULL, "
        "config_json TEXT NOT NULL, times_ms TEXT NOT NULL, error TEXT NOT NULL, "
        "timestamp_unix INTEGER NOT NULL);"
        "INSERT INTO records VALUES ('dense(n=8)', 'T', '{ \"b\": 2, \"a\": 1 }', '[2.0, 4.0]', "
        "'ok', 100);"
        "INSERT INTO records VALUES ('dense(n=8)', 'T', '{\"a\": 3}', '[]', 'timeout', 101);"
        "INSERT INTO records VALUES ('dense(n=8)', 'T', '{\"a\": 5}', '[1.5]', 'ok', 102);"
        "INSERT INTO records VALUES ('conv(n=1)', 'T', '{}', '[9]', 'ok', 103);");
  }
  RecordDB db = RecordDB::open(path);
  EXPECT_EQ(db.count(), 4u);
  std::optional<Record> best = db.best("dense(n=8)", "T");
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->config_json, "{\"a\":5}");
  EXPECT_EQ(best->times_ms, std::vector<double>({1.5}));
  EXPECT_EQ(best->kiln_version, "unknown");
  EXPECT_EQ(best->timestamp_unix, 102);
  // Configs are now canonical: the old non-canonical text is found in any spelling.
  EXPECT_TRUE(db.has_config("dense(n=8)", "T", "{\"a\":1,\"b\":2}"));
  EXPECT_TRUE(db.has_config("dense(n=8)", "T", "{\"a\":3}"));
  std::vector<Record> all = db.records("dense(n=8)", "T");
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[1].error, ErrorClass::kTimeout);
  EXPECT_EQ(db.workloads("T"), std::vector<std::string>({"conv(n=1)", "dense(n=8)"}));

  // The migrated file has exactly the layout of a new one.
  RecordDB::open(fresh);
  RawDB a(path), b(fresh);
  const char* layout =
      "SELECT type || ' ' || name || ': ' || sql FROM sqlite_master ORDER BY type, name";
  EXPECT_EQ(a.column(layout), b.column(layout));
  EXPECT_EQ(a.one("SELECT version FROM schema_version"), std::to_string(RecordDB::kSchemaVersion));
  EXPECT_EQ(a.one("PRAGMA integrity_check"), "ok");
}

TEST_F(RecordsTest, FailedMigrationLeavesFileUntouched) {
  std::string path = file("v0bad.db");
  {
    RawDB raw(path);
    raw.exec(
        "CREATE TABLE records (workload_key TEXT NOT NULL, target_key TEXT NOT NULL, "
        "config_json TEXT NOT NULL, times_ms TEXT NOT NULL, error TEXT NOT NULL, "
        "timestamp_unix INTEGER NOT NULL);"
        "INSERT INTO records VALUES ('w', 'T', '{}', '[1]', 'ok', 1);"
        "INSERT INTO records VALUES ('w', 'T', '{}', '[1]', 'exploded', 2);");
  }
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(path); },
                                        {path, "record 2", "exploded"});
  RawDB raw(path);
  EXPECT_EQ(raw.one("SELECT count(*) FROM records"), "2");
  EXPECT_EQ(raw.one("SELECT count(*) FROM sqlite_master WHERE name = 'schema_version'"), "0");
  EXPECT_EQ(raw.one("SELECT count(*) FROM sqlite_master WHERE name = 'records_v0'"), "0");
}

TEST_F(RecordsTest, RefusesNewerSchemaForeignAndCorruptFiles) {
  std::string newer = file("newer.db");
  RecordDB::open(newer).add(make("w", "{}", {1}));
  RawDB(newer).exec("UPDATE schema_version SET version = 7");
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(newer); },
                                        {newer, "schema version 7", "newer"});
  EXPECT_EQ(RawDB(newer).one("SELECT count(*) FROM records"), "1");

  std::string foreign = file("foreign.db");
  RawDB(foreign).exec("CREATE TABLE users (name TEXT)");
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(foreign); },
                                        {foreign, "not a kiln records database"});

  std::string garbage = file("garbage.db");
  write_file(garbage, std::string(4096, 'x'));
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(garbage); }, {garbage});
  EXPECT_EQ(read_file(garbage), std::string(4096, 'x'));

  std::string missing = file("missing.db");
  expect_throw_with<std::runtime_error>(
      [&] { RecordDB::open(missing, RecordDB::Mode::kMustExist); }, {missing, "does not exist"});
  EXPECT_FALSE(fs::exists(missing));
}

// Damaged or foreign files are refused without a raw SQL error and left
// byte for byte as they were: a schema version of 0, -1 or text; another
// program's sqlite file (not switched to WAL first); an old zero-length file.
TEST_F(RecordsTest, DamagedForeignAndEmptyFilesAreRefusedUnchanged) {
  for (const char* version : {"0", "-1", "'two'"}) {
    SCOPED_TRACE(version);
    std::string db = file(std::string("v") + version + ".db");
    RecordDB::open(db).add(make("w", "{}", {1}));
    RawDB(db).exec(std::string("UPDATE schema_version SET version = ") + version);
    std::string before = read_file(db);
    expect_throw_with<std::runtime_error>([&] { RecordDB::open(db); },
                                          {db, "schema_version holds", "damaged or foreign"});
    EXPECT_EQ(read_file(db), before);
  }
  std::string foreign = file("foreign2.db");
  RawDB(foreign).exec("CREATE TABLE users (name TEXT)");
  std::string before = read_file(foreign);
  ASSERT_EQ(before[18], 1);  // rollback journal (file format 1), not WAL (2)
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(foreign); },
                                        {foreign, "not a kiln records database"});
  EXPECT_EQ(read_file(foreign), before);

  std::string empty = file("empty.db");
  write_file(empty, "");
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(empty, RecordDB::Mode::kMustExist); },
                                        {empty, "is an empty file"});
  fs::last_write_time(empty, fs::file_time_type::clock::now() - std::chrono::minutes(1));
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(empty); },
                                        {empty, "is an empty file"});
  EXPECT_EQ(fs::file_size(empty), 0u);
}

// ---- add / best / has_config --------------------------------------------------------------------

TEST_F(RecordsTest, AddBestHasConfig) {
  std::string path = file("r.db");
  RecordDB db = RecordDB::open(path);
  const std::string w = "dense_pack.x86(data=[1,64],weight=[32,64],dtype=float32)";
  EXPECT_FALSE(db.best(w, kTarget).has_value());
  EXPECT_FALSE(db.has_config(w, kTarget, "{\"tile\":4}"));

  Record slow = make(w, "{\"tile\":4,\"unroll\":1}", {2.0, 2.0, 2.0}, ErrorClass::kOk, 10);
  Record fast = make(w, "{\"tile\":8,\"unroll\":1}", {1.0, 2.0}, ErrorClass::kOk, 11);
  Record wrong = make(w, "{\"tile\":16,\"unroll\":0}", {0.1}, ErrorClass::kWrongResult, 12);
  Record hung = make(w, "{\"tile\":32,\"unroll\":1}", {}, ErrorClass::kTimeout, 13);
  db.add(slow);
  EXPECT_EQ(db.best(w, kTarget), slow);
  db.add_batch({fast, wrong, hung});
  EXPECT_EQ(db.count(), 4u);

  // The fastest correct record; a faster wrong one never wins.
  std::optional<Record> best = db.best(w, kTarget);
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(*best, fast);
  EXPECT_DOUBLE_EQ(best->mean_ms(), 1.5);
  // Keyed by target: the same workload elsewhere has no records.
  std::string other = TargetKey::for_target(kiln::codegen::Target::host(), 1).key();
  EXPECT_FALSE(db.best(w, other).has_value());
  EXPECT_TRUE(db.records(w, other).empty());

  EXPECT_TRUE(db.has_config(w, kTarget, "{ \"unroll\": 1, \"tile\": 8 }"));
  EXPECT_TRUE(db.has_config(w, kTarget, "{\"tile\":32,\"unroll\":1}"));  // timed out, measured
  EXPECT_FALSE(db.has_config(w, kTarget, "{\"tile\":8,\"unroll\":0}"));
  EXPECT_FALSE(db.has_config(w, other, "{\"tile\":8,\"unroll\":1}"));

  EXPECT_EQ(db.records(w, kTarget), std::vector<Record>({slow, fast, wrong, hung}));
  db.add(make("conv2d_NCHWc.x86(a=[1])", "{}", {3.0}));
  EXPECT_EQ(db.workloads(kTarget), std::vector<std::string>({"conv2d_NCHWc.x86(a=[1])", w}));
  EXPECT_TRUE(db.workloads(other).empty());

  // Another connection (as another process would) sees the committed records.
  RecordDB again = RecordDB::open(path);
  EXPECT_EQ(again.count(), 5u);
  EXPECT_EQ(again.best(w, kTarget), fast);
}

TEST_F(RecordsTest, InvalidRecordsAreRefusedAndStoreNothing) {
  std::string path = file("r.db");
  RecordDB db = RecordDB::open(path);
  db.add(make("w", "{}", {1.0}));
  std::vector<std::pair<Record, std::string>> bad;
  bad.push_back({make("w", "{}", {}), "at least one measured time"});
  bad.push_back({make("w", "{\"a\":", {1.0}), "not JSON"});
  bad.push_back({make("w", "[1,2]", {1.0}), "JSON object"});
  bad.push_back({make("w", "{}", {1.0, std::nan("")}), "finite"});
  bad.push_back({make("w", "{}", {-1.0}), "finite non-negative"});
  bad.push_back({make("", "{}", {1.0}), "empty workload"});
  Record no_target = make("w", "{}", {1.0});
  no_target.target_key = "";
  bad.push_back({no_target, "empty target"});
  for (const auto& bad_case : bad) {
    const Record& r = bad_case.first;  // not bindings: the lambdas capture them (clang 14)
    const std::string& why = bad_case.second;
    expect_throw_with<std::invalid_argument>([&] { db.add(r); }, {path, why});
    // In a batch, one bad record keeps the good ones out too.
    expect_throw_with<std::invalid_argument>(
        [&] {
          db.add_batch({make("w", "{\"ok\":1}", {1.0}), r});
        },
        {path, why});
  }
  EXPECT_EQ(db.count(), 1u);
  expect_throw_with<std::invalid_argument>([&] { db.has_config("w", kTarget, "nope"); }, {path});
}

// ---- JSON lines ---------------------------------------------------------------------------------

TEST(RecordJsonTest, LineFormat) {
  Record r = make("dense(n=1)", "{\"b\":[1,2],\"a\":\"x\"}", {0.5, 0.25}, ErrorClass::kOk, 42);
  r.gflops = 12.5;
  EXPECT_EQ(kiln::tuner::record_to_json_line(r),
            "{\"workload\":\"dense(n=1)\",\"target\":\"" + kTarget +
                "\",\"config\":{\"a\":\"x\",\"b\":[1,2]},\"times_ms\":[0.5,0.25],\"error\":\"ok\","
                "\"error_message\":\"\",\"timestamp\":42,\"kiln_version\":\"0.1.0\","
                "\"gflops\":12.5}");
  Record back = kiln::tuner::record_from_json_line(kiln::tuner::record_to_json_line(r));
  r.config_json = "{\"a\":\"x\",\"b\":[1,2]}";
  EXPECT_EQ(back, r);
}

// Records with awkward contents: quotes, newlines and non-ASCII text,
// doubles without a short decimal form, several workloads and targets.
std::vector<Record> awkward_records() {
  std::vector<Record> rs;
  const std::string t2 =
      "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=haswell; features=+avx2,+fma; "
      "threads=1; kiln=0.1.0; llvm=16.0.6";
  for (int i = 0; i < 30; ++i) {
    std::string w = "op" + std::to_string(i % 3) + "(n=[" + std::to_string(i % 3) + "])";
    ErrorClass e = i % 5 == 4 ? ErrorClass::kRuntimeError : ErrorClass::kOk;
    std::vector<double> times;
    if (e == ErrorClass::kOk) times = {1.0 / (i + 3), 1e-7 * (i + 1), 123456.789 + i, 0.1 + 0.2};
    Record r = make(w, "{\"tile\":" + std::to_string(i) + ",\"name\":\"q\\\"\\n\"}", times, e,
                    1700000000 + (i * 7919) % 31);
    if (i % 2) r.target_key = t2;
    if (e != ErrorClass::kOk) r.error_message = "signal 11 \"SIGSEGV\"\nin kernel — ünïcode";
    rs.push_back(r);
  }
  return rs;
}

TEST_F(RecordsTest, ExportImportRoundTripIsByteIdentical) {
  std::vector<Record> rs = awkward_records();
  RecordDB a = RecordDB::open(file("a.db"));
  a.add_batch(rs);
  EXPECT_EQ(a.export_jsonl(file("a.jsonl")), rs.size());
  std::string text = read_file(file("a.jsonl"));
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), rs.size());

  RecordDB b = RecordDB::open(file("b.db"));
  EXPECT_EQ(b.import_jsonl(file("a.jsonl")), rs.size());
  EXPECT_EQ(b.export_jsonl(file("b.jsonl")), rs.size());
  EXPECT_EQ(read_file(file("b.jsonl")), text);
  for (const Record& r : rs) {
    EXPECT_EQ(a.records(r.workload_key, r.target_key), b.records(r.workload_key, r.target_key));
    EXPECT_EQ(a.best(r.workload_key, r.target_key), b.best(r.workload_key, r.target_key));
  }

  // Importing again adds nothing; a changed record is new.
  EXPECT_EQ(b.import_jsonl(file("a.jsonl")), 0u);
  EXPECT_EQ(a.import_jsonl(file("a.jsonl")), 0u);
  Record changed = rs[0];
  changed.times_ms[0] += 1e-12;
  write_file(file("one.jsonl"), kiln::tuner::record_to_json_line(changed) + "\n\n");
  EXPECT_EQ(b.import_jsonl(file("one.jsonl")), 1u);
  EXPECT_EQ(b.count(), rs.size() + 1);

  // One workload's records only.
  EXPECT_EQ(a.export_jsonl(file("op1.jsonl"), "op1(n=[1])"), 10u);
  std::istringstream lines(read_file(file("op1.jsonl")));
  size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n)
    EXPECT_EQ(kiln::tuner::record_from_json_line(line).workload_key, "op1(n=[1])");
  EXPECT_EQ(n, 10u);
}

// A record of one of kiln's templates whose knobs are not a point of the
// workload's space is refused on import, naming the line; nothing is stored.
TEST_F(RecordsTest, ImportRefusesConfigsOutsideTheTemplatesSpace) {
  const std::string key = "dense_pack.x86(data=[8,16],weight=[16,32],dtype=float32)";
  Record bad = make(key, R"({"knobs":{"tile_nothing":[1,2]}})", {1.0});
  Record good = make(key, R"({"knobs":{"tile_y":[1,1,8]}})", {1.0}, ErrorClass::kInvalidConfig);
  write_file(file("bad.jsonl"), kiln::tuner::record_to_json_line(good) + "\n" +
                                    kiln::tuner::record_to_json_line(bad) + "\n");
  RecordDB db = RecordDB::open(file("space.db"));
  expect_throw_with<std::runtime_error>(
      [&] { db.import_jsonl(file("bad.jsonl")); },
      {file("bad.jsonl") + ":2:", "not a point of dense_pack.x86's space", "nothing was imported"});
  EXPECT_EQ(db.count(), 0u);
}

TEST_F(RecordsTest, BadImportLineNamesFileAndLineAndStoresNothing) {
  RecordDB db = RecordDB::open(file("r.db"));
  db.add_batch({make("w", "{\"x\":1}", {1.0}), make("w", "{\"x\":2}", {2.0})});
  std::string good;
  for (const Record& r : awkward_records()) good += kiln::tuner::record_to_json_line(r) + "\n";
  const std::string line = kiln::tuner::record_to_json_line(make("v", "{}", {1.0}));
  std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"workload\": \"v\"", "not JSON"},
      {"[1, 2]", "JSON object"},
      {line.substr(0, line.size() - 1) + ",\"extra\":1}", "unknown field \"extra\""},
      {std::string(line).replace(line.find("\"ok\""), 4, "\"boom\""), "boom"},
      {std::string(line).replace(line.find("\"times_ms\""), 10, "\"times_us\""),
       "unknown field \"times_us\""},
      {std::string(line).replace(line.find("1700000000"), 10, "1.5"), "\"timestamp\""},
      {std::string(line).replace(line.find("[1.0]"), 5, "[]"), "at least one measured time"},
  };
  for (const auto& [bad, why] : cases) {
    std::string path = file("bad.jsonl");
    write_file(path, good + bad + "\n" + line + "\n");
    expect_throw_with<std::runtime_error>([&] { db.import_jsonl(path); },
                                          {path + ":31:", why, "nothing was imported"});
    EXPECT_EQ(db.count(), 2u) << bad;
  }
  expect_throw_with<std::runtime_error>([&] { db.import_jsonl(file("absent.jsonl")); },
                                        {file("absent.jsonl")});
}

// ---- several processes
// ---------------------------------------------------------------------------

std::string self_exe() {
  std::error_code ec;
  return fs::read_symlink("/proc/self/exe", ec).string();
}

struct Child {
  pid_t pid = -1;
  int out = -1;  // the child's stdout: one line per committed record
  int in = -1;   // the child's stdin: a byte here starts it writing

  void go() {
    EXPECT_EQ(write(in, "g", 1), 1);
    close(in);
  }
};

Child spawn_writer(const std::string& db, int count, const std::string& tag) {
  int fds[2], ins[2];
  EXPECT_EQ(pipe(fds), 0);
  EXPECT_EQ(pipe(ins), 0);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, ins[0], 0);
  for (int fd : {fds[0], fds[1], ins[0], ins[1]}) posix_spawn_file_actions_addclose(&fa, fd);
  namespace w = kiln::tuner::records_testing;
  std::vector<std::string> env_strings = {
      std::string(w::kWriterDbEnv) + "=" + db,
      std::string(w::kWriterCountEnv) + "=" + std::to_string(count),
      std::string(w::kWriterTagEnv) + "=" + tag};
  std::vector<char*> env;
  for (char** e = environ; *e; ++e) env.push_back(*e);
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  std::string exe = self_exe();
  char* argv[] = {exe.data(), nullptr};
  Child c;
  EXPECT_EQ(posix_spawn(&c.pid, exe.c_str(), &fa, nullptr, argv, env.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  close(ins[0]);
  c.out = fds[0];
  c.in = ins[1];
  return c;
}

// Reads committed indices from the child's pipe until `at_least` have come, or EOF.
void read_indices(int fd, std::string& buf, std::vector<int>& got, size_t at_least) {
  char chunk[4096];
  while (got.size() < at_least) {
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) return;
    buf.append(chunk, static_cast<size_t>(n));
    for (size_t nl; (nl = buf.find('\n')) != std::string::npos; buf.erase(0, nl + 1))
      got.push_back(std::stoi(buf.substr(0, nl)));
  }
}

int wait_exit_code(pid_t pid) {
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
}

// Two writer processes of 500 transactions each lose nothing, and returns how
// often the commit order switched between them (1: one ran after the other).
int run_two_writers(const std::string& path) {
  namespace w = kiln::tuner::records_testing;
  auto t0 = std::chrono::steady_clock::now();
  Child a = spawn_writer(path, 500, "a");
  Child b = spawn_writer(path, 500, "b");
  a.go();
  b.go();
  std::string buf_a, buf_b;
  std::vector<int> got_a, got_b;
  read_indices(a.out, buf_a, got_a, SIZE_MAX);
  read_indices(b.out, buf_b, got_b, SIZE_MAX);
  EXPECT_EQ(wait_exit_code(a.pid), 0);
  EXPECT_EQ(wait_exit_code(b.pid), 0);
  close(a.out);
  close(b.out);
  EXPECT_EQ(got_a.size(), 500u);
  EXPECT_EQ(got_b.size(), 500u);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("two writers, 1000 transactions: %.2f s\n", secs);

  RecordDB db = RecordDB::open(path);
  EXPECT_EQ(db.count(), 1000u);
  for (const char* tag : {"a", "b"})
    for (int i = 0; i < 500; ++i) {
      Record r = w::writer_record(tag, i);
      EXPECT_TRUE(db.has_config(r.workload_key, r.target_key, r.config_json)) << tag << i;
    }
  Record a7 = w::writer_record("a", 7);
  std::vector<Record> same = db.records(a7.workload_key, a7.target_key);
  EXPECT_NE(std::find(same.begin(), same.end(), a7), same.end());
  RawDB raw(path);
  EXPECT_EQ(raw.one("PRAGMA integrity_check"), "ok");
  std::vector<std::string> order = raw.column("SELECT workload_key FROM records ORDER BY id");
  int switches = 0;
  for (size_t i = 1; i < order.size(); ++i) switches += order[i][7] != order[i - 1][7];
  std::printf("commit order switched writers %d times\n", switches);
  return switches;
}

// Every run must lose nothing. The writers must also interleave, or nothing
// concurrent was tested: on a loaded 2-core machine (ctest -j2 beside the
// heaviest tests) one writer was once descheduled for all of the other's 0.3 s,
// so a run without interleaving is repeated, up to 3 times, on a fresh database.
TEST_F(RecordsTest, TwoWriterProcessesLoseNothing) {
  int switches = 0;
  for (int attempt = 0; attempt < 3 && switches < 2 && !HasFailure(); ++attempt)
    switches = run_two_writers(file("shared" + std::to_string(attempt) + ".db"));
  EXPECT_GE(switches, 2) << "the writers ran one after the other 3 times: nothing concurrent "
                            "was tested";
}

TEST_F(RecordsTest, WriterKilledMidwayKeepsEveryCommittedRecord) {
  namespace w = kiln::tuner::records_testing;
  std::string path = file("killed.db");
  RecordDB::open(path).add(make("before", "{}", {1.0}));
  size_t expected = 1;
  // Three writers in turn, each killed at another moment of its work.
  for (int round = 0; round < 3; ++round) {
    std::string tag = "k" + std::to_string(round);
    Child c = spawn_writer(path, 0, tag);  // 0: until killed
    c.go();
    std::string buf;
    std::vector<int> got;
    read_indices(c.out, buf, got, 10);  // it is committing (one read may bring more lines)
    ASSERT_GE(got.size(), 10u) << "the writer did not start";
    std::this_thread::sleep_for(std::chrono::milliseconds(100 + 70 * round));
    ASSERT_EQ(kill(c.pid, SIGKILL), 0);
    EXPECT_EQ(wait_exit_code(c.pid), 128 + SIGKILL);
    read_indices(c.out, buf, got, SIZE_MAX);  // the rest it reported before dying
    close(c.out);
    std::printf("round %d: %zu records committed before SIGKILL\n", round, got.size());

    RecordDB db = RecordDB::open(path);
    EXPECT_EQ(RawDB(path).one("PRAGMA integrity_check"), "ok");
    for (int i : got) {
      Record r = w::writer_record(tag, i);
      ASSERT_TRUE(db.has_config(r.workload_key, r.target_key, r.config_json)) << tag << i;
    }
    // Everything reported is there; at most the one in flight when it died
    // may have committed without being reported.
    expected += got.size();
    EXPECT_GE(db.count(), expected);
    EXPECT_LE(db.count(), expected + 1);
    expected = db.count();
    EXPECT_TRUE(db.best("before", kTarget).has_value());
  }
  RecordDB db = RecordDB::open(path);
  db.add(make("after", "{}", {1.0}));
  EXPECT_TRUE(db.best("after", kTarget).has_value());
}

// ---- kiln records
// ---------------------------------------------------------------------------------

// The kiln binary beside the test binary's folder (build/kiln, build/tests/...).
std::string kiln_binary() {
  fs::path p = fs::path(self_exe()).parent_path().parent_path() / "kiln";
  return fs::exists(p) ? p.string() : std::string();
}

int run_shell(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST_F(RecordsTest, KilnRecordsCommand) {
  std::string kiln = kiln_binary();
  if (kiln.empty()) GTEST_SKIP() << "build the kiln target to test `kiln records`";
  std::string src = file("src.db"), dst = file("dst.db"), out = file("out.jsonl");
  std::string err = file("err.txt");
  RecordDB db = RecordDB::open(src);
  db.add_batch(awkward_records());
  db.export_jsonl(file("expected.jsonl"));

  EXPECT_EQ(run_shell(kiln + " records export " + src + " -o " + out + " 2>" + err), 0);
  EXPECT_EQ(read_file(out), read_file(file("expected.jsonl")));
  EXPECT_NE(read_file(err).find("exported 30 records"), std::string::npos) << read_file(err);
  EXPECT_EQ(run_shell(kiln + " records import " + dst + " " + out + " 2>" + err), 0);
  EXPECT_NE(read_file(err).find("imported 30 new records"), std::string::npos);
  EXPECT_EQ(RecordDB::open(dst).count(), 30u);
  EXPECT_EQ(run_shell(kiln + " records import " + dst + " " + out + " 2>" + err), 0);
  EXPECT_NE(read_file(err).find("imported 0 new records"), std::string::npos);
  std::ostringstream op2;
  EXPECT_EQ(db.export_jsonl(op2, "op2(n=[2])"), 10u);
  EXPECT_EQ(run_shell(kiln + " records export " + src + " -o - --workload 'op2(n=[2])' >" + out +
                      " 2>" + err),
            0);
  EXPECT_EQ(read_file(out), op2.str());

  // Errors: one line naming the file, exit 1; nothing half-written.
  write_file(file("bad.jsonl"), read_file(file("expected.jsonl")) + "{oops\n");
  EXPECT_EQ(run_shell(kiln + " records import " + dst + " " + file("bad.jsonl") + " 2>" + err), 1);
  EXPECT_NE(read_file(err).find(file("bad.jsonl") + ":31:"), std::string::npos) << read_file(err);
  EXPECT_EQ(RecordDB::open(dst).count(), 30u);
  std::string fresh = file("fresh.db");  // a failed import creates no database
  EXPECT_EQ(run_shell(kiln + " records import " + fresh + " " + file("bad.jsonl") + " 2>" + err),
            1);
  EXPECT_FALSE(fs::exists(fresh));
  std::string none = file("none.jsonl");
  EXPECT_EQ(run_shell(kiln + " records export " + file("nope.db") + " -o " + none + " 2>" + err),
            1);
  EXPECT_NE(read_file(err).find(file("nope.db")), std::string::npos) << read_file(err);
  EXPECT_FALSE(fs::exists(file("nope.db")));
  EXPECT_FALSE(fs::exists(none));
  EXPECT_EQ(run_shell(kiln + " records export " + src + " -o " + none + " --workload x 2>" + err),
            1);
  EXPECT_NE(read_file(err).find("no records of workload 'x'"), std::string::npos);
  EXPECT_FALSE(fs::exists(none));
  // Usage errors: exit 2.
  EXPECT_EQ(run_shell(kiln + " records export " + src + " 2>" + err), 2);
  EXPECT_NE(read_file(err).find("-o"), std::string::npos);
  EXPECT_EQ(run_shell(kiln + " records frobnicate 2>" + err), 2);
  EXPECT_EQ(run_shell(kiln + " records import " + dst + " 2>" + err), 2);
}

// ---- claims (schema version 2) -----------------------------------------------------------------

TEST_F(RecordsTest, MigratesVersion1WithRecordsToClaims) {
  // A version-1 file as the previous kiln wrote it: records, no claims table.
  std::string path = file("v1.db");
  {
    RawDB raw(path);
    raw.exec(
        "CREATE TABLE records (id INTEGER PRIMARY KEY, workload_key TEXT NOT NULL, "
        "target_key TEXT NOT NULL, config_json TEXT NOT NULL, times_ms TEXT NOT NULL, "
        "mean_ms REAL, error TEXT NOT NULL, error_message TEXT NOT NULL DEFAULT '', "
        "timestamp_unix INTEGER NOT NULL, kiln_version TEXT NOT NULL, "
        "gflops REAL NOT NULL DEFAULT 0);"
        "CREATE INDEX records_by_speed ON records (workload_key, target_key, mean_ms);"
        "CREATE INDEX records_by_config ON records (workload_key, target_key, config_json);"
        "CREATE TABLE schema_version (version INTEGER NOT NULL);"
        "INSERT INTO schema_version VALUES (1);"
        "INSERT INTO records (workload_key, target_key, config_json, times_ms, mean_ms, error, "
        "timestamp_unix, kiln_version, gflops) VALUES ('w', 'T', '{\"a\":1}', '[2.0]', 2.0, "
        "'ok', 100, '0.1.0', 1.0);");
  }
  RecordDB db = RecordDB::open(path);
  EXPECT_EQ(db.count(), 1u);
  EXPECT_TRUE(db.has_config("w", "T", "{\"a\":1}"));
  ClaimResult c = db.claim("w", "T", {"{\"a\":1}", "{\"a\":2}"}, "me");
  EXPECT_EQ(c.granted, std::vector<bool>({false, true}));  // the recorded one is not measured
  EXPECT_EQ(c.taken, 1);
  RecordDB::open(file("fresh.db"));
  RawDB a(path), b(file("fresh.db"));
  // The fixture's records table is spelled without comments: compare names,
  // and the claims table the migration added in full.
  const char* layout = "SELECT type || ' ' || name FROM sqlite_master ORDER BY type, name";
  EXPECT_EQ(a.column(layout), b.column(layout));
  const char* claims = "SELECT sql FROM sqlite_master WHERE name LIKE 'claims%' ORDER BY name";
  EXPECT_EQ(a.column(claims), b.column(claims));
  EXPECT_EQ(a.one("SELECT version FROM schema_version"), "2");
  EXPECT_EQ(a.one("PRAGMA integrity_check"), "ok");
}

TEST_F(RecordsTest, ClaimsRefuseRecordedAndLiveClaimsAndRespectTheCap) {
  RecordDB a = RecordDB::open(file("c.db"));
  RecordDB b = RecordDB::open(file("c.db"));
  a.add(make("w", "{\"x\":0}", {1}));
  ClaimResult ca = a.claim("w", kTarget, {"{\"x\":1}", "{\"x\":2}", "{\"x\":1}"}, "A");
  EXPECT_EQ(ca.granted, std::vector<bool>({true, true, false}));  // a repeat is refused
  EXPECT_EQ(ca.taken, 1);
  EXPECT_EQ(a.live_claims("w", kTarget), 2);
  // Another owner: x=0 is recorded, x=1 and x=2 are held; x=3 is free, spelled any way.
  ClaimResult cb = b.claim("w", kTarget, {"{\"x\":0}", "{ \"x\": 1 }", "{\"x\":2}", "{\"x\": 3}"},
                           "B", /*max_trials=*/8);
  EXPECT_EQ(cb.granted, std::vector<bool>({false, false, false, true}));
  EXPECT_EQ(cb.taken, 3);
  // The cap counts records and every live claim: 1 + 3 claimed, cap 5 -> one more.
  ClaimResult capped = b.claim("w", kTarget, {"{\"x\":4}", "{\"x\":5}"}, "B", 5);
  EXPECT_EQ(capped.granted, std::vector<bool>({true, false}));
  EXPECT_FALSE(capped.capped);
  EXPECT_TRUE(b.claim("w", kTarget, {"{\"x\":6}"}, "B", 5).capped);
  // Storing deletes the record's claim; release drops the owner's others.
  a.add(make("w", "{\"x\":1}", {1}));
  EXPECT_EQ(a.live_claims("w", kTarget), 3);  // x=2 (A), x=3 and x=4 (B)
  a.release_claims("A");
  EXPECT_EQ(a.live_claims("w", kTarget), 2);
  EXPECT_EQ(a.claim("w", kTarget, {"{\"x\":2}"}, "A").granted, std::vector<bool>({true}));
  EXPECT_THROW(a.claim("w", kTarget, {"not json"}, "A"), std::invalid_argument);
}

TEST_F(RecordsTest, ExpiredClaimOfADeadOwnerIsTakenOver) {
  std::string path = file("e.db");
  RecordDB db = RecordDB::open(path);
  // A dead owner's claim, created 20 minutes ago and never renewed.
  RawDB(path).exec("INSERT INTO claims VALUES ('w', '" + kTarget +
                   "', '{\"x\":1}', '999999@deadhost/0123', strftime('%s','now') - 1200, "
                   "strftime('%s','now') - 600)");
  EXPECT_EQ(db.live_claims("w", kTarget), 0);  // ignored, also by the cap
  ClaimResult c = db.claim("w", kTarget, {"{\"x\":1}"}, "me", /*max_trials=*/1);
  EXPECT_EQ(c.granted, std::vector<bool>({true}));
  EXPECT_EQ(c.taken, 0);
  EXPECT_EQ(RawDB(path).one("SELECT owner FROM claims"), "me");
  // A live claim of another owner is not taken over; renewing keeps it live.
  EXPECT_FALSE(db.claim("w", kTarget, {"{\"x\":1}"}, "other").granted[0]);
  db.renew_claims("me", 1000);
  EXPECT_EQ(RawDB(path).one("SELECT expires_unix - strftime('%s','now') > 900 FROM claims"), "1");
  // Owners are unique per call: pid@host/token.
  std::string o1 = make_claim_owner(), o2 = make_claim_owner();
  EXPECT_NE(o1, o2);
  EXPECT_EQ(o1.rfind(std::to_string(getpid()) + "@", 0), 0u) << o1;
}

// A tuner of this host killed with -9 leaves live claims; the next claim()
// sees that their owner's pid is gone and takes them over at once, instead
// of waiting 10 minutes for the expiry (and counting them toward the cap).
// A live process's claims and another host's stay held.
TEST_F(RecordsTest, LiveClaimsOfADeadProcessOfThisHostAreTakenOverAtOnce) {
  std::string path = file("dead.db");
  RecordDB db = RecordDB::open(path);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);  // gone: kill(child, 0) fails with ESRCH
  std::string self = make_claim_owner();
  std::string host = self.substr(self.find('@') + 1, self.find('/') - self.find('@') - 1);
  std::string dead_owner = std::to_string(child) + "@" + host + "/dead";
  std::string alive_owner = std::to_string(getppid()) + "@" + host + "/alive";
  std::string remote_owner = std::to_string(child) + "@another-host/remote";
  int x = 0;
  for (const std::string& owner : {dead_owner, alive_owner, remote_owner})
    RawDB(path).exec("INSERT INTO claims VALUES ('w', '" + kTarget +
                     "', '{\"x\":" + std::to_string(++x) + "}', '" + owner +
                     "', strftime('%s','now'), strftime('%s','now') + 600)");
  EXPECT_EQ(db.live_claims("w", kTarget), 3);
  ClaimResult c = db.claim("w", kTarget, {"{\"x\":1}", "{\"x\":2}", "{\"x\":3}"}, self,
                           /*max_trials=*/3);
  EXPECT_EQ(c.taken, 2);  // the dead owner's claim no longer counts toward the cap
  EXPECT_EQ(c.granted, std::vector<bool>({true, false, false}));
  EXPECT_EQ(RawDB(path).one("SELECT owner FROM claims WHERE config_json = '{\"x\":1}'"), self);
}

TEST_F(RecordsTest, LockedLongerThanTheBusyTimeoutThrowsBusyAndChangesNothing) {
  std::string path = file("busy.db");
  RecordDB db = RecordDB::open(path);
  db.set_busy_timeout_ms(100);
  sqlite3* other = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr), SQLITE_OK);
  EXPECT_THROW(db.add(make("w", "{}", {1})), RecordDBBusy);
  EXPECT_THROW(db.claim("w", kTarget, {"{}"}, "me"), RecordDBBusy);
  sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr);
  sqlite3_close(other);
  EXPECT_EQ(db.count(), 0u);
  db.add(make("w", "{}", {1}));
  EXPECT_EQ(db.count(), 1u);
}

}  // namespace
