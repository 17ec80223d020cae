// kiln's temporary files and folders, and their removal when kiln is killed.
//
// Every temporary kiln creates (the package writer's and the linker's
// folders, OUT.tmp<pid> beside a package being written, the tuner's batch
// folders and reference cache) is a TempDir or a TempFile: RAII objects that
// register their path in a fixed table on creation and remove the path (and
// unregister it) on destruction, so that normal returns and exceptions clean
// up as before.
//
// install_cleanup_handlers() (called by the kiln CLI) installs a handler for
// SIGINT, SIGTERM and SIGHUP that, still inside the signal handler,
//   1. kills the helper processes run_process() is running (the linker, a
//      measurement worker: they lead process groups of their own, so a
//      terminal's Ctrl-C never reaches them) and reaps them, so that no
//      linker writes OUT.tmp<pid> after it was removed;
//   2. removes every registered path, folders recursively;
//   3. restores the default action and raises the signal again, so that the
//      exit status stays "killed by signal N" (128+N in a shell).
// Everything the handler does is async-signal-safe: the table is a fixed
// array of C strings guarded by per-slot atomics (no allocation, no locks),
// and the recursive removal uses only openat/getdents64/unlinkat/close (raw
// system calls; opendir/readdir and std::filesystem are not safe there).
// A slot is read into a local copy and used only when its generation did not
// change while it was copied, so a path being registered or unregistered by
// another thread at that moment is never half-read.
//
// Commands that handle a signal themselves keep doing so (kiln tune turns
// Ctrl-C into "stop after the measurement in flight" and its temporaries go
// by normal unwinding): they replace the handler for that signal while they
// run and restore it afterwards.
//
// Gaps, covered by the sweep of stale temporaries at the next start
// (support/stale_temps.h): SIGKILL and crashes, the moment between creating a
// temporary and registering it, a table full (kMaxTemps) or a path longer
// than kMaxPath.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace kiln::support {

inline constexpr int kMaxTemps = 256;
inline constexpr int kMaxPath = 1024;
inline constexpr int kMaxChildren = 128;

// Registers `path` for removal by the signal handler; returns its slot, or
// -1 when it could not be registered (table full, path too long).
int register_temp(const std::string& path);
// Forgets slot `slot` (-1 is ignored).
void unregister_temp(int slot);
// The paths registered now (for tests and debugging).
int registered_temp_count();

// A running helper process (the leader of its own process group) that the
// handler kills before it removes the temporaries.
void register_child(pid_t pid);
void unregister_child(pid_t pid);

// Installs the handler for SIGINT, SIGTERM and SIGHUP (a signal the caller
// ignores, e.g. SIGHUP under nohup, stays ignored). Idempotent.
void install_cleanup_handlers();

// $TMPDIR/kiln-<kind>-<pid>-XXXXXX (std::filesystem::temp_directory_path(),
// which honours TMPDIR), removed with its contents when this goes out of
// scope, and by the signal handler.
class TempDir {
 public:
  explicit TempDir(const std::string& kind);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int slot_ = -1;
};

// A file path that may come to exist (OUT.tmp<pid>, written by this process
// or by the linker it runs): removed, if it is still there, when this goes out
// of scope and by the signal handler. Rename it away to keep the contents.
class TempFile {
 public:
  explicit TempFile(std::filesystem::path path);
  ~TempFile();
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int slot_ = -1;
};

// "<path>.tmp<pid>": where `path` is written before it is renamed into place.
std::filesystem::path temp_path_beside(const std::filesystem::path& path);

// Test only: with KILN_TEST_PAUSE_AT=`point` in the environment, says
// "kiln: test pause at POINT" on stderr and sleeps for up to a minute, so that
// a test can signal kiln at a known point (tests/driver/temp_cleanup_test.cc).
// Points: write_package (the package's OUT.tmp<pid> is open, its folders
// exist), measure (a batch folder and the reference cache exist, before the
// first worker starts).
void test_pause_point(const char* point);

}  // namespace kiln::support
