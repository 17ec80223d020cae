// Refusing to write an output over one of the command's own inputs
// (`kiln build m.onnx -o m.onnx`, `kiln records export a.db -o a.db`, ...):
// the output would destroy the data the command reads. Header-only, so that
// the runtime-only kiln-run can use it.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kiln::support {

// Whether two paths name one existing file: the same device and inode, so
// symlinks, hard links and "./a" vs "a" all count. False when either is missing.
inline bool same_file(const std::string& a, const std::string& b) {
  struct stat sa, sb;
  if (a.empty() || b.empty() || ::stat(a.c_str(), &sa) != 0 || ::stat(b.c_str(), &sb) != 0)
    return false;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// `path` as an absolute path with "." and ".." gone and symlinks followed as
// far as they lead (a link to a file not created yet names that file): two
// paths of one file to be created compare equal.
inline std::string normalized_path(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  if (ec) return path;
  for (int hops = 0; hops < 40; ++hops) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) break;
    fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  fs::path dir = fs::weakly_canonical(p.parent_path(), ec);
  return ((ec ? p.parent_path() : dir) / p.filename()).lexically_normal().string();
}

// Whether two paths name one file, existing (same_file) or not yet
// (normalized_path).
inline bool same_path(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  return same_file(a, b) || normalized_path(a) == normalized_path(b);
}

// Throws std::runtime_error when `output` is the sqlite database `db` or one
// of the files sqlite keeps beside it (-wal, -shm, -journal), existing or to be
// created: writing there would lose the records. A postgresql:// URL (no
// file) or an empty `db` is never matched.
inline void refuse_output_over_database(const std::string& output, const std::string& what,
                                        const std::string& db) {
  if (db.empty() || output.empty() || db.find("://") != std::string::npos) return;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"})
    if (same_path(output, db + suffix))
      throw std::runtime_error("the output '" + output + "' is " +
                               (*suffix ? std::string("the '") + suffix + "' file of " : "") +
                               what + " '" + db +
                               "': refusing to overwrite it (choose another output path)");
}

// Throws std::runtime_error naming both when `output` is one of `inputs`
// (each a description such as "the model" and a path).
inline void refuse_output_over_input(
    const std::string& output, const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [what, path] : inputs)
    if (same_file(output, path))
      throw std::runtime_error("the output '" + output + "' is " + what + " '" + path +
                               "': refusing to overwrite it (choose another output path)");
}

// Throws std::runtime_error when `output` exists and is read-only: no write
// permission bit at all (which root's access() would ignore), or not writable
// by this user. kiln writes outputs to a temporary name and renames it into
// place, which the file's own mode would not stop: the new file would replace
// it with the default mode. A read-only file is the user's "keep this".
inline void refuse_read_only_output(const std::string& output) {
  struct stat st;
  if (output.empty() || ::stat(output.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  const bool no_write_bit = (st.st_mode & (S_IWUSR | S_IWGRP | S_IWOTH)) == 0;
  if (no_write_bit || ::access(output.c_str(), W_OK) != 0)
    throw std::runtime_error("the output '" + output +
                             "' exists and is read-only: refusing to replace it (make it "
                             "writable, remove it, or choose another output path)");
}

}  // namespace kiln::support
