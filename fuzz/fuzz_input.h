// What the fuzz targets share: the fuzzer's bytes as a file (kiln's readers
// take paths, as its users give them), and one rule for what a reader may do
// with bad input.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

namespace kiln::fuzz {

// A file of this process ($TMPDIR/kiln-fuzz-PID-<name>), rewritten with every
// input and removed at exit.
inline std::string scratch_file(const std::string& name) {
  static std::string dir = std::filesystem::temp_directory_path().string();
  return dir + "/kiln-fuzz-" + std::to_string(::getpid()) + "-" + name;
}

inline std::string write_file(const std::string& name, const void* data, size_t size) {
  std::string path = scratch_file(name);
  static bool registered = false;
  if (!registered) {
    registered = true;
    std::atexit([] {
      std::error_code ec;
      for (const auto& e :
           std::filesystem::directory_iterator(std::filesystem::temp_directory_path(), ec)) {
        std::string n = e.path().filename().string();
        if (n.rfind("kiln-fuzz-" + std::to_string(::getpid()) + "-", 0) == 0)
          std::filesystem::remove(e.path(), ec);
      }
    });
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

// Bad input must end in one std::exception carrying a message (what the CLI
// prints); anything else (a crash, a sanitizer report, a hang, an exception
// of another type or with an empty message) is a finding.
template <typename F>
void expect_clean_error_or_success(F&& read) {
  try {
    read();
  } catch (const std::exception& e) {
    if (std::string(e.what()).empty()) {
      std::fprintf(stderr, "fuzz: an exception with an empty message\n");
      std::abort();
    }
  }
}

}  // namespace kiln::fuzz
