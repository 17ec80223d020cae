// RecordDB's semantics, written once and run against both backends (gtest
// value-parameterized): sqlite files and a throwaway PostgreSQL server on
// loopback (pg_server.h). The PostgreSQL instances skip, saying why, only if no
// server can be started. Then what only PostgreSQL has: URLs and their errors,
// a server that is down, the schema checks, the busy timeout, many connections
// claiming at once, and `kiln records sync` between the two kinds of store.
#include <gtest/gtest.h>
#include <libpq-fe.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "postgres/pg_server.h"
#include "tuner/record_backend.h"
#include "tuner/records.h"

namespace fs = std::filesystem;
using kiln::testing::PgServer;
using kiln::tuner::ClaimResult;
using kiln::tuner::ErrorClass;
using kiln::tuner::Record;
using kiln::tuner::RecordDB;
using kiln::tuner::RecordDBBusy;

namespace {

const std::string kTarget =
    "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=znver4; features=+avx2,+avx512f,+fma; threads=2; "
    "kiln=0.1.0; llvm=16.0.6";

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

// Records with awkward text and numbers: quotes, unicode, newlines, tiny and huge times.
std::vector<Record> awkward_records() {
  std::vector<Record> rs;
  for (int i = 0; i < 24; ++i) {
    std::string w = i % 3 == 0 ? "op\"quoted\"(n=[1])" : (i % 3 == 1 ? "Zop(n=[2])" : "aop(ü=[3])");
    Record r = make(w, "{\"k\":" + std::to_string(i) + ",\"s\":\"a\\nb\\u00e9\"}",
                    {1e-9 * (i + 1), 12345.678901234567 + i}, ErrorClass::kOk, 1700000000 + i % 4);
    if (i % 5 == 4) {
      r.error = ErrorClass::kRuntimeError;
      r.error_message = "line one\nline 'two' \"three\"";
    }
    rs.push_back(r);
  }
  return rs;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

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

// One server for the whole test process (started on first use); its
// destructor at exit stops it, and its watchdog does if the process dies.
PgServer* server(std::string* why_not) {
  static std::string why;
  static std::unique_ptr<PgServer> s = PgServer::start(&why);
  if (!s && why_not) *why_not = why;
  return s.get();
}

class BackendTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kiln_backend_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    if (GetParam() == "postgres") {
      std::string why;
      PgServer* s = server(&why);
      if (!s) GTEST_SKIP() << "no PostgreSQL server could be started: " << why;
      db_ = s->create_database();
    } else {
      db_ = file("records.db");
    }
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  std::string dir_, db_;  // db_: a sqlite file or a PostgreSQL URL, new per test
};

TEST_P(BackendTest, AddBestRecordsAndLookups) {
  RecordDB db = RecordDB::open(db_);
  const std::string w = "dense_pack.x86(data=[1,64],weight=[32,64],dtype=float32)";
  EXPECT_FALSE(db.best(w, kTarget).has_value());
  Record slow = make(w, "{\"tile\":4,\"unroll\":1}", {2.0, 2.0, 2.0}, ErrorClass::kOk, 10);
  Record fast = make(w, "{\"tile\":8,\"unroll\":1}", {1.0, 2.0}, ErrorClass::kOk, 11);
  Record tie = make(w, "{\"tile\":9,\"unroll\":1}", {1.5}, ErrorClass::kOk, 12);
  Record wrong = make(w, "{\"tile\":16,\"unroll\":0}", {0.1}, ErrorClass::kWrongResult, 12);
  Record hung = make(w, "{\"tile\":32,\"unroll\":1}", {}, ErrorClass::kTimeout, 13);
  db.add(slow);
  EXPECT_EQ(db.best(w, kTarget), slow);
  db.add_batch({fast, wrong, hung, tie});
  EXPECT_EQ(db.count(), 5u);
  EXPECT_EQ(db.best(w, kTarget), fast);  // fastest correct; a tie goes to the older record
  EXPECT_EQ(db.records(w, kTarget), std::vector<Record>({slow, fast, wrong, tie, hung}));
  EXPECT_TRUE(db.has_config(w, kTarget, "{ \"unroll\": 1, \"tile\": 8 }"));
  EXPECT_TRUE(db.has_config(w, kTarget, "{\"tile\":32,\"unroll\":1}"));
  EXPECT_FALSE(db.has_config(w, kTarget, "{\"tile\":8,\"unroll\":0}"));
  EXPECT_FALSE(db.has_config(w, "other", "{\"tile\":8,\"unroll\":1}"));
  db.add(make("Zconv(a=[1])", "{}", {3.0}));
  db.add(make("conv(a=[1])", "{}", {3.0}));
  // Byte order, as sqlite sorts, whatever the server's locale.
  EXPECT_EQ(db.workloads(kTarget), std::vector<std::string>({"Zconv(a=[1])", "conv(a=[1])", w}));
  EXPECT_EQ(db.targets(), std::vector<std::string>({kTarget}));
  RecordDB again = RecordDB::open(db_);  // another connection sees the commits
  EXPECT_EQ(again.count(), 7u);
  EXPECT_EQ(again.best(w, kTarget), fast);
}

TEST_P(BackendTest, InvalidRecordsAndBatchesStoreNothing) {
  RecordDB db = RecordDB::open(db_);
  db.add(make("w", "{}", {1.0}));
  std::vector<std::pair<Record, std::string>> bad = {
      {make("w", "{}", {}), "at least one measured time"},
      {make("w", "{\"a\":", {1.0}), "not JSON"},
      {make("w", "[1,2]", {1.0}), "JSON object"},
      {make("w", "{}", {-1.0}), "finite non-negative"},
      {make("", "{}", {1.0}), "empty workload"}};
  for (const auto& bad_case : bad) {
    const Record& r = bad_case.first;
    const std::string& why = bad_case.second;
    expect_throw_with<std::invalid_argument>([&] { db.add(r); }, {db.path(), why});
    expect_throw_with<std::invalid_argument>(
        [&] {
          db.add_batch({make("w", "{\"ok\":1}", {1.0}), r});
        },
        {why});
    expect_throw_with<std::invalid_argument>(
        [&] {
          db.import_records({make("w", "{\"ok\":2}", {1.0}), r});
        },
        {why, "nothing was added"});
  }
  EXPECT_EQ(db.count(), 1u);
}

TEST_P(BackendTest, IdenticalRecordsAreStoredOnce) {
  RecordDB db = RecordDB::open(db_);
  Record r = make("w", "{\"b\":1,\"a\":2}", {1.0, 2.0});
  db.add(r);
  db.add(r);
  Record respelled = r;
  respelled.config_json = "{ \"a\": 2, \"b\": 1 }";  // the same record, canonically
  db.add_batch({respelled});
  EXPECT_EQ(db.count(), 1u);
  Record changed = r;
  changed.times_ms[0] += 1e-12;  // a changed record is new
  EXPECT_EQ(db.import_records({r, changed}), 1u);
  EXPECT_EQ(db.count(), 2u);
}

TEST_P(BackendTest, ExportImportMatchesAPlainSqliteReference) {
  std::vector<Record> rs = awkward_records();
  RecordDB db = RecordDB::open(db_);
  db.add_batch(rs);
  // The reference: the same records in a fresh sqlite file.
  RecordDB ref = RecordDB::open(file("reference.db"));
  ref.add_batch(rs);
  std::ostringstream got, want;
  EXPECT_EQ(db.export_jsonl(got), rs.size());
  ref.export_jsonl(want);
  EXPECT_EQ(got.str(), want.str());
  for (const Record& r : rs) {
    EXPECT_EQ(db.records(r.workload_key, kTarget), ref.records(r.workload_key, kTarget));
    EXPECT_EQ(db.best(r.workload_key, kTarget), ref.best(r.workload_key, kTarget));
  }
  std::ostringstream one;
  EXPECT_EQ(db.export_jsonl(one, "Zop(n=[2])"), 8u);
  // Import into this backend: all new, then nothing new.
  std::string jsonl = file("all.jsonl");
  ref.export_jsonl(jsonl);
  RecordDB fresh = RecordDB::open(GetParam() == "postgres" ? server(nullptr)->create_database()
                                                           : file("fresh.db"));
  EXPECT_EQ(fresh.import_jsonl(jsonl), rs.size());
  EXPECT_EQ(fresh.import_jsonl(jsonl), 0u);
  std::ostringstream again;
  fresh.export_jsonl(again);
  EXPECT_EQ(again.str(), want.str());
}

TEST_P(BackendTest, ClaimsRefuseRecordedAndLiveClaimsAndRespectTheCap) {
  RecordDB a = RecordDB::open(db_);
  RecordDB b = RecordDB::open(db_);
  a.add(make("w", "{\"x\":0}", {1}));
  ClaimResult ca = a.claim("w", kTarget, {"{\"x\":1}", "{\"x\":2}", "{\"x\":1}"}, "A");
  EXPECT_EQ(ca.granted, std::vector<bool>({true, true, false}));  // a repeat is refused
  EXPECT_EQ(ca.taken, 1);
  EXPECT_EQ(a.live_claims("w", kTarget), 2);
  ClaimResult cb = b.claim("w", kTarget, {"{\"x\":0}", "{ \"x\": 1 }", "{\"x\":2}", "{\"x\": 3}"},
                           "B", /*max_trials=*/8);
  EXPECT_EQ(cb.granted, std::vector<bool>({false, false, false, true}));
  EXPECT_EQ(cb.taken, 3);
  ClaimResult capped = b.claim("w", kTarget, {"{\"x\":4}", "{\"x\":5}"}, "B", 5);
  EXPECT_EQ(capped.granted, std::vector<bool>({true, false}));
  EXPECT_FALSE(capped.capped);
  EXPECT_TRUE(b.claim("w", kTarget, {"{\"x\":6}"}, "B", 5).capped);
  a.add(make("w", "{\"x\":1}", {1}));  // storing deletes the record's claim
  EXPECT_EQ(a.live_claims("w", kTarget), 3);
  a.release_claims("A");
  EXPECT_EQ(a.live_claims("w", kTarget), 2);
  EXPECT_EQ(a.claim("w", kTarget, {"{\"x\":2}"}, "A").granted, std::vector<bool>({true}));
  EXPECT_THROW(a.claim("w", kTarget, {"not json"}, "A"), std::invalid_argument);
  EXPECT_THROW(a.claim("w", kTarget, {"{}"}, ""), std::invalid_argument);
}

// Configs whose text needs escaping on its way to the server (quotes,
// backslashes, braces and commas of array literals, unicode) claim and store as any.
TEST_P(BackendTest, ClaimsOfAwkwardConfigs) {
  RecordDB db = RecordDB::open(db_);
  const std::vector<std::string> configs = {R"({"s":"a\"b\\c{,}"})", R"({"s":"NULL"})",
                                            R"({"s":"é ,}{"})", "{}"};
  ClaimResult c = db.claim("w", kTarget, configs, "A", 10);
  EXPECT_EQ(c.granted, std::vector<bool>({true, true, true, true}));
  for (const std::string& config : configs) db.add(make("w", config, {1.0}));
  EXPECT_EQ(db.live_claims("w", kTarget), 0);  // storing deleted each claim
  EXPECT_EQ(db.claim("w", kTarget, configs, "B", 10).granted,
            std::vector<bool>({false, false, false, false}));
  for (const std::string& config : configs) EXPECT_TRUE(db.has_config("w", kTarget, config));
}

