#include "support/temp_files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace kiln::support {
namespace {

// One registered path. gen is odd while the slot is being written or
// cleared; used says whether path holds a registered path.
struct Slot {
  std::atomic<uint32_t> gen{0};
  std::atomic<int> state{0};  // 0 free, 1 claimed (being written), 2 registered
  char path[kMaxPath];
};

Slot g_slots[kMaxTemps];
std::atomic<pid_t> g_children[kMaxChildren];
std::atomic<bool> g_handling{false};
std::atomic<bool> g_installed{false};

static_assert(std::atomic<pid_t>::is_always_lock_free && std::atomic<int>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "the signal handler needs lock-free atomics");

// ---- async-signal-safe removal ------------------------------------------------

struct Dirent64 {  // struct linux_dirent64 (getdents64(2))
  uint64_t d_ino;
  int64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

bool dot_or_dotdot(const char* n) { return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2])); }

// Removes `name` (relative to dirfd) and, for a folder, what it holds, down to
// a few levels (kiln's temporaries are one level deep). Signal-safe.
void remove_tree(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
  if (depth < 6) {
    int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      // Removing entries while reading can make getdents skip some: read
      // again from the start until a pass removes nothing.
      for (int pass = 0; pass < 4; ++pass) {
        bool removed = false;
        ::lseek(fd, 0, SEEK_SET);
        alignas(8) char buf[2048];
        for (;;) {
          long n = ::syscall(SYS_getdents64, fd, buf, sizeof buf);
          if (n <= 0) break;
          for (long off = 0; off < n;) {
            auto* d = reinterpret_cast<Dirent64*>(buf + off);
            off += d->d_reclen;
            if (dot_or_dotdot(d->d_name)) continue;
            remove_tree(fd, d->d_name, depth + 1);
            removed = true;
          }
        }
        if (!removed) break;
      }
      ::close(fd);
    }
  }
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

void kill_children() {
  for (auto& c : g_children) {
    pid_t pid = c.load();
    if (pid <= 0) continue;
    ::kill(-pid, SIGKILL);  // its process group (a linker's own children)
    ::kill(pid, SIGKILL);
  }
  for (auto& c : g_children) {
    pid_t pid = c.load();
    if (pid <= 0) continue;
    int status;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

void remove_registered() {
  char copy[kMaxPath];
  for (Slot& s : g_slots) {
    uint32_t g = s.gen.load(std::memory_order_acquire);
    if ((g & 1) || s.state.load(std::memory_order_acquire) != 2) continue;
    std::memcpy(copy, s.path, kMaxPath);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.gen.load(std::memory_order_relaxed) != g) continue;  // changed while copied
    copy[kMaxPath - 1] = '\0';
    if (copy[0] == '/') remove_tree(AT_FDCWD, copy, 0);
  }
}

extern "C" void kiln_cleanup_on_signal(int sig) {
  int saved_errno = errno;
  // Another thread is already cleaning up (and will end the process).
  if (g_handling.exchange(true)) {
    errno = saved_errno;
    return;
  }
  kill_children();
  remove_registered();
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(sig, &dfl, nullptr);
  // Pending until the handler returns (the signal is blocked in it), then
  // delivered with the default action: the process ends by `sig`.
  ::raise(sig);
  errno = saved_errno;
}

}  // namespace

int register_temp(const std::string& path) {
  if (path.empty() || path.size() >= size_t(kMaxPath) || path[0] != '/') return -1;
  for (int i = 0; i < kMaxTemps; ++i) {
    Slot& s = g_slots[i];
    int expected = 0;
    if (!s.state.compare_exchange_strong(expected, 1)) continue;
    s.gen.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    std::memcpy(s.path, path.c_str(), path.size() + 1);
    s.gen.fetch_add(1, std::memory_order_release);  // even
    s.state.store(2, std::memory_order_release);
    return i;
  }
  return -1;
}

void unregister_temp(int slot) {
  if (slot < 0 || slot >= kMaxTemps) return;
  Slot& s = g_slots[slot];
  s.gen.fetch_add(1, std::memory_order_acq_rel);  // odd: no longer readable
  s.path[0] = '\0';
  s.gen.fetch_add(1, std::memory_order_release);
  s.state.store(0, std::memory_order_release);
}

int registered_temp_count() {
  int n = 0;
  for (const Slot& s : g_slots) n += s.state.load() == 2;
  return n;
}

void register_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t expected = 0;
    if (c.compare_exchange_strong(expected, pid)) return;
  }
}

void unregister_child(pid_t pid) {
  for (auto& c : g_children) {
    pid_t expected = pid;
    if (c.compare_exchange_strong(expected, 0)) return;
  }
}

void install_cleanup_handlers() {
  if (g_installed.exchange(true)) return;
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = kiln_cleanup_on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&sa.sa_mask, sig);
  sa.sa_flags = SA_RESTART;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old;
    if (::sigaction(sig, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) continue;
    ::sigaction(sig, &sa, nullptr);
  }
}

TempDir::TempDir(const std::string& kind) {
  std::string tmpl = (std::filesystem::temp_directory_path() /
                      ("kiln-" + kind + "-" + std::to_string(::getpid()) + "-XXXXXX"))
                         .string();
  if (!::mkdtemp(tmpl.data()))
    throw std::runtime_error("cannot create a temporary directory in " +
                             std::filesystem::temp_directory_path().string() + ": " +
                             std::strerror(errno));
  path_ = std::filesystem::absolute(tmpl);
  slot_ = register_temp(path_.string());
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  unregister_temp(slot_);
}

TempFile::TempFile(std::filesystem::path path) : path_(std::filesystem::absolute(path)) {
  slot_ = register_temp(path_.string());
}

TempFile::~TempFile() {
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  unregister_temp(slot_);
}

std::filesystem::path temp_path_beside(const std::filesystem::path& path) {
  std::filesystem::path tmp = std::filesystem::absolute(path);
  tmp += ".tmp" + std::to_string(::getpid());
  return tmp;
}

void test_pause_point(const char* point) {
  const char* at = std::getenv("KILN_TEST_PAUSE_AT");
  if (!at || std::strcmp(at, point) != 0) return;
  std::fprintf(stderr, "kiln: test pause at %s\n", point);
  std::fflush(stderr);
  for (int i = 0; i < 600; ++i) ::usleep(100000);
}

}  // namespace kiln::support
