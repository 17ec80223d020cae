// Temporaries of interrupted and killed kiln processes (issue 13, item 9).
//
// 1. A kiln build (or tune) ended by SIGTERM, SIGINT or SIGHUP while its
//    temporaries exist ends by that signal and leaves nothing: no OUT.tmpPID,
//    no $TMPDIR/kiln-*-PID-* folder, no linker still running. The tests stop
//    kiln at a known point with the test-only KILN_TEST_PAUSE_AT
//    (support/temp_files.h) or with a slow stand-in linker (CC).
// 2. What a process killed without a chance to clean up (SIGKILL) left is
//    removed by the next kiln build/tune when its pid is gone and it is older
//    than a minute; anything of a live process is kept.
// Every test points TMPDIR at a private folder.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <random>
#include <thread>

#include "driver_harness.h"
#include "support/stale_temps.h"
#include "support/temp_files.h"

namespace kiln::test {
namespace {

using namespace std::chrono_literals;

// x[1, 8, 6, 6] -> Conv 3x3 (8 -> 16) -> Relu -> y.
OnnxBuilder conv_model() {
  std::mt19937 rng(5);
  OnnxBuilder b;
  b.input("x", {"1", "8", "6", "6"});
  b.output("y", {"1", "16", "6", "6"});
  conv(b, "conv1", "x", "c", {8, 16}, rng);
  b.node("Relu", "relu1", {"c"}, {"y"});
  return b;
}

// A pid that names no process: a child, reaped.
pid_t dead_pid() {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int status;
  waitpid(pid, &status, 0);
  return pid;
}

void make_old(const fs::path& p) {
  fs::last_write_time(p, fs::file_time_type::clock::now() - 2min);
}

bool file_contains(const std::string& path, const std::string& needle) {
  return read_bytes(path).find(needle) != std::string::npos;
}

// The entries of `dir` whose names start with `prefix`.
std::vector<std::string> entries_with(const fs::path& dir, const std::string& prefix) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename();
    if (n.compare(0, prefix.size(), prefix) == 0) out.push_back(n);
  }
  return out;
}

class TempsTest : public ::testing::Test {
 protected:
  // Starts `kiln ARGS...` with TMPDIR=tmp_ and `env` (NAME=VALUE) added,
  // stdout and stderr into capture_.
  pid_t start_kiln(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    std::string out = capture_.file("stdout"), err = capture_.file("stderr");
    fs::remove(out);
    fs::remove(err);  // a previous run's "test pause at" line
    pid_t pid = fork();
    if (pid == 0) {
      setenv("TMPDIR", tmp_.path().c_str(), 1);
      for (int sig : {SIGINT, SIGTERM, SIGHUP}) signal(sig, SIG_DFL);  // e.g. under nohup
      for (const std::string& e : env) putenv(strdup(e.c_str()));
      if (!freopen(out.c_str(), "w", stdout) || !freopen(err.c_str(), "w", stderr)) _exit(126);
      std::vector<char*> argv = {const_cast<char*>(KILN_BINARY)};
      for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(KILN_BINARY, argv.data());
      _exit(127);
    }
    return pid;
  }

  // Waits (two minutes at most) until `ready()`, or the process ended.
  template <class F>
  bool wait_until(pid_t pid, F ready) {
    auto deadline = std::chrono::steady_clock::now() + 120s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (ready()) return true;
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        ADD_FAILURE() << "kiln ended before the point; stderr: "
                      << read_bytes(capture_.file("stderr"));
        return false;
      }
      std::this_thread::sleep_for(20ms);
    }
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    ADD_FAILURE() << "kiln never reached the point";
    return false;
  }

  // Sends `sig` and expects kiln to end by it (not by an exit).
  void expect_killed_by(pid_t pid, int sig) {
    ASSERT_EQ(kill(pid, sig), 0);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status)
                                     << "; stderr: " << read_bytes(capture_.file("stderr"));
    EXPECT_EQ(WTERMSIG(status), sig);
  }

  void SetUp() override {
    model_ = work_.file("m.onnx");
    write_bytes(model_, conv_model().bytes());
  }

  ScratchDir work_, tmp_, capture_;
  std::string model_;
};

using KilnBuildTemps = TempsTest;
using KilnTuneTemps = TempsTest;

