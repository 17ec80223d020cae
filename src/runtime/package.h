// Reading a kiln package from disk (docs/package-format.md): either a tar
// holding mod.so, mod.json and mod.params, or one self-contained shared
// library exporting kiln_graph_json, kiln_params and kiln_params_size.
// Nothing here checks the graph: GraphExecutor validates what it loads.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/module.h"
#include "runtime/npz.h"

namespace kiln::runtime {

// Every problem with a package's contents; what() reads
// "corrupt package '<file>': <member or symbol>: <what is wrong>".
class CorruptPackage : public std::runtime_error {
 public:
  CorruptPackage(const std::string& package, const std::string& where, const std::string& msg)
      : CorruptPackage(package, where + ": " + msg) {}
  // `detail` already names the member.
  CorruptPackage(const std::string& package, const std::string& detail)
      : std::runtime_error("corrupt package '" + package + "': " + detail) {}
};

// A sound package this machine cannot run: built for another architecture,
// or for CPU features it lacks. what() reads "package '<file>' cannot run on
// this machine: <why>". Raised before any kernel runs (never SIGILL).
class IncompatiblePackage : public std::runtime_error {
 public:
  IncompatiblePackage(const std::string& package, const std::string& why)
      : std::runtime_error("package '" + package + "' cannot run on this machine: " + why) {}
};

// A sound package that needs more memory than this process can allocate (its
// storages, or a member read into memory): not corrupt, only too large here.
// what() reads "package '<file>' does not fit in memory: N bytes (X MiB) for
// <what>, ...".
class PackageTooLarge : public std::runtime_error {
 public:
  PackageTooLarge(const std::string& package, const std::string& what, uint64_t bytes);
};

struct Package {
  std::string path;                // the package file, for messages
  std::shared_ptr<Module> module;  // the kernels (mod.so, or the library itself)
  std::string graph_json;          // mod.json's text
  std::vector<NamedArray> params;  // mod.params
  // Where graph and params came from, for messages: "mod.json" / "mod.params"
  // in a tar, "kiln_graph_json" / "kiln_params" in a self-contained library.
  std::string graph_member = "mod.json";
  std::string params_member = "mod.params";
  std::string library_member = "mod.so";
};

// The three members of a package tar, read whole: the tar is checked (each a
// regular file, none twice, none truncated, none missing) but their contents
// are not. What load_package() starts with; on its own for tools and the
// package fuzzer (fuzz/), which must not dlopen a library it mutated.
struct TarMembers {
  std::string library;     // mod.so
  std::string graph_json;  // mod.json
  std::string params;      // mod.params (npz)
};
TarMembers read_tar_members(const std::string& path);

// Loads `path`, telling the flavour from its first bytes (ELF or tar). A tar's
// mod.so is extracted into a private temporary directory for dlopen and
// removed once loaded. Throws std::runtime_error when the file cannot be read
// and CorruptPackage for a bad tar, a missing member or symbol, an mod.so
// that does not load, or an unreadable mod.params; PackageTooLarge when a
// member does not fit in memory.
Package load_package(const std::string& path);

}  // namespace kiln::runtime
