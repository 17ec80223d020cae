// Writing a built module as a package (docs/package-format.md).
#pragma once

#include <string>

#include "codegen/target.h"
#include "driver/build_module.h"

namespace kiln::driver {

enum class PackageFormat {
  kTar,            // model.tar: mod.so + mod.json + mod.params
  kSharedLibrary,  // one .so embedding mod.json and mod.params
};

// Writes the package at `path` atomically: on any failure no file is left
// there (an existing file is left untouched).
void write_package(const BuiltModule& m, const codegen::Target& target, const std::string& path,
                   PackageFormat format);

}  // namespace kiln::driver