TEST_P(BackendTest, ExpiredClaimsAreTakenOverAndRenewedOnesAreNot) {
  RecordDB db = RecordDB::open(db_);
  // ttl 0: expired at once, as a claim whose owner died and stopped renewing.
  EXPECT_TRUE(db.claim("w", kTarget, {"{\"x\":1}"}, "dead", 0, /*ttl_s=*/0).granted[0]);
  EXPECT_EQ(db.live_claims("w", kTarget), 0);  // ignored, also by the cap
  ClaimResult c = db.claim("w", kTarget, {"{\"x\":1}"}, "me", /*max_trials=*/1);
  EXPECT_EQ(c.granted, std::vector<bool>({true}));
  EXPECT_EQ(c.taken, 0);
  EXPECT_FALSE(db.claim("w", kTarget, {"{\"x\":1}"}, "other").granted[0]);
  db.renew_claims("me", 1000);
  EXPECT_EQ(db.live_claims("w", kTarget), 1);
  db.renew_claims("me", 0);  // a heartbeat that lapses: the claim may be taken over
  EXPECT_TRUE(db.claim("w", kTarget, {"{\"x\":1}"}, "other").granted[0]);
}

TEST_P(BackendTest, LiveClaimsOfADeadProcessOfThisHostAreTakenOverAtOnce) {
  RecordDB db = RecordDB::open(db_);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  const std::string host = kiln::tuner::this_host();
  const std::string dead = std::to_string(child) + "@" + host + "/dead";
  const std::string alive = std::to_string(getppid()) + "@" + host + "/alive";
  const std::string remote = std::to_string(child) + "@another-host/remote";
  // The dead owner's claim last: every claim() reaps dead owners first.
  EXPECT_TRUE(db.claim("w", kTarget, {"{\"x\":2}"}, alive).granted[0]);
  EXPECT_TRUE(db.claim("w", kTarget, {"{\"x\":3}"}, remote).granted[0]);
  EXPECT_TRUE(db.claim("w", kTarget, {"{\"x\":1}"}, dead).granted[0]);
  EXPECT_EQ(db.live_claims("w", kTarget), 3);
  const std::string self = kiln::tuner::make_claim_owner();
  ClaimResult c = db.claim("w", kTarget, {"{\"x\":1}", "{\"x\":2}", "{\"x\":3}"}, self, 3);
  EXPECT_EQ(c.taken, 2);  // the dead owner's claim no longer counts
  EXPECT_EQ(c.granted, std::vector<bool>({true, false, false}));
}

