// Removing the temporaries of kiln processes that died without cleaning up
// (kill -9, a crash, a power cut): their names carry the creating process's
// pid, so a later kiln can tell that nobody owns them any more.
//
//   $TMPDIR/kiln-<kind>-<pid>-XXXXXX   (kind: build, link, measure, ref, package, demo,
//                                       output: a file for a device or FIFO being made)
//   OUT.tmp<pid>                       (beside a package being written)
//
// An entry is stale when kill(pid, 0) fails with ESRCH (no such process: a
// live process of another user answers EPERM and is left alone) and its
// modification time is more than `min_age` old, which guards against a
// process in another pid namespace sharing the folder. Nothing of a live
// process, and nothing of this process, is ever removed.
//
// Header-only, so that the runtime-only kiln-run can use it (it links only
// libkiln_runtime; src/runtime/package.cc names its folders the same way).
#pragma once

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>

namespace kiln::support {

// The kinds of kiln-<kind>-<pid>-XXXXXX temporaries that the sweep knows.
inline constexpr const char* kTempKinds[] = {"build",   "link", "measure", "ref",
                                             "package", "demo", "output"};

// The pid in "kiln-<kind>-<pid>-..." (a known kind), else -1.
inline long pid_of_temp_name(const std::string& name) {
  for (const char* kind : kTempKinds) {
    std::string head = std::string("kiln-") + kind + "-";
    if (name.compare(0, head.size(), head) != 0) continue;
    size_t i = head.size(), j = i;
    while (j < name.size() && name[j] >= '0' && name[j] <= '9') ++j;
    if (j == i || j - i > 9 || j >= name.size() || name[j] != '-') return -1;
    return std::strtol(name.c_str() + i, nullptr, 10);
  }
  return -1;
}

// The pid in "<output file name>.tmp<pid>", else -1.
inline long pid_of_output_temp(const std::string& name, const std::string& output_name) {
  std::string head = output_name + ".tmp";
  if (output_name.empty() || name.size() <= head.size() || name.compare(0, head.size(), head) != 0)
    return -1;
  if (name.size() - head.size() > 9) return -1;
  for (size_t i = head.size(); i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return -1;
  return std::strtol(name.c_str() + head.size(), nullptr, 10);
}

// Whether `pid` names no process at all (never true for this process).
inline bool process_is_gone(long pid) {
  if (pid <= 0 || pid == long(::getpid())) return false;
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

// Whether `path` (not followed) was last modified more than `min_age` ago.
inline bool older_than(const std::filesystem::path& path, std::chrono::seconds min_age) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return false;
  return std::time(nullptr) - st.st_mtime > min_age.count();
}

// Removes the stale kiln-<kind>-<pid>-* entries of `dir` (the temporary
// folder by default). Returns how many were removed; errors are ignored.
inline int sweep_stale_temps(std::filesystem::path dir = {},
                             std::chrono::seconds min_age = std::chrono::seconds(60)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty()) dir = fs::temp_directory_path(ec);
  if (ec) return 0;
  int removed = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    long pid = pid_of_temp_name(p.filename().string());
    if (pid <= 0 || !process_is_gone(pid) || !older_than(p, min_age)) continue;
    std::error_code rm;
    if (fs::remove_all(p, rm) > 0 && !rm) ++removed;
  }
  return removed;
}

// Removes the stale OUT.tmp<pid> files beside `output` (a package path).
inline int sweep_stale_output_temps(const std::string& output,
                                    std::chrono::seconds min_age = std::chrono::seconds(60)) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dest = fs::absolute(output, ec);
  if (ec || output.empty()) return 0;
  std::string name = dest.filename().string();
  int removed = 0;
  for (fs::directory_iterator it(dest.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    long pid = pid_of_output_temp(p.filename().string(), name);
    if (pid <= 0 || !process_is_gone(pid) || !older_than(p, min_age)) continue;
    std::error_code st;
    if (fs::is_directory(fs::symlink_status(p, st))) continue;  // only the files kiln writes
    std::error_code rm;
    if (fs::remove(p, rm)) ++removed;
  }
  return removed;
}

}  // namespace kiln::support
