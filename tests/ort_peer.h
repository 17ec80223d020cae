// ONNX Runtime for the tests that check kiln against it on the same file: the
// `onnxruntime` package (1.31 or newer) of the peers' venv, bench/.venv in the
// source tree (scripts/peers-venv.sh or scripts/install-deps.sh creates it
// from bench/requirements-peers.txt), reached through bench/peers/ort_run.py.
// Never a Python found on PATH: the venv is located from KILN_SOURCE_DIR,
// which CMake passes to the test targets that include this header.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#ifndef KILN_SOURCE_DIR
#error "ort_peer.h needs KILN_SOURCE_DIR (CMakeLists.txt defines it for the tests that use ORT)"
#endif

namespace kiln::test {

// The venv's Python and the helper it runs.
inline std::string ort_python() { return std::string(KILN_SOURCE_DIR) + "/bench/.venv/bin/python"; }
inline std::string ort_run_script() {
  return std::string(KILN_SOURCE_DIR) + "/bench/peers/ort_run.py";
}

// "" when the venv's Python imports onnxruntime >= 1.31, else what is missing
// (to skip with). Asked once per process.
inline const std::string& ort_missing() {
  static const std::string why = [] {
    std::error_code ec;
    if (!std::filesystem::exists(ort_python(), ec))
      return "no " + ort_python() +
             " (the peers' venv; scripts/peers-venv.sh or scripts/install-deps.sh creates it)";
    std::string out;
    FILE* p = ::popen((ort_python() + " " + ort_run_script() + " check 2>&1").c_str(), "r");
    if (!p) return std::string("could not start ") + ort_python();
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    const int rc = ::pclose(p);
    if (rc == 0) return std::string();
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    return out.empty() ? "ort_run.py check failed" : out;
  }();
  return why;
}

// The command line that runs ort_run.py MODE with `args` in the venv.
inline std::string ort_command(const std::string& mode, const std::string& args) {
  return ort_python() + " " + ort_run_script() + " " + mode + " " + args;
}

}  // namespace kiln::test
