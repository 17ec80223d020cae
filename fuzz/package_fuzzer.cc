// libFuzzer target: the package loader. A package is a tar of mod.so,
// mod.json and mod.params; the fuzzer mutates the whole tar:
//  - the tar layer (read_tar_members: regular files, duplicates, truncation),
//  - the kernel library's ELF checks (elf_image_problem) on a changed mod.so,
//    which is never dlopen'ed: the system loader is not kiln's to harden,
//  - with mod.so unchanged (the seed package's, loaded once), mod.json and
//    mod.params through GraphExecutor's validation (format, tensors,
//    storages, kernel signatures, params), and a run of what passes it.
// KILN_FUZZ_SEED_PACKAGE names the seed package (scripts/fuzz.sh builds it
// with kiln build); without it only the tar and ELF layers are fuzzed.
#include <cstdlib>
#include <cstring>
#include <memory>

#include "fuzz/fuzz_input.h"
#include "runtime/elf_image.h"
#include "runtime/graph_executor.h"
#include "runtime/package.h"

namespace {

struct Seed {
  std::string library;                            // the seed's mod.so bytes
  std::shared_ptr<kiln::runtime::Module> module;  // loaded once
};

const Seed& seed() {
  static Seed s = [] {
    Seed out;
    const char* path = std::getenv("KILN_FUZZ_SEED_PACKAGE");
    if (!path || !*path) return out;
    out.library = kiln::runtime::read_tar_members(path).library;
    out.module = kiln::runtime::load_package(path).module;
    return out;
  }();
  return s;
}

void load_and_run(const std::string& path, kiln::runtime::TarMembers members) {
  kiln::runtime::Package p;
  p.path = path;
  p.module = seed().module;
  p.graph_json = std::move(members.graph_json);
  p.params =
      kiln::runtime::read_npz_memory(members.params.data(), members.params.size(), "mod.params");
  kiln::runtime::GraphExecutor ex(std::move(p));
  if (ex.storage_bytes() > (int64_t{64} << 20)) return;  // valid, but too slow to run here
  ex.run();  // inputs are zeros: what matters is that a validated graph runs
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  seed();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_file("package.tar", data, size);
  kiln::fuzz::expect_clean_error_or_success([&] {
    if (size >= 4 && std::memcmp(data,
                                 "\x7f"
                                 "ELF",
                                 4) == 0) {
      kiln::runtime::elf_image_problem(path);  // a self-contained library: checks only
      return;
    }
    kiln::runtime::TarMembers members = kiln::runtime::read_tar_members(path);
    if (!seed().module || members.library != seed().library) {
      const std::string so =
          kiln::fuzz::write_file("mod.so", members.library.data(), members.library.size());
      kiln::runtime::read_elf_header(so);
      kiln::runtime::elf_image_problem(so);
      return;
    }
    load_and_run(path, std::move(members));
  });
  return 0;
}
