// A throwaway PostgreSQL server for tests and the lease simulation.
//
// start() runs Debian's PostgreSQL 15 binaries (initdb, pg_ctl; another
// directory with KILN_PG_BIN): a cluster in a new temporary directory, owned
// by an unprivileged account (`nobody` when the tests run as root, since the
// server refuses to run as root), listening on 127.0.0.1 at a free port with
// its unix socket in that directory, trust authentication for the user
// "kiln". A watchdog shell started first holds the other end of a pipe: when
// this process ends in any way (destructor, crash, kill -9) the pipe closes and
// the watchdog stops the server and deletes the directory.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

namespace kiln::testing {

class PgServer {
 public:
  struct Options {
    int max_connections = 150;
    // false: fsync off (tests); true: the server's durable defaults (the simulation).
    bool durable = false;
  };
  // The server, or nullptr with *why_not saying why none could be started.
  static std::unique_ptr<PgServer> start(const Options& options, std::string* why_not);
  static std::unique_ptr<PgServer> start(std::string* why_not) { return start({}, why_not); }
  ~PgServer();  // stops the server and deletes its directory
  PgServer(const PgServer&) = delete;
  PgServer& operator=(const PgServer&) = delete;

  int port() const { return port_; }
  const std::string& dir() const { return dir_; }
  // postgresql://kiln@127.0.0.1:PORT/DB
  std::string url(const std::string& db = "postgres") const;
  // A new, empty database named kiln_test_N; returns its URL.
  std::string create_database();
  // Runs SQL through psql on a database; returns psql's output (rows unaligned,
  // '|'-separated) or throws std::runtime_error with psql's message.
  std::string psql(const std::string& db_url, const std::string& sql) const;

 private:
  PgServer() = default;
  std::string dir_, bin_, as_user_;  // as_user_: the setpriv prefix when root
  int port_ = 0;
  int watchdog_fd_ = -1;
  pid_t watchdog_pid_ = -1;
  int next_db_ = 0;
};

}  // namespace kiln::testing