TEST_P(BackendTest, ShortTimeoutsAreRetriedByALongerTimeout) {
  RecordDB db = RecordDB::open(db_);
  Record t = make("w", "{\"x\":1}", {}, ErrorClass::kTimeout);
  t.error_message = "killed after the timeout of 1 s";
  db.add(t);
  db.add(make("w", "{\"x\":2}", {1.0}));
  // Same timeout: recorded and counted. Longer timeout: neither.
  ClaimResult same = db.claim("w", kTarget, {"{\"x\":1}", "{\"x\":3}"}, "A", 10, 600, 1.0);
  EXPECT_EQ(same.granted, std::vector<bool>({false, true}));
  EXPECT_EQ(same.taken, 2);
  db.release_claims("A");
  ClaimResult longer = db.claim("w", kTarget, {"{\"x\":1}"}, "B", 10, 600, 5.0);
  EXPECT_EQ(longer.granted, std::vector<bool>({true}));
  EXPECT_EQ(longer.taken, 1);
}

// Tuners started together on a new database: one creates the schema, the
// others wait for it and find it (no "already exists").
TEST_P(BackendTest, ManyOpenANewDatabaseAtOnce) {
  std::atomic<int> failures{0};
  std::vector<std::thread> openers;
  for (int i = 0; i < 6; ++i)
    openers.emplace_back([&, i] {
      try {
        RecordDB::open(db_).add(make("w", "{\"i\":" + std::to_string(i) + "}", {1.0}));
      } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
        ++failures;
      }
    });
  for (std::thread& t : openers) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(RecordDB::open(db_).count(), 6u);
}

