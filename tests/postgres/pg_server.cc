#include "postgres/pg_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

extern char** environ;

namespace kiln::testing {
namespace {

namespace fs = std::filesystem;

// Single quotes for /bin/sh.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Runs a shell command; its exit status (-1 if it could not run).
int run_sh(const std::string& cmd) {
  int rc = std::system(cmd.c_str());
  return rc == -1 ? -1 : (WIFEXITED(rc) ? WEXITSTATUS(rc) : 128 + WTERMSIG(rc));
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string tail(const std::string& text, size_t n = 600) {
  return text.size() > n ? "..." + text.substr(text.size() - n) : text;
}

// A port nobody listens on right now (the kernel's pick for port 0).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

}  // namespace

std::unique_ptr<PgServer> PgServer::start(const Options& options, std::string* why_not) {
  auto fail = [&](const std::string& why) -> std::unique_ptr<PgServer> {
    if (why_not) *why_not = why;
    return nullptr;
  };
  std::unique_ptr<PgServer> s(new PgServer());
  const char* bin_env = std::getenv("KILN_PG_BIN");
  s->bin_ = bin_env && *bin_env ? bin_env : "/usr/lib/postgresql/15/bin";
  for (const char* tool : {"initdb", "pg_ctl", "postgres", "psql"})
    if (access((s->bin_ + "/" + tool).c_str(), X_OK) != 0)
      return fail("no PostgreSQL " + std::string(tool) + " in " + s->bin_ +
                  " (install Debian's postgresql, or set KILN_PG_BIN)");

  std::string tmpl = (fs::temp_directory_path() / "kiln-pg-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) return fail("cannot create a temporary directory");
  s->dir_ = tmpl;
  uid_t uid = geteuid();
  if (uid == 0) {
    // The server refuses to run as root: run every PostgreSQL tool as nobody.
    passwd* pw = getpwnam("nobody");
    if (!pw) {
      fs::remove_all(s->dir_);
      return fail(
          "running as root and there is no unprivileged account 'nobody' to run the "
          "server as");
    }
    if (chown(s->dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      fs::remove_all(s->dir_);
      return fail("cannot hand " + s->dir_ + " to nobody");
    }
    s->as_user_ = "setpriv --reuid=" + std::to_string(pw->pw_uid) +
                  " --regid=" + std::to_string(pw->pw_gid) + " --clear-groups -- ";
    // nobody must reach the directory: the temporary root is world-searchable.
  }
  chmod(s->dir_.c_str(), 0700);
  const std::string data = s->dir_ + "/data";

  // The watchdog first, so that nothing started below outlives this process.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    fs::remove_all(s->dir_);
    return fail("cannot create a pipe");
  }
  const std::string stop = s->as_user_ + sh_quote(s->bin_ + "/pg_ctl") + " -D " + sh_quote(data) +
                           " -m fast -w -t 20 stop >/dev/null 2>&1 || " + s->as_user_ +
                           sh_quote(s->bin_ + "/pg_ctl") + " -D " + sh_quote(data) +
                           " -m immediate -w stop >/dev/null 2>&1; rm -rf " + sh_quote(s->dir_);
  const std::string watchdog = "cat >/dev/null; if [ -f " + sh_quote(data + "/postmaster.pid") +
                               " ]; then " + stop + "; else rm -rf " + sh_quote(s->dir_) + "; fi";
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[0], 0);  // dup2 clears O_CLOEXEC on fd 0
  std::string sh = "/bin/sh", c = "-c";
  char* argv[] = {sh.data(), c.data(), const_cast<char*>(watchdog.c_str()), nullptr};
  int rc = posix_spawn(&s->watchdog_pid_, "/bin/sh", &fa, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[0]);
  if (rc != 0) {
    close(fds[1]);
    fs::remove_all(s->dir_);
    return fail("cannot start the watchdog shell");
  }
  s->watchdog_fd_ = fds[1];
  // From here on the destructor cleans up.

  const std::string initdb_log = s->dir_ + "/initdb.log";
  if (run_sh(s->as_user_ + sh_quote(s->bin_ + "/initdb") + " -D " + sh_quote(data) +
             " -U kiln -A trust --no-sync -E UTF8 --locale=C > " + sh_quote(initdb_log) +
             " 2>&1") != 0)
    return fail("initdb failed: " + tail(read_text(initdb_log)));

  std::string settings = "-c listen_addresses=127.0.0.1 -c max_connections=" +
                         std::to_string(options.max_connections) + " -k " + s->dir_;
  if (!options.durable)
    settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off";
  const std::string server_log = s->dir_ + "/server.log";
  // A port picked free may be taken before the server binds it: try a few.
  for (int attempt = 0; attempt < 5; ++attempt) {
    s->port_ = free_port();
    if (s->port_ == 0) return fail("cannot find a free port on 127.0.0.1");
    if (run_sh(s->as_user_ + sh_quote(s->bin_ + "/pg_ctl") + " -D " + sh_quote(data) + " -l " +
               sh_quote(server_log) + " -w -t 30 -o " +
               sh_quote("-p " + std::to_string(s->port_) + " " + settings) +
               " start >/dev/null 2>&1") == 0)
      return s;
  }
  return fail("the server did not start: " + tail(read_text(server_log)));
}

PgServer::~PgServer() {
  // Closing the pipe ends the watchdog's `cat`: it stops the server and
  // deletes the directory. Waiting for it makes that done when this returns.
  if (watchdog_fd_ >= 0) close(watchdog_fd_);
  if (watchdog_pid_ > 0) {
    int status = 0;
    waitpid(watchdog_pid_, &status, 0);
  }
}

std::string PgServer::url(const std::string& db) const {
  return "postgresql://kiln@127.0.0.1:" + std::to_string(port_) + "/" + db;
}

std::string PgServer::create_database() {
  std::string name = "kiln_test_" + std::to_string(++next_db_);
  psql(url(), "CREATE DATABASE " + name);
  return url(name);
}

std::string PgServer::psql(const std::string& db_url, const std::string& sql) const {
  // Through a file: no quoting of the SQL for the shell.
  static int n = 0;
  const std::string in =
      dir_ + "/q" + std::to_string(getpid()) + "_" + std::to_string(++n) + ".sql";
  const std::string out = in + ".out";
  {
    std::ofstream f(in);
    f << sql << "\n";
  }
  int rc = run_sh(sh_quote(bin_ + "/psql") + " -X -q -A -t -F '|' -v ON_ERROR_STOP=1 " +
                  sh_quote(db_url) + " -f " + sh_quote(in) + " > " + sh_quote(out) + " 2>&1");
  std::string text = read_text(out);
  std::remove(in.c_str());
  std::remove(out.c_str());
  if (rc != 0) throw std::runtime_error("psql failed (" + sql + "): " + text);
  return text;
}

}  // namespace kiln::testing
