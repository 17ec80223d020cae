// kiln_lease_sim: the lease simulation (lease_sim.h) from the command line.
//
//   kiln_lease_sim [--url URL] [--workers 100] [--seconds 20] [--tasks 50] [--space 4000]
//                  [--trials N] [--batch 8] [--measure-ms 100] [--seed 1]
//
// Without --url it starts a throwaway PostgreSQL server on loopback
// (tests/postgres/pg_server.h) with the server's durable defaults (fsync on),
// and removes it at the end. Prints the figures; exits 1 if a config was
// stored twice, a granted config was not stored, or a worker failed.
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "lease_sim.h"
#include "postgres/pg_server.h"

int main(int argc, char** argv) {
  kiln::bench::LeaseSimOptions o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kiln_lease_sim: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--url")
      o.url = value();
    else if (a == "--workers")
      o.workers = std::atoi(value().c_str());
    else if (a == "--seconds")
      o.seconds = std::atof(value().c_str());
    else if (a == "--tasks")
      o.tasks = std::atoi(value().c_str());
    else if (a == "--space")
      o.space = std::atoi(value().c_str());
    else if (a == "--trials")
      o.trials = std::atoi(value().c_str());
    else if (a == "--batch")
      o.batch = std::atoi(value().c_str());
    else if (a == "--measure-ms")
      o.measure_ms = std::atof(value().c_str());
    else if (a == "--seed")
      o.seed = std::strtoull(value().c_str(), nullptr, 10);
    else {
      std::fprintf(stderr,
                   "kiln_lease_sim: unknown argument %s (see bench/tuner/lease_sim_main.cc)\n",
                   a.c_str());
      return 2;
    }
  }
  if (o.workers < 1 || o.tasks < 1 || o.space < 1 || o.batch < 1 || o.seconds <= 0) {
    std::fprintf(stderr, "kiln_lease_sim: workers, tasks, space, batch and seconds must be > 0\n");
    return 2;
  }
  std::unique_ptr<kiln::testing::PgServer> server;
  if (o.url.empty()) {
    std::string why;
    kiln::testing::PgServer::Options so;
    so.max_connections = o.workers + 20;
    so.durable = true;
    server = kiln::testing::PgServer::start(so, &why);
    if (!server) {
      std::fprintf(stderr, "kiln_lease_sim: no PostgreSQL server could be started: %s\n",
                   why.c_str());
      return 77;
    }
    o.url = server->create_database();
  }
  std::printf(
      "lease sim: %d workers, %.0f s, %d tasks x %d configs, batch %d, %.0f ms per "
      "measurement, %s\n",
      o.workers, o.seconds, o.tasks, o.space, o.batch, o.measure_ms, o.url.c_str());
  std::fflush(stdout);
  kiln::bench::LeaseSimReport r = kiln::bench::run_lease_sim(o);
  std::printf("%s", r.to_text().c_str());
  const bool ok = r.errors == 0 && r.duplicates == 0 && r.stored == r.records;
  if (!ok) std::printf("lease sim: FAILED\n");
  return ok ? 0 : 1;
}
