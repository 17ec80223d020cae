#include "support/process.h"

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
#include <thread>

#include "support/temp_files.h"

extern char** environ;

namespace kiln::support {
namespace {

void kill_group(pid_t pid) {
  kill(-pid, SIGKILL);  // the worker leads its own process group
  kill(pid, SIGKILL);
}

}  // namespace

// Runs argv with its stdout and stderr captured, killing it (and its process
// group) once timeout_s of wall clock have passed.
ProcessResult run_process(const std::vector<std::string>& argv, double timeout_s) {
  using Clock = std::chrono::steady_clock;
  ProcessResult r;
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    r.spawn_error = std::string("pipe: ") + std::strerror(errno);
    close(out_pipe[0]);
    close(out_pipe[1]);
    return r;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);    // the tuner's blocked signals stay its own
  posix_spawnattr_setsigdefault(&attr, &all);  // and so do its ignored ones
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);

  auto t0 = Clock::now();
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    r.spawn_error = "cannot start " + argv[0] + ": " + std::strerror(rc);
    close(out_pipe[0]);
    close(err_pipe[0]);
    return r;
  }
  register_child(pid);  // killed by kiln's signal handler (support/temp_files.h)

  auto deadline = std::isfinite(timeout_s) ? t0 + std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(timeout_s))
                                           : Clock::time_point::max();
  auto past_deadline = [&] { return Clock::now() >= deadline; };
  auto poll_ms = [&] {  // rounded up, so that polling never ends before the deadline
    double ms = std::chrono::duration<double, std::milli>(deadline - Clock::now()).count();
    return int(std::clamp(std::ceil(ms), 1.0, 100.0));
  };
  constexpr size_t kMaxCapture = 1 << 20;  // a runaway worker cannot fill the tuner's memory
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&r.out, &r.err};
  int open_fds = 2;
  while (open_fds > 0 && !r.timed_out) {
    int n = poll(fds, 2, poll_ms());
    if (n < 0 && errno != EINTR) break;
    for (int i = 0; i < 2 && n > 0; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      char buf[4096];
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        if (sinks[i]->size() < kMaxCapture) sinks[i]->append(buf, size_t(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
    if (past_deadline()) r.timed_out = true;
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  // Both pipes closed (or the deadline passed): wait for the exit, still
  // bounded by the deadline, since a worker may close its output and go on.
  // The pid leaves kiln's signal handler's table (support/temp_files.h) before it
  // is reaped, so that the handler never kills a pid the system has reused.
  auto reap = [&] {
    unregister_child(pid);
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
    }
  };
  for (;;) {
    siginfo_t si{};
    int w = r.timed_out ? 0 : waitid(P_PID, id_t(pid), &si, WEXITED | WNOHANG | WNOWAIT);
    if (w == 0 && si.si_pid == pid) {  // exited, not yet reaped
      reap();
      break;
    }
    if (w < 0 && errno != EINTR) {
      unregister_child(pid);
      break;
    }
    if (r.timed_out || past_deadline()) {
      r.timed_out = true;
      kill_group(pid);
      reap();
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return r;
}

}  // namespace kiln::support