// Eight connections claim from one candidate list under one cap, store what
// they were granted and release: every config measured once, exactly the cap.
TEST_P(BackendTest, ConcurrentClaimersNeverShareAConfigAndFillTheCap) {
  const int kWorkers = 8, kCap = 120, kCandidates = 300;
  RecordDB::open(db_);  // the schema, before the workers race
  std::vector<std::string> candidates;
  for (int i = 0; i < kCandidates; ++i) candidates.push_back("{\"i\":" + std::to_string(i) + "}");
  std::atomic<int> failures{0};
  std::vector<std::thread> workers;
  for (int wi = 0; wi < kWorkers; ++wi) {
    workers.emplace_back([&, wi] {
      try {
        RecordDB db = RecordDB::open(db_);
        const std::string owner = kiln::tuner::make_claim_owner();
        for (size_t start = static_cast<size_t>(wi) * 7;; start += 5) {
          std::vector<std::string> batch;
          for (size_t k = 0; k < 6; ++k) batch.push_back(candidates[(start + k) % kCandidates]);
          ClaimResult c = db.claim("w", kTarget, batch, owner, kCap);
          if (c.capped) break;
          std::vector<Record> rs;
          for (size_t k = 0; k < batch.size(); ++k)
            if (c.granted[k]) rs.push_back(make("w", batch[k], {1.0 + wi}));
          db.add_batch(rs);
          db.release_claims(owner);
        }
      } catch (const std::exception& e) {
        ADD_FAILURE() << "worker " << wi << ": " << e.what();
        ++failures;
      }
    });
  }
  for (std::thread& t : workers) t.join();
  ASSERT_EQ(failures.load(), 0);
  RecordDB db = RecordDB::open(db_);
  std::vector<Record> rs = db.records("w", kTarget);
  std::set<std::string> configs;
  for (const Record& r : rs) configs.insert(r.config_json);
  EXPECT_EQ(configs.size(), rs.size()) << "a config was measured twice";
  EXPECT_EQ(rs.size(), static_cast<size_t>(kCap));
  EXPECT_EQ(db.live_claims("w", kTarget), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, BackendTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// ---- PostgreSQL only ----------------------------------------------------------------------------

class PostgresTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    s_ = server(&why);
    if (!s_) GTEST_SKIP() << "no PostgreSQL server could be started: " << why;
  }
  PgServer* s_ = nullptr;
};

