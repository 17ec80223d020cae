#include "runtime/package.h"

#include <archive.h>
#include <archive_entry.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "runtime/cpu_features.h"
#include "runtime/elf_image.h"

namespace kiln::runtime {

namespace {

// The ELF image of a kernel library before dlopen: a library for another
// architecture is an IncompatiblePackage, not a loader error; a truncated one
// is corrupt (dlopen would map it and die with SIGBUS). `member` names the
// library in the package's messages.
void check_elf_image(const std::string& library, const std::string& package,
                     const std::string& member) {
  ElfHeader h = read_elf_header(library);
  if (!h.is_elf) return;  // not ELF: Module::load says what is wrong
  if (elf_machine_name(h.machine) != host_arch())
    throw IncompatiblePackage(package, "its kernels are built for " + elf_machine_name(h.machine) +
                                           "; this machine is " + host_arch());
  std::string problem = elf_image_problem(library);
  if (!problem.empty()) throw CorruptPackage(package, member, problem);
}

namespace fs = std::filesystem;

bool is_elf(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[4] = {};
  f.read(magic, 4);
  return f.gcount() == 4 && std::memcmp(magic,
                                        "\x7f"
                                        "ELF",
                                        4) == 0;
}

// A private directory that is removed with everything in it, when the package
// is loaded (mod.so stays mapped). Named kiln-package-PID-XXXXXX: the runtime
// is a library and installs no signal handler, so a program killed while it
// extracts a package leaves the folder, and the next kiln build/tune/run or
// kiln-run removes it once PID is gone (support/stale_temps.h, which the
// runtime itself does not include).
class TempDir {
 public:
  TempDir() {
    std::string tmpl =
        (fs::temp_directory_path() / ("kiln-package-" + std::to_string(::getpid()) + "-XXXXXX"))
            .string();
    if (!mkdtemp(tmpl.data()))
      throw std::runtime_error("cannot create a temporary directory in " +
                               fs::temp_directory_path().string() + ": " + std::strerror(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

std::string member_name(const char* raw) {
  std::string n = raw ? raw : "";
  while (n.compare(0, 2, "./") == 0) n = n.substr(2);
  return n;
}

// A member's bytes, read whole; a member larger than memory is not corruption.
std::string read_member(struct archive* a, struct archive_entry* e, const std::string& path,
                        const std::string& name) {
  auto why = [&] {
    const char* msg = archive_error_string(a);
    return std::string(msg ? msg : "unknown error");
  };
  std::string data;
  try {
    if (archive_entry_size_is_set(e)) data.reserve(static_cast<size_t>(archive_entry_size(e)));
    char buf[1 << 16];
    while (true) {
      la_ssize_t n = archive_read_data(a, buf, sizeof(buf));
      if (n < 0) throw CorruptPackage(path, name, "cannot read member: " + why());
      if (n == 0) break;
      data.append(buf, static_cast<size_t>(n));
    }
  } catch (const std::bad_alloc&) {
    throw PackageTooLarge(path, "member " + name,
                          archive_entry_size_is_set(e)
                              ? static_cast<uint64_t>(archive_entry_size(e))
                              : static_cast<uint64_t>(data.size()));
  } catch (const std::length_error&) {
    throw PackageTooLarge(path, "member " + name, static_cast<uint64_t>(archive_entry_size(e)));
  }
  if (archive_entry_size_is_set(e) && static_cast<int64_t>(data.size()) != archive_entry_size(e))
    throw CorruptPackage(path, name, "truncated member");
  return data;
}

}  // namespace

TarMembers read_tar_members(const std::string& path) {
  auto corrupt = [&](const std::string& where, const std::string& msg) {
    return CorruptPackage(path, where, msg);
  };
  std::unique_ptr<struct archive, int (*)(struct archive*)> a(archive_read_new(),
                                                              archive_read_free);
  archive_read_support_format_tar(a.get());
  archive_read_support_filter_none(a.get());
  auto why = [&] {
    const char* e = archive_error_string(a.get());
    return std::string(e ? e : "unknown error");
  };
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 16) != ARCHIVE_OK)
    throw corrupt("tar", "not a kiln package (neither a tar nor a shared library): " + why());

  std::map<std::string, std::string> contents;  // mod.so, mod.json, mod.params
  while (true) {
    struct archive_entry* e = nullptr;
    int r = archive_read_next_header(a.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) throw corrupt("tar", "cannot read the archive: " + why());
    std::string name = member_name(archive_entry_pathname(e));
    if (name != "mod.so" && name != "mod.json" && name != "mod.params") continue;
    if (archive_entry_filetype(e) != AE_IFREG) throw corrupt(name, "not a regular file");
    if (contents.count(name)) throw corrupt(name, "appears twice in the tar");
    contents[name] = read_member(a.get(), e, path, name);
  }
  for (const char* m : {"mod.so", "mod.json", "mod.params"})
    if (!contents.count(m))
      throw corrupt(m, "missing from the tar (a package holds mod.so, mod.json, mod.params)");
  return {std::move(contents["mod.so"]), std::move(contents["mod.json"]),
          std::move(contents["mod.params"])};
}

namespace {

Package load_tar(const std::string& path) {
  auto corrupt = [&](const std::string& where, const std::string& msg) {
    return CorruptPackage(path, where, msg);
  };
  TarMembers members = read_tar_members(path);
  TempDir dir;
  fs::path so_path = dir.path() / "mod.so";
  {
    std::ofstream out(so_path, std::ios::binary);
    out.write(members.library.data(), static_cast<std::streamsize>(members.library.size()));
    out.close();
    if (!out)
      throw std::runtime_error("cannot extract mod.so of package '" + path + "' to " +
                               so_path.string());
  }
  std::map<std::string, std::string> contents = {{"mod.json", std::move(members.graph_json)},
                                                 {"mod.params", std::move(members.params)}};

  Package p;
  p.path = path;
  check_elf_image(so_path.string(), path, "mod.so");
  try {
    p.module = std::make_shared<Module>(Module::load(so_path.string()));
  } catch (const std::exception& ex) {
    throw corrupt("mod.so", std::string("does not load: ") + ex.what());
  }
  p.graph_json = std::move(contents["mod.json"]);
  const std::string& params = contents["mod.params"];
  try {
    p.params = read_npz_memory(params.data(), params.size(), "mod.params");
  } catch (const std::bad_alloc&) {
    throw PackageTooLarge(path, "the weights (mod.params)", params.size());
  } catch (const std::exception& ex) {
    throw CorruptPackage(path, ex.what());
  }
  return p;
}

Package load_library(const std::string& path) {
  Package p;
  p.path = path;
  p.graph_member = "kiln_graph_json";
  p.params_member = "kiln_params";
  p.library_member = "the library";
  check_elf_image(path, path, "shared library");
  try {
    p.module = std::make_shared<Module>(Module::load(path));
  } catch (const std::exception& ex) {
    throw CorruptPackage(path, "shared library", std::string("does not load: ") + ex.what());
  }
  auto symbol = [&](const char* name) {
    void* s = p.module->find_symbol(name);
    if (!s)
      throw CorruptPackage(path, name,
                           "symbol missing (a self-contained package exports kiln_graph_json, "
                           "kiln_params and kiln_params_size)");
    return s;
  };
  const char* json = static_cast<const char*>(symbol("kiln_graph_json"));
  const auto* params = static_cast<const unsigned char*>(symbol("kiln_params"));
  uint64_t size = *static_cast<const uint64_t*>(symbol("kiln_params_size"));
  p.graph_json = json;
  try {
    p.params = read_npz_memory(params, static_cast<size_t>(size), "kiln_params");
  } catch (const std::bad_alloc&) {
    throw PackageTooLarge(path, "the weights (kiln_params)", size);
  } catch (const std::exception& ex) {
    throw CorruptPackage(path, ex.what());
  }
  return p;
}

}  // namespace

PackageTooLarge::PackageTooLarge(const std::string& package, const std::string& what,
                                 uint64_t bytes)
    : std::runtime_error("package '" + package + "' does not fit in memory: " +
                         std::to_string(bytes) + " bytes (" +
                         std::to_string(bytes / (1024 * 1024)) + " MiB) for " + what +
                         ", more than this process can allocate (the package is not "
                         "corrupt; run it on a machine with more memory or raise the limit)") {}

Package load_package(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw std::runtime_error("package '" + path + "': no such file");
  if (!fs::is_regular_file(path, ec))
    throw std::runtime_error("package '" + path + "': not a regular file");
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw std::runtime_error("package '" + path + "': cannot open for reading");
  return is_elf(path) ? load_library(path) : load_tar(path);
}

}  // namespace kiln::runtime
