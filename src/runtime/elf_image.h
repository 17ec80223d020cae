// Checks on a kernel library's ELF image before dlopen maps it. A truncated
// shared object maps without complaint and then dies with SIGBUS when the
// loader touches a page past the end of the file; a library for another
// architecture fails in dlopen with a loader message. Both become errors that
// name the package here instead.
#pragma once

#include <string>

namespace kiln::runtime {

struct ElfHeader {
  bool is_elf = false;  // the file starts with the ELF magic
  int elf_class = 0;    // 1: 32-bit, 2: 64-bit
  int machine = 0;      // e_machine (62 x86_64, 183 aarch64, 40 arm, ...)
};

// The ELF identification and machine of a file (is_elf false when it has no
// ELF magic or is shorter than the identification).
ElfHeader read_elf_header(const std::string& path);

// The architecture name of an e_machine value as host_arch() spells it
// ("x86_64", "aarch64", "arm", ...; "ELF machine N" for others).
std::string elf_machine_name(int machine);

// Why the ELF file at `path` is not a complete image: its header, program
// headers, section headers or any segment or section with file contents
// reach past the end of the file; "" when everything it describes is there.
std::string elf_image_problem(const std::string& path);

}  // namespace kiln::runtime