// The registry itself: a process with a folder (holding a sub-folder) and a
// file registered, killed by SIGTERM, removes both and ends by SIGTERM.
TEST_F(KilnBuildTemps, SignalHandlerRemovesRegisteredPathsAndReraises) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    close(fds[0]);
    setenv("TMPDIR", tmp_.path().c_str(), 1);
    support::install_cleanup_handlers();
    support::TempDir dir("build");
    fs::create_directories(dir.path() / "sub" / "deeper");
    for (const char* f : {"a", "sub/b", "sub/deeper/c"}) write_bytes(dir.path() / f, "x");
    support::TempFile file(work_.path() / ("out.tar.tmp" + std::to_string(getpid())));
    write_bytes(file.path(), "partial");
    char ok = 1;
    if (write(fds[1], &ok, 1) != 1) _exit(3);
    pause();
    _exit(2);
  }
  close(fds[1]);
  char ok = 0;
  ASSERT_EQ(read(fds[0], &ok, 1), 1);
  close(fds[0]);
  EXPECT_EQ(entries_with(tmp_.path(), "kiln-build-" + std::to_string(pid) + "-").size(), 1u);
  EXPECT_TRUE(fs::exists(work_.file("out.tar.tmp" + std::to_string(pid))));
  expect_killed_by(pid, SIGTERM);
  EXPECT_TRUE(tmp_.entries().empty()) << tmp_.entries().front();
  EXPECT_TRUE(work_.entries() == std::vector<std::string>{"m.onnx"});
}

// 1. SIGTERM, Ctrl-C and SIGHUP while the package is being written.
TEST_F(KilnBuildTemps, KilledWhileWritingThePackageLeavesNothing) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) {
    SCOPED_TRACE(strsignal(sig));
    std::string out = work_.file("out.tar");
    pid_t pid = start_kiln({"build", model_, "-o", out}, {"KILN_TEST_PAUSE_AT=write_package"});
    std::string tmp_name = "out.tar.tmp" + std::to_string(pid);
    if (!wait_until(pid, [&] {
          return file_contains(capture_.file("stderr"), "test pause at write_package");
        }))
      return;
    // The temporaries exist at that point...
    EXPECT_TRUE(fs::exists(work_.file(tmp_name)));
    EXPECT_EQ(entries_with(tmp_.path(), "kiln-build-" + std::to_string(pid) + "-").size(), 1u);
    // ...and are gone once the signal has ended kiln.
    expect_killed_by(pid, sig);
    EXPECT_EQ(work_.entries(), std::vector<std::string>{"m.onnx"});
    EXPECT_TRUE(tmp_.entries().empty()) << "left in TMPDIR: " << tmp_.entries().front();
  }
}

// A linker still running when kiln is killed is killed too, and what it was
// writing (OUT.tmpPID of a self-contained .so package) is removed.
TEST_F(KilnBuildTemps, KilledWhileLinkingKillsTheLinkerAndLeavesNothing) {
  std::string marker = work_.file("linker.pid");
  std::string slow_cc = work_.file("slow-cc");
  {
    // "-shared -o OUT objects...": write part of OUT, then take long.
    std::ofstream f(slow_cc);
    f << "#!/bin/sh\necho partial > \"$3\"\necho $$ > '" << marker << ".part'\nmv '" << marker
      << ".part' '" << marker << "'\nexec sleep 60\n";
  }
  fs::permissions(slow_cc, fs::perms::owner_all);
  std::string out = work_.file("out.so");
  pid_t pid = start_kiln({"build", model_, "-o", out, "--output-format", "so"}, {"CC=" + slow_cc});
  if (!wait_until(pid, [&] { return fs::exists(marker); })) return;
  std::string tmp_name = "out.so.tmp" + std::to_string(pid);
  EXPECT_TRUE(fs::exists(work_.file(tmp_name)));
  long linker = std::stol(read_bytes(marker));
  expect_killed_by(pid, SIGTERM);
  EXPECT_FALSE(fs::exists(work_.file(tmp_name)));
  EXPECT_FALSE(fs::exists(out));
  EXPECT_TRUE(tmp_.entries().empty()) << "left in TMPDIR: " << tmp_.entries().front();
  // The linker (exec'd into sleep) was killed and reaped by kiln.
  EXPECT_TRUE(kill(pid_t(linker), 0) != 0 && errno == ESRCH) << "linker " << linker << " lives";
}

// 2. Leftovers of dead processes are swept by the next build; those of a live
// process, fresh ones, and names kiln does not own are kept.
TEST_F(KilnBuildTemps, NextBuildSweepsLeftoversOfDeadProcessesOnly) {
  pid_t dead = dead_pid();
  std::string me = std::to_string(getpid()), gone = std::to_string(dead);
  auto mkdir_old = [&](const std::string& name, bool old = true) {
    fs::path p = tmp_.path() / name;
    fs::create_directories(p);
    write_bytes(p / "mod.so", "x");
    if (old) make_old(p);
  };
  auto file_old = [&](const std::string& name, bool old = true) {
    write_bytes(work_.file(name), "partial");
    if (old) make_old(work_.file(name));
  };
  for (const char* kind : {"build", "link", "measure", "ref", "package"})
    mkdir_old(std::string("kiln-") + kind + "-" + gone + "-abc123");
  mkdir_old("kiln-build-" + me + "-live01");           // a live pid: kept
  mkdir_old("kiln-build-" + gone + "-fresh1", false);  // too recent: kept
  mkdir_old("kiln-notours-" + gone + "-abc123");       // not a kiln temporary: kept
  file_old("out.tar.tmp" + gone);                      // removed
  file_old("out.tar.tmp" + me);                        // a live pid: kept
  file_old("other.tar.tmp" + gone);                    // another output's: kept
  file_old("out.tar.tmp" + gone + "x");                // not OUT.tmpPID: kept

  CommandResult r =
      run_kiln("build " + quote(model_) + " -o " + quote(work_.file("out.tar")), tmp_, capture_);
  ASSERT_EQ(r.status, 0) << r.err;
  std::vector<std::string> kept = {"kiln-build-" + gone + "-fresh1", "kiln-build-" + me + "-live01",
                                   "kiln-notours-" + gone + "-abc123"};
  std::sort(kept.begin(), kept.end());
  EXPECT_EQ(tmp_.entries(), kept);
  std::vector<std::string> files = {"m.onnx", "other.tar.tmp" + gone, "out.tar",
                                    "out.tar.tmp" + gone + "x", "out.tar.tmp" + me};
  std::sort(files.begin(), files.end());
  EXPECT_EQ(work_.entries(), files);
}

