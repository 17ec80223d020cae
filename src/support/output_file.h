// Writing a command's output file (`build -o`, `run --output`, `quantize -o`,
// `records export -o`, `tune --report`) whole or not at all, without
// replacing what the path names when that is not a plain file:
//
//   a regular file, or nothing yet   written to "<path>.tmp<pid>" beside it and
//                                     renamed over it (a failure leaves the old
//                                     file untouched and no half-written one)
//   a symlink                        followed (all the way) to the file it names,
//                                     and that file replaced as above: the link
//                                     stays a link (a dangling link gets its
//                                     target created)
//   a character device or a FIFO     written through (/dev/null, a pipe, a tty):
//                                     opened for writing, never replaced
//   /dev/stdout, /dev/fd/N, ...      written to the descriptor itself
//   "-" (where the command allows)   written to stdout
//   a directory, a socket, a block   refused with an error naming the path
//   device
//
// A producer that writes its output file itself (the linker, the tar writer)
// is given output_temp_path(): beside the file, or a temporary under $TMPDIR for
// a stream (copied into it once complete, so a failed producer writes nothing
// there either).
//
// Header-only, so that the runtime-only kiln-run can use it.
#pragma once

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace kiln::support {

struct OutputTarget {
  enum class Kind {
    kFile,    // `path`: a regular file (symlinks followed) or one to be created
    kStream,  // `path`: a character device or FIFO, written through
    kFd,      // `fd`: stdout ("-", /dev/stdout), /dev/fd/N
  };
  Kind kind = Kind::kFile;
  std::string path;     // the file replaced, or the stream opened
  int fd = -1;          // kFd
  std::string display;  // the path as the user gave it, for messages
};

// "cannot write 'PATH': WHY"; `why` alone for callers that name the output their way.
struct OutputError : std::runtime_error {
  OutputError(const std::string& path, std::string why_)
      : std::runtime_error("cannot write '" + path + "': " + why_), why(std::move(why_)) {}
  std::string why;
};

namespace detail {

[[noreturn]] inline void output_error(const std::string& path, const std::string& why) {
  throw OutputError(path, why);
}

// N in "/dev/fd/N", "/proc/self/fd/N", "/proc/<our pid>/fd/N", /dev/stdout and
// /dev/stderr; else -1. These name a descriptor kiln already holds: writing to
// it keeps the caller's redirection (appending, a pipe) as it is.
inline int descriptor_path(const std::string& path) {
  if (path == "/dev/stdout") return 1;
  if (path == "/dev/stderr") return 2;
  for (std::string head : {std::string("/dev/fd/"), std::string("/proc/self/fd/"),
                           "/proc/" + std::to_string(::getpid()) + "/fd/"}) {
    if (path.size() <= head.size() || path.compare(0, head.size(), head) != 0) continue;
    std::string n = path.substr(head.size());
    if (n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) return -1;
    return std::atoi(n.c_str());
  }
  return -1;
}

// `path` with every symlink along its last component followed; the result
// is not a symlink (it may not exist). Throws on a loop.
inline std::filesystem::path follow_links(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = fs::absolute(path);
  for (int hops = 0;; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    if (hops >= 40) output_error(path, "too many levels of symbolic links");
    char buf[PATH_MAX];
    ssize_t n = ::readlink(p.c_str(), buf, sizeof buf - 1);
    if (n < 0) output_error(path, std::string("cannot read the link: ") + std::strerror(errno));
    fs::path to(std::string(buf, size_t(n)));
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  std::error_code ec;
  fs::path dir = fs::weakly_canonical(p.parent_path(), ec);
  return (ec ? p.parent_path() : dir) / p.filename();
}

inline void write_all(int fd, const char* data, size_t size, const std::string& display) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) output_error(display, std::strerror(n < 0 ? errno : EIO));
    data += n;
    size -= size_t(n);
  }
}

// Opens a kStream or kFd target for writing (a kFd one is dup'ed).
inline int open_stream(const OutputTarget& t) {
  int fd = t.kind == OutputTarget::Kind::kFd ? ::fcntl(t.fd, F_DUPFD_CLOEXEC, 3)
                                             : ::open(t.path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) output_error(t.display, std::strerror(errno));
  return fd;
}

inline void close_checked(int fd, const std::string& display) {
  if (::close(fd) != 0 && errno != EINTR) output_error(display, std::strerror(errno));
}

}  // namespace detail

