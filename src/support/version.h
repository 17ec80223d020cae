// kiln's version, the one place it is defined: the project version CMake was
// configured with (CMakeLists.txt passes it to version.cc only). Packages
// (mod.json's kiln_version) and tuning records (TargetKey) carry it.
#pragma once

namespace kiln {

// e.g. "0.1.0".
const char* kiln_version();

}  // namespace kiln
