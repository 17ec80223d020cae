// The lease simulation's short run (bench/tuner/lease_sim.h; scripts/lease_sim.sh runs
// it longer): 100 workers, each with its own connection, lease, "measure" and store
// against a throwaway PostgreSQL server for 12 s. No config stored twice, every
// granted config stored, no trial cap exceeded, no worker error.
#include "lease_sim.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>
#include <string>

#include "postgres/pg_server.h"
#include "tuner/records.h"

namespace {

TEST(LeaseSim, HundredWorkersShareOneDatabaseWithoutDuplicates) {
  std::string why;
  kiln::testing::PgServer::Options so;
  so.max_connections = 130;
  std::unique_ptr<kiln::testing::PgServer> server = kiln::testing::PgServer::start(so, &why);
  if (!server) GTEST_SKIP() << "no PostgreSQL server could be started: " << why;
  kiln::bench::LeaseSimOptions o;
  o.url = server->create_database();
  o.workers = 100;
  o.seconds = 12;
  o.tasks = 20;
  o.space = 1500;  // small spaces: proposals collide; the first tasks reach the cap
  o.trials = 1000;
  o.batch = 8;
  o.measure_ms = 30;
  kiln::bench::LeaseSimReport r = kiln::bench::run_lease_sim(o);
  std::printf("%s", r.to_text().c_str());
  EXPECT_EQ(r.errors, 0) << r.first_error;
  EXPECT_GT(r.leases, 100);
  EXPECT_GT(r.records, 100);
  EXPECT_EQ(r.duplicates, 0);
  EXPECT_EQ(r.stored, r.records);  // every granted config stored, nothing else
  EXPECT_EQ(r.granted, r.records);
  EXPECT_GT(r.refused, 0);  // the collisions the small spaces make happened
  kiln::tuner::RecordDB db = kiln::tuner::RecordDB::open(o.url);
  const std::string target = db.targets().at(0);
  for (const std::string& w : db.workloads(target))
    EXPECT_LE(db.records(w, target).size(), 1000u) << w;
}

}  // namespace