TEST(RecordUrlTest, PostgresUrlsAndRedaction) {
  EXPECT_TRUE(kiln::tuner::is_postgres_url("postgresql://u@h:5/db"));
  EXPECT_TRUE(kiln::tuner::is_postgres_url("postgres://h/db"));
  EXPECT_FALSE(kiln::tuner::is_postgres_url("logs/tuning.db"));
  EXPECT_FALSE(kiln::tuner::is_postgres_url("postgresql.db"));
  EXPECT_EQ(kiln::tuner::redact_url("postgresql://kiln:s3cret@db.lan:5432/records"),
            "postgresql://kiln@db.lan:5432/records");
  EXPECT_EQ(kiln::tuner::redact_url("postgresql://kiln@db.lan/r?password=x&sslmode=require"),
            "postgresql://kiln@db.lan/r?password=***&sslmode=require");
  EXPECT_EQ(kiln::tuner::redact_url("postgresql://db.lan/r"), "postgresql://db.lan/r");
}

TEST_F(PostgresTest, ADownServerIsOneClearErrorNamingTheUrlWithoutPassword) {
  // A port nothing listens on: this server's, after it is stopped, would do;
  // port 1 is never a PostgreSQL server.
  const std::string url = "postgresql://kiln:s3cret@127.0.0.1:1/records?connect_timeout=2";
  try {
    RecordDB::open(url);
    ADD_FAILURE() << "opened a database on port 1";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("postgresql://kiln@127.0.0.1:1/records"), std::string::npos) << m;
    EXPECT_EQ(m.find("s3cret"), std::string::npos) << m;
    EXPECT_NE(m.find("cannot connect"), std::string::npos) << m;
  }
  // A database the server does not have: the server's own words.
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(s_->url("no_such_db")); },
                                        {s_->url("no_such_db"), "does not exist"});
}