// Where a write to `path` goes (see the top of this file). "-" is stdout
// only where `allow_stdout`; elsewhere it is refused (the command prints its
// summary there). Throws OutputError (a std::runtime_error) naming the path for a directory,
// a socket, a block device, a symlink loop.
inline OutputTarget resolve_output(const std::string& path, bool allow_stdout = false) {
  OutputTarget t;
  t.display = path;
  if (path.empty()) detail::output_error(path, "empty path");
  if (path == "-") {
    if (!allow_stdout)
      detail::output_error(path, "this output cannot go to stdout (give a file path)");
    t.kind = OutputTarget::Kind::kFd;
    t.fd = 1;
    return t;
  }
  if (int fd = detail::descriptor_path(path); fd >= 0) {
    t.kind = OutputTarget::Kind::kFd;
    t.fd = fd;
    return t;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) {
      t.kind = OutputTarget::Kind::kStream;
      t.path = path;
      return t;
    }
    if (S_ISDIR(st.st_mode)) detail::output_error(path, "it is a directory");
    if (!S_ISREG(st.st_mode))
      detail::output_error(path,
                           "it is not a regular file, a character device or a FIFO (a socket or "
                           "a block device): refusing to replace it");
  }
  t.kind = OutputTarget::Kind::kFile;
  t.path = detail::follow_links(path).string();
  return t;
}

// Where a producer writes the output before commit_output(): "<file>.tmp<pid>"
// beside a file (the name support/stale_temps.h sweeps), else a temporary under
// $TMPDIR (kiln-output-<pid>-N).
inline std::string output_temp_path(const OutputTarget& t) {
  if (t.kind == OutputTarget::Kind::kFile) return t.path + ".tmp" + std::to_string(::getpid());
  static std::atomic<int> counter{0};
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::temp_directory_path(ec);
  if (ec) dir = "/tmp";
  return (dir /
          ("kiln-output-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-out"))
      .string();
}

// Moves the finished temporary `tmp` to `t`: renamed over a file, copied into
// a stream or descriptor (and removed). Throws naming the output, with the
// reason; `tmp` is removed on failure too.
inline void commit_output(const std::string& tmp, const OutputTarget& t) {
  if (t.kind == OutputTarget::Kind::kFile) {
    if (std::rename(tmp.c_str(), t.path.c_str()) != 0) {
      int e = errno;
      ::unlink(tmp.c_str());
      detail::output_error(t.display, std::string("cannot rename the finished file into place: ") +
                                          std::strerror(e));
    }
    return;
  }
  struct Remove {
    const std::string& p;
    ~Remove() { ::unlink(p.c_str()); }
  } remove{tmp};
  int in = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0) detail::output_error(t.display, std::string(std::strerror(errno)));
  int out = -1;
  try {
    out = detail::open_stream(t);
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(in, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) detail::output_error(t.display, std::string(std::strerror(errno)));
      if (n == 0) break;
      detail::write_all(out, buf, size_t(n), t.display);
    }
    ::close(in);
    in = -1;
    int fd = out;
    out = -1;
    detail::close_checked(fd, t.display);
  } catch (...) {
    if (in >= 0) ::close(in);
    if (out >= 0) ::close(out);
    throw;
  }
}

// Writes `bytes` to `path` whole (see the top of this file).
inline void write_output_file(const OutputTarget& t, std::string_view bytes) {
  if (t.kind != OutputTarget::Kind::kFile) {
    int fd = detail::open_stream(t);
    try {
      detail::write_all(fd, bytes.data(), bytes.size(), t.display);
    } catch (...) {
      ::close(fd);
      throw;
    }
    detail::close_checked(fd, t.display);
    return;
  }
  std::string tmp = output_temp_path(t);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) detail::output_error(t.display, std::strerror(errno));
  try {
    detail::write_all(fd, bytes.data(), bytes.size(), t.display);
    int f = fd;
    fd = -1;
    detail::close_checked(f, t.display);
  } catch (...) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  commit_output(tmp, t);
}

inline void write_output_file(const std::string& path, std::string_view bytes,
                              bool allow_stdout = false) {
  write_output_file(resolve_output(path, allow_stdout), bytes);
}

// Checks, before the slow part, that `path` can be written: it resolves
// (resolve_output), a stream opens for writing, and a file's folder exists and
// takes a new file (probed by creating and removing the temporary, which also
// catches /proc and read-only mounts that access() would pass for root).
// Throws std::runtime_error naming the path and the reason.
inline OutputTarget check_output_writable(const std::string& path, bool allow_stdout = false) {
  OutputTarget t = resolve_output(path, allow_stdout);
  if (t.kind == OutputTarget::Kind::kFd) return t;
  if (t.kind == OutputTarget::Kind::kStream) {
    // A FIFO's open would wait for its reader: ask access() instead.
    if (::access(t.path.c_str(), W_OK) != 0) detail::output_error(path, std::strerror(errno));
    return t;
  }
  std::filesystem::path dir = std::filesystem::path(t.path).parent_path();
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0)
    detail::output_error(path, "folder '" + dir.string() + "' " +
                                   (errno == ENOENT ? std::string("does not exist")
                                                    : std::string(": ") + std::strerror(errno)));
  if (!S_ISDIR(st.st_mode)) detail::output_error(path, "'" + dir.string() + "' is not a folder");
  std::string probe = output_temp_path(t);
  int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    if (errno == EEXIST) return t;  // this process's own temporary: writable
    detail::output_error(path,
                         "cannot create a file in '" + dir.string() + "': " + std::strerror(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
  return t;
}

}  // namespace kiln::support
