#include "tuner/remote_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>

#include "tuner/measure_worker.h"

extern char** environ;

namespace kiln::tuner {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kStderrTail = 4000;

Clock::time_point deadline_after(double s) {
  if (!std::isfinite(s)) return Clock::time_point::max();
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(std::max(0.0, s)));
}

int poll_ms(Clock::time_point deadline) {
  double ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
  return int(std::clamp(std::ceil(ms), 0.0, 100.0));
}

std::string shorten(std::string s, size_t n = 300) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s.size() > n ? s.substr(0, n) + "..." : s;
}

// Writing to a runner that has died raises SIGPIPE: blocked in this thread
// while we write, and a pending one is consumed, so that it is an EPIPE only.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE)) {
      timespec zero = {0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) < 0 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

enum class Io { kLine, kEof, kTimeout };

}  // namespace

RemoteRunner::RemoteRunner(std::string command, double start_timeout_s)
    : command_(std::move(command)), start_timeout_s_(start_timeout_s) {}

RemoteRunner::~RemoteRunner() { stop(/*kill_now=*/false); }

// Writes `payload` to the runner's stdin while collecting its stdout (up to
// the first complete line) and stderr, until the line, EOF on stdout or the
// deadline.
static Io exchange(int in, int out, int err, const std::string& payload, std::string& out_buf,
                   std::string& err_tail, std::string& line, Clock::time_point deadline) {
  SigpipeGuard guard;
  size_t written = 0;
  bool writing = !payload.empty() && in >= 0;
  bool err_open = err >= 0;
  for (;;) {
    size_t nl = out_buf.find('\n');
    if (nl != std::string::npos) {
      line = out_buf.substr(0, nl);
      out_buf.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return Io::kLine;
    }
    if (Clock::now() >= deadline) return Io::kTimeout;
    pollfd fds[3] = {
        {out, POLLIN, 0}, {err_open ? err : -1, POLLIN, 0}, {writing ? in : -1, POLLOUT, 0}};
    int n = poll(fds, 3, std::max(1, poll_ms(deadline)));
    if (n < 0 && errno != EINTR) return Io::kEof;
    if (n <= 0) continue;
    char buf[65536];
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      ssize_t got = read(out, buf, sizeof buf);
      if (got > 0)
        out_buf.append(buf, size_t(got));
      else if (got == 0 || (errno != EINTR && errno != EAGAIN))
        return Io::kEof;
    }
    if (fds[1].fd >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      ssize_t got = read(err, buf, sizeof buf);
      if (got > 0) {
        err_tail.append(buf, size_t(got));
        if (err_tail.size() > 2 * kStderrTail) err_tail.erase(0, err_tail.size() - kStderrTail);
      } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
        err_open = false;
      }
    }
    if (fds[2].fd >= 0 && (fds[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t put = write(in, payload.data() + written, payload.size() - written);
      if (put > 0) {
        written += size_t(put);
        writing = written < payload.size();
      } else if (put < 0 && errno != EINTR && errno != EAGAIN) {
        writing = false;  // EPIPE: the runner is gone; its stdout tells the rest
      }
    }
  }
}