TEST_F(PostgresTest, SchemaIsVersionedAndForeignOrNewerDatabasesAreRefusedUnchanged) {
  const std::string url = s_->create_database();
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(url, RecordDB::Mode::kMustExist); },
                                        {url, "holds no kiln records"});
  RecordDB::open(url).add(make("w", "{}", {1}));
  EXPECT_EQ(s_->psql(url, "SELECT version FROM schema_version"),
            std::to_string(RecordDB::kSchemaVersion) + "\n");
  EXPECT_EQ(RecordDB::open(url, RecordDB::Mode::kMustExist).count(), 1u);
  // A duplicate can never be stored, even by SQL that bypasses kiln.
  EXPECT_THROW(s_->psql(url,
                        "INSERT INTO records (workload_key, target_key, config_json, "
                        "times_ms, error, timestamp_unix, kiln_version, identity) "
                        "SELECT workload_key, target_key, config_json, times_ms, error, "
                        "timestamp_unix, kiln_version, identity FROM records"),
               std::runtime_error);

  s_->psql(url, "UPDATE schema_version SET version = 99");
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(url); },
                                        {url, "schema version 99", "newer"});
  const std::string foreign = s_->create_database();
  s_->psql(foreign, "CREATE TABLE records (id int)");
  expect_throw_with<std::runtime_error>([&] { RecordDB::open(foreign); },
                                        {foreign, "not a kiln records database"});
  EXPECT_EQ(s_->psql(foreign, "SELECT count(*) FROM pg_tables WHERE tablename = 'claims'"), "0\n");
}

TEST_F(PostgresTest, LockedLongerThanTheBusyTimeoutThrowsBusyAndChangesNothing) {
  const std::string url = s_->create_database();
  RecordDB db = RecordDB::open(url);
  db.set_busy_timeout_ms(200);
  PGconn* other = PQconnectdb(url.c_str());
  ASSERT_EQ(PQstatus(other), CONNECTION_OK) << PQerrorMessage(other);
  PQclear(PQexec(other, "BEGIN"));
  PQclear(PQexec(other, "LOCK TABLE records, claims IN ACCESS EXCLUSIVE MODE"));
  EXPECT_THROW(db.add(make("w", "{}", {1})), RecordDBBusy);
  EXPECT_THROW(db.claim("w", kTarget, {"{}"}, "me"), RecordDBBusy);
  PQclear(PQexec(other, "COMMIT"));
  PQfinish(other);
  EXPECT_EQ(db.count(), 0u);
  db.add(make("w", "{}", {1}));
  EXPECT_EQ(db.count(), 1u);
}

TEST_F(PostgresTest, AKilledWriterLosesOnlyItsOpenTransaction) {
  const std::string url = s_->create_database();
  RecordDB::open(url).add(make("before", "{}", {1.0}));
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Claims a config and stores records until killed.
    try {
      RecordDB db = RecordDB::open(url);
      db.claim("held", kTarget, {"{\"x\":1}"}, kiln::tuner::make_claim_owner());
      for (int i = 0;; ++i) db.add(make("child", "{\"i\":" + std::to_string(i) + "}", {1.0}));
    } catch (...) {
      _exit(3);
    }
  }
  RecordDB db = RecordDB::open(url);
  size_t seen = 0;  // "before" and at least 19 of the child's, committed
  while ((seen = db.count()) < 20) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(child, SIGKILL);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  // Every committed record survives the kill (the child may have been killed
  // before committing another: seen, not seen + 1, is the floor).
  const size_t n = db.count();
  EXPECT_GE(n, seen);
  std::vector<Record> rs = db.records("child", kTarget);
  EXPECT_EQ(rs.size() + 1, n);
  EXPECT_EQ(db.records("before", kTarget).size(), 1u);
  // The dead writer's live claim is taken over by the next claim on this host.
  EXPECT_TRUE(db.claim("held", kTarget, {"{\"x\":1}"}, "me").granted[0]);
}

