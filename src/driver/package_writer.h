// Writing a built module as a package (docs/package-format.md).
#pragma once

#include <string>

#include "codegen/target.h"
#include "driver/build.h"

namespace kiln::driver {

// Throws std::runtime_error naming `path` when no package can be written
// there: its directory is missing, not a directory or not writable, or `path`
// is a directory. kiln build calls it before compiling, to fail fast.
void check_output_path(const std::string& path);

// Writes the package at `path` atomically (linking m.objects into mod.so, or
// with the graph and weights into one library): on any failure no file is left
// there (an existing file is left untouched).
void write_package(const BuiltModule& m, const codegen::Target& target, const std::string& path,
                   PackageFormat format);

}  // namespace kiln::driver
