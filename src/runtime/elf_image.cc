#include "runtime/elf_image.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <vector>

namespace kiln::runtime {

namespace {

// Little- or big-endian unsigned field of `size` bytes at `at` in `b`.
uint64_t field(const std::vector<unsigned char>& b, size_t at, size_t size, bool little) {
  uint64_t v = 0;
  for (size_t i = 0; i < size; ++i) {
    uint64_t byte = b[at + (little ? i : size - 1 - i)];
    v |= byte << (8 * i);
  }
  return v;
}

// `n` bytes at `offset` of the file, or an empty vector when they are not all there.
std::vector<unsigned char> read_at(std::ifstream& in, uint64_t offset, uint64_t n,
                                   uint64_t file_size) {
  if (offset > file_size || n > file_size - offset) return {};
  std::vector<unsigned char> b(n);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(n));
  if (in.gcount() != static_cast<std::streamsize>(n)) return {};
  return b;
}

std::string past_end(const std::string& what, uint64_t offset, uint64_t size, uint64_t file_size) {
  return "truncated or damaged shared object: " + what + " spans bytes " + std::to_string(offset) +
         ".." + std::to_string(offset + size) + " of a " + std::to_string(file_size) + "-byte file";
}

}  // namespace

ElfHeader read_elf_header(const std::string& path) {
  ElfHeader h;
  std::ifstream in(path, std::ios::binary);
  unsigned char id[20] = {};
  in.read(reinterpret_cast<char*>(id), sizeof id);
  if (in.gcount() < static_cast<std::streamsize>(sizeof id) || std::memcmp(id,
                                                                           "\x7f"
                                                                           "ELF",
                                                                           4) != 0)
    return h;
  h.is_elf = true;
  h.elf_class = id[4];
  h.machine = id[5] == 2 ? (id[18] << 8 | id[19]) : (id[19] << 8 | id[18]);  // EI_DATA
  return h;
}

std::string elf_machine_name(int machine) {
  static const std::map<int, std::string> names = {
      {3, "i386"}, {40, "arm"}, {62, "x86_64"}, {183, "aarch64"}, {243, "riscv"}};
  auto it = names.find(machine);
  return it == names.end() ? "ELF machine " + std::to_string(machine) : it->second;
}

std::string elf_image_problem(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "cannot open the shared object";
  const uint64_t file_size = static_cast<uint64_t>(in.tellg());
  std::vector<unsigned char> id = read_at(in, 0, 16, file_size);
  if (id.empty() || std::memcmp(id.data(),
                                "\x7f"
                                "ELF",
                                4) != 0)
    return "not an ELF shared object";
  const bool is64 = id[4] == 2, little = id[5] != 2;
  if (id[4] != 1 && id[4] != 2) return "not an ELF shared object (unknown ELF class)";
  const uint64_t ehsize = is64 ? 64 : 52;
  std::vector<unsigned char> eh = read_at(in, 0, ehsize, file_size);
  if (eh.empty()) return past_end("the ELF header", 0, ehsize, file_size);
  auto f = [&](size_t at32, size_t at64, size_t size32, size_t size64) {
    return field(eh, is64 ? at64 : at32, is64 ? size64 : size32, little);
  };
  const uint64_t phoff = f(28, 32, 4, 8), shoff = f(32, 40, 4, 8);
  const uint64_t phentsize = f(42, 54, 2, 2), phnum = f(44, 56, 2, 2);
  const uint64_t shentsize = f(46, 58, 2, 2), shnum = f(48, 60, 2, 2);

  if (phnum > 0) {
    std::vector<unsigned char> ph = read_at(in, phoff, phentsize * phnum, file_size);
    if (ph.empty() || phentsize < (is64 ? 56u : 32u))
      return past_end("the program headers", phoff, phentsize * phnum, file_size);
    for (uint64_t i = 0; i < phnum; ++i) {
      size_t base = static_cast<size_t>(i * phentsize);
      uint64_t offset = field(ph, base + (is64 ? 8 : 4), is64 ? 8 : 4, little);
      uint64_t filesz = field(ph, base + (is64 ? 32 : 16), is64 ? 8 : 4, little);
      if (offset > file_size || filesz > file_size - offset)
        return past_end("segment " + std::to_string(i), offset, filesz, file_size);
    }
  }
  if (shnum > 0) {
    std::vector<unsigned char> sh = read_at(in, shoff, shentsize * shnum, file_size);
    if (sh.empty() || shentsize < (is64 ? 64u : 40u))
      return past_end("the section headers", shoff, shentsize * shnum, file_size);
    constexpr uint64_t kNoBits = 8;  // SHT_NOBITS (.bss): no file contents
    for (uint64_t i = 0; i < shnum; ++i) {
      size_t base = static_cast<size_t>(i * shentsize);
      uint64_t type = field(sh, base + 4, 4, little);
      uint64_t offset = field(sh, base + (is64 ? 24 : 16), is64 ? 8 : 4, little);
      uint64_t size = field(sh, base + (is64 ? 32 : 20), is64 ? 8 : 4, little);
      if (type == kNoBits || type == 0) continue;
      if (offset > file_size || size > file_size - offset)
        return past_end("section " + std::to_string(i), offset, size, file_size);
    }
  }
  return "";
}

}  // namespace kiln::runtime