void RemoteRunner::start() {
  int in[2], out[2], err[2];
  if (pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  if (pipe2(out, O_CLOEXEC) != 0) {
    close(in[0]);
    close(in[1]);
    throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  }
  if (pipe2(err, O_CLOEXEC) != 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
    throw std::runtime_error("pipe: " + std::string(strerror(errno)));
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);  // killed as a group: sh, qemu or ssh, the server
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  const char* argv[] = {"/bin/sh", "-c", command_.c_str(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, const_cast<char**>(argv), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in[0]);
  close(out[1]);
  close(err[1]);
  if (rc != 0) {
    for (int fd : {in[1], out[0], err[0]}) close(fd);
    throw std::runtime_error("cannot start the runner '" + command_ + "': " + strerror(rc));
  }
  fcntl(in[1], F_SETFL, fcntl(in[1], F_GETFL) | O_NONBLOCK);
  pid_ = pid;
  in_ = in[1];
  out_ = out[0];
  err_ = err[0];
  out_buf_.clear();
  err_tail_.clear();
  reaped_ = false;
  ++starts_;

  // The hello line; anything else it prints first (a login banner) is skipped.
  auto deadline = deadline_after(start_timeout_s_);
  std::string skipped;
  for (;;) {
    std::string line;
    Io io = exchange(in_, out_, err_, "", out_buf_, err_tail_, line, deadline);
    if (io == Io::kLine) {
      json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_object() && j.value("kiln_measure_worker", std::string()) == "serve") {
        if (!j.contains("protocol") || j["protocol"] != 1) {
          stop(/*kill_now=*/true);
          throw std::runtime_error("the runner '" + command_ + "' speaks protocol " +
                                   j.value("protocol", json()).dump() + ", kiln speaks 1");
        }
        hello_.arch = j.value("arch", std::string());
        hello_.features = j.value("features", std::vector<std::string>());
        hello_.num_threads = j.value("num_threads", 0);
        hello_.isolation = j.value("isolation", std::string());
        return;
      }
      if (skipped.size() < 1000) skipped += (skipped.empty() ? "" : " | ") + shorten(line, 200);
      continue;
    }
    stop(/*kill_now=*/true);
    std::string why = io == Io::kTimeout
                          ? "printed no hello line within " + json(start_timeout_s_).dump() + " s"
                          : status_text() + " before its hello line";
    if (!skipped.empty()) why += "; it printed: " + skipped;
    std::string err = shorten(err_tail_, kStderrTail);
    throw std::runtime_error("the runner '" + command_ + "' " + why +
                             (err.empty() ? "" : "; stderr: " + err) +
                             " (it must start `kiln-measure-worker --serve` on the device)");
  }
}

void RemoteRunner::stop(bool kill_now) {
  if (pid_ < 0) return;
  if (in_ >= 0) close(in_);  // EOF: a healthy server exits 0
  in_ = -1;
  auto deadline = deadline_after(kill_now ? 0 : 2);
  for (;;) {
    pid_t w = waitpid(pid_, &exit_status_, WNOHANG);
    if (w == pid_) {
      reaped_ = true;
      break;
    }
    if (w < 0 && errno != EINTR) break;
    if (Clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  kill(-pid_, SIGKILL);  // whatever is left of its process group
  if (!reaped_) {
    kill(pid_, SIGKILL);
    while (waitpid(pid_, &exit_status_, 0) < 0 && errno == EINTR) {
    }
  }
  // What it said on stderr before it went (briefly: a grandchild in another
  // process group, such as a remote shell, may hold the pipe open).
  auto drain_until = deadline_after(0.2);
  while (err_ >= 0 && Clock::now() < drain_until) {
    pollfd p = {err_, POLLIN, 0};
    if (poll(&p, 1, std::max(1, poll_ms(drain_until))) <= 0) continue;
    char buf[4096];
    ssize_t got = read(err_, buf, sizeof buf);
    if (got <= 0) break;
    err_tail_.append(buf, size_t(got));
  }
  if (err_tail_.size() > kStderrTail) err_tail_.erase(0, err_tail_.size() - kStderrTail);
  for (int* fd : {&out_, &err_})
    if (*fd >= 0) {
      close(*fd);
      *fd = -1;
    }
  pid_ = -1;
}

std::string RemoteRunner::status_text() {
  if (WIFSIGNALED(exit_status_))
    return "was killed by " + signal_description(WTERMSIG(exit_status_));
  if (WIFEXITED(exit_status_))
    return "exited with status " + std::to_string(WEXITSTATUS(exit_status_));
  return "ended";
}

const RemoteRunner::Hello& RemoteRunner::hello() {
  if (pid_ < 0) start();
  return hello_;
}

RemoteRunner::Reply RemoteRunner::request(const std::string& header, const std::string& payload,
                                          double timeout_s) {
  if (pid_ < 0) start();
  Reply r;
  auto t0 = Clock::now();
  std::string line;
  Io io = exchange(in_, out_, err_, header + "\n" + payload, out_buf_, err_tail_, line,
                   deadline_after(timeout_s));
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  auto fail = [&](std::string why) {
    std::string err = shorten(err_tail_, 2000);
    r.error = "the runner " + why + (err.empty() ? "" : "; stderr: " + err);
    return r;
  };
  if (io == Io::kLine) {
    json j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_object() && j.contains("status") && j["status"].is_string()) {
      r.line = line;
      err_tail_.clear();  // what it said so far belongs to this candidate
      // A server without fork isolation ends after a crash or a timeout: wait for it,
      // and start it again with the next request.
      if (j.value("fatal", false)) stop(/*kill_now=*/false);
      return r;
    }
    stop(/*kill_now=*/true);
    return fail("printed '" + shorten(line) + "' instead of a result line (restarted)");
  }
  if (io == Io::kTimeout) {
    stop(/*kill_now=*/true);
    r.timed_out = true;
    return fail("gave no result within " + json(timeout_s).dump() + " s and was killed");
  }
  stop(/*kill_now=*/false);
  return fail(status_text() + " without a result (restarted)");
}

}  // namespace kiln::tuner