// kiln run (and kiln-run, the same code) sweeps too: the runtime's package
// folders of a killed run, before it loads the package.
TEST_F(KilnBuildTemps, KilnRunSweepsPackageFoldersOfDeadProcesses) {
  std::string gone = std::to_string(dead_pid());
  fs::path stale = tmp_.path() / ("kiln-package-" + gone + "-abc123");
  fs::create_directories(stale);
  write_bytes(stale / "mod.so", "x");
  make_old(stale);
  CommandResult r = run_kiln("run " + quote(work_.file("missing.tar")), tmp_, capture_);
  EXPECT_NE(r.status, 0);
  EXPECT_TRUE(tmp_.entries().empty()) << "left in TMPDIR: " << tmp_.entries().front();
}

TEST_F(KilnBuildTemps, NamesOfTemporaries) {
  EXPECT_EQ(support::pid_of_temp_name("kiln-build-123-abcdef"), 123);
  EXPECT_EQ(support::pid_of_temp_name("kiln-ref-7-x"), 7);
  EXPECT_EQ(support::pid_of_temp_name("kiln-build-abcdef"), -1);  // the old, pid-less names
  EXPECT_EQ(support::pid_of_temp_name("kiln-build-123"), -1);
  EXPECT_EQ(support::pid_of_temp_name("kiln-serve-123-x"), -1);  // the worker sweeps its own
  EXPECT_EQ(support::pid_of_output_temp("a.tar.tmp42", "a.tar"), 42);
  EXPECT_EQ(support::pid_of_output_temp("a.tar.tmp", "a.tar"), -1);
  EXPECT_EQ(support::pid_of_output_temp("a.tar.tmp4x", "a.tar"), -1);
  EXPECT_EQ(support::pid_of_output_temp("b.tar.tmp42", "a.tar"), -1);
  EXPECT_FALSE(support::process_is_gone(getpid()));
  EXPECT_FALSE(support::process_is_gone(1));  // init: alive (EPERM or not)
  EXPECT_TRUE(support::process_is_gone(dead_pid()));
}

// 1 and 2 for kiln tune: stale measure and reference folders of a dead tune
// are swept by the next one, and SIGTERM with a batch folder and the
// reference cache in place leaves nothing.
TEST_F(KilnTuneTemps, KilledWhileMeasuringLeavesNothingAndLeftoversAreSwept) {
  pid_t dead = dead_pid();
  std::string gone = std::to_string(dead);
  for (const char* name : {"kiln-measure-", "kiln-ref-"}) {
    fs::path p = tmp_.path() / (name + gone + "-abc123");
    fs::create_directories(p);
    write_bytes(p / "x", "x");
    make_old(p);
  }
  std::string db = work_.file("tuning.db");
  pid_t pid = start_kiln({"tune", model_, "--tuning-log", db, "--trials", "2", "--batch", "2",
                          "--repeat", "1", "--min-repeat-ms", "0", "--tuner", "random"},
                         {"KILN_TEST_PAUSE_AT=measure", "KILN_LOGS_DIR=" + work_.path().string()});
  if (!wait_until(pid,
                  [&] { return file_contains(capture_.file("stderr"), "test pause at measure"); }))
    return;
  std::string mine = "-" + std::to_string(pid) + "-";
  EXPECT_EQ(entries_with(tmp_.path(), "kiln-measure" + mine).size(), 1u);
  EXPECT_EQ(entries_with(tmp_.path(), "kiln-ref" + mine).size(), 1u);
  EXPECT_TRUE(entries_with(tmp_.path(), "kiln-measure-" + gone).empty()) << "not swept";
  EXPECT_TRUE(entries_with(tmp_.path(), "kiln-ref-" + gone).empty()) << "not swept";
  expect_killed_by(pid, SIGTERM);
  EXPECT_TRUE(tmp_.entries().empty()) << "left in TMPDIR: " << tmp_.entries().front();
}

}  // namespace
}  // namespace kiln::test