std::string kiln_binary() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec).parent_path().parent_path() / "kiln";
  return fs::exists(p) ? p.string() : std::string();
}

int run_shell(const std::string& cmd) {
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `kiln records sync A B` between sqlite and PostgreSQL, both ways, and
// sqlite to sqlite: everything copied once, a second sync copies 0.
TEST_F(PostgresTest, KilnRecordsSyncAnyDirectionIsIdempotent) {
  const std::string kiln = kiln_binary();
  if (kiln.empty()) GTEST_SKIP() << "build the kiln target to test `kiln records sync`";
  std::string tmpl = (fs::temp_directory_path() / "kiln_sync_XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::string dir = tmpl, a = dir + "/a.db", c = dir + "/c.db", err = dir + "/err.txt";
  std::vector<Record> rs = awkward_records();
  RecordDB(RecordDB::open(a)).add_batch(rs);
  const std::string pg = s_->create_database();
  auto sync = [&](const std::string& from, const std::string& to) {
    return run_shell(kiln + " records sync '" + from + "' '" + to + "' 2>" + err);
  };
  EXPECT_EQ(sync(a, pg), 0);
  EXPECT_NE(read_file(err).find("copied 24 new records"), std::string::npos) << read_file(err);
  EXPECT_EQ(sync(a, pg), 0);
  EXPECT_NE(read_file(err).find("copied 0 new records"), std::string::npos) << read_file(err);
  // More records on the server side (as another host's tuner adds), back to a new sqlite file.
  RecordDB server_db = RecordDB::open(pg);
  server_db.add(make("remote(n=[1])", "{\"r\":1}", {4.0}));
  EXPECT_EQ(sync(pg, c), 0);
  EXPECT_NE(read_file(err).find("copied 25 new records"), std::string::npos) << read_file(err);
  EXPECT_EQ(sync(pg, c), 0);
  EXPECT_NE(read_file(err).find("copied 0 new records"), std::string::npos);
  EXPECT_EQ(sync(c, a), 0);  // sqlite to sqlite: the one record a lacked
  EXPECT_NE(read_file(err).find("copied 1 new record "), std::string::npos) << read_file(err);
  std::ostringstream from_pg, from_a;
  server_db.export_jsonl(from_pg);
  RecordDB::open(a).export_jsonl(from_a);
  EXPECT_EQ(from_pg.str(), from_a.str());
  // Errors: a source that does not exist, a server that is down: exit 1, one line.
  EXPECT_EQ(sync(dir + "/none.db", c), 1);
  EXPECT_NE(read_file(err).find(dir + "/none.db"), std::string::npos);
  EXPECT_EQ(sync(a, "postgresql://kiln:pw@127.0.0.1:1/x?connect_timeout=2"), 1);
  EXPECT_NE(read_file(err).find("postgresql://kiln@127.0.0.1:1/x"), std::string::npos)
      << read_file(err);
  EXPECT_EQ(read_file(err).find("pw@"), std::string::npos);
  // A down server for `kiln records export`: one line, exit 1, no output file.
  const std::string out = dir + "/out.jsonl";
  EXPECT_EQ(run_shell(kiln +
                      " records export 'postgresql://kiln:pw@127.0.0.1:1/x?connect_timeout=2' -o " +
                      out + " 2>" + err),
            1);
  const std::string message = read_file(err);
  EXPECT_EQ(std::count(message.begin(), message.end(), '\n'), 1) << message;
  EXPECT_NE(message.find("postgresql://kiln@127.0.0.1:1/x"), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(out));
  EXPECT_EQ(sync(a, dir + "/new.db"), 0);
  EXPECT_EQ(run_shell(kiln + " records sync '" + a + "' 2>" + err), 2);  // usage
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
