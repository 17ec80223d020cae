#include "driver/package_writer.h"

#include <archive.h>
#include <archive_entry.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "codegen/codegen.h"
#include "runtime/npz.h"
#include "support/output_file.h"
#include "support/temp_files.h"

namespace kiln::driver {
namespace fs = std::filesystem;
namespace {

// mod.params: an uncompressed npz of the weights.
std::string params_npz(const BuiltModule& m) {
  std::vector<runtime::NDArray> arrays;
  arrays.reserve(m.params.size());
  for (const auto& [name, init] : m.params) {
    runtime::NDArray a =
        runtime::NDArray::empty(init.type.shape, runtime::DType::parse(init.type.dtype));
    if (!init.data.empty()) std::memcpy(a.data(), init.data.data(), init.data.size());
    arrays.push_back(std::move(a));
  }
  std::vector<runtime::NamedArrayRef> refs;
  for (size_t i = 0; i < arrays.size(); ++i) refs.push_back({m.params[i].first, &arrays[i]});
  return runtime::write_npz_memory(refs, runtime::NpzCompression::Stored);
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  if (!in && !in.eof()) throw std::runtime_error("cannot read " + p.string());
  return os.str();
}

class TarWriter {
 public:
  explicit TarWriter(const std::string& path) : path_(path), a_(archive_write_new()) {
    archive_write_set_format_ustar(a_);
    if (archive_write_open_filename(a_, path.c_str()) != ARCHIVE_OK) fail();
  }
  ~TarWriter() { archive_write_free(a_); }
  void add(const std::string& name, const std::string& bytes) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(bytes.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    bool ok =
        archive_write_header(a_, e) == ARCHIVE_OK &&
        archive_write_data(a_, bytes.data(), bytes.size()) == static_cast<la_ssize_t>(bytes.size());
    archive_entry_free(e);
    if (!ok) fail();
  }
  void close() {
    if (archive_write_close(a_) != ARCHIVE_OK) fail();
  }

 private:
  [[noreturn]] void fail() {
    const char* msg = archive_error_string(a_);
    throw std::runtime_error("cannot write " + path_ + ": " + (msg ? msg : "libarchive error"));
  }
  std::string path_;
  archive* a_;
};

void write_tar(const BuiltModule& m, const codegen::Target& target, const std::string& path) {
  // Both removed on return, on an exception, and by kiln's signal handler
  // (support/temp_files.h).
  support::TempDir dir("build");
  fs::path so = dir.path() / "mod.so";
  try {
    codegen::link_shared_library(m.objects, so.string(), target);
  } catch (const std::exception& e) {  // name the package, not the temporary mod.so
    throw std::runtime_error("cannot write " + path + ": " + e.what());
  }
  // Beside the file (a symlink's target), or in TMPDIR for a device or FIFO
  // that gets the finished tar (support/output_file.h).
  support::OutputTarget dest = support::resolve_output(path);
  support::TempFile tmp(support::output_temp_path(dest));
  TarWriter tar(tmp.path().string());
  tar.add("mod.so", read_file(so));
  support::test_pause_point("write_package");
  tar.add("mod.json", m.graph_json);
  tar.add("mod.params", params_npz(m));
  tar.close();
  support::commit_output(tmp.path().string(), dest);
}

}  // namespace

void check_output_path(const std::string& path) {
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("cannot write package '" + path + "': " + why);
  };
  if (path.empty()) fail("empty path");
  support::OutputTarget target;
  try {
    target = support::resolve_output(path);
  } catch (const support::OutputError& e) {
    fail(e.why);
  }
  // A device or FIFO is written through: no folder to check.
  if (target.kind != support::OutputTarget::Kind::kFile) return;
  fs::path dest = target.path;
  std::error_code ec;
  fs::path dir = dest.parent_path();
  if (!fs::exists(dir, ec)) fail("directory '" + dir.string() + "' does not exist");
  if (!fs::is_directory(dir, ec)) fail("'" + dir.string() + "' is not a directory");
  if (::access(dir.c_str(), W_OK) != 0) fail("directory '" + dir.string() + "' is not writable");
}

void write_package(const BuiltModule& m, const codegen::Target& target, const std::string& path,
                   PackageFormat format) {
  check_output_path(path);
  if (format == PackageFormat::kTar) {
    write_tar(m, target, path);
    return;
  }
  std::string json = m.graph_json;
  json.push_back('\0');
  std::string data =
      codegen::data_object({{"kiln_graph_json", json}, {"kiln_params", params_npz(m)}}, target);
  std::vector<std::string> objects = m.objects;
  objects.push_back(std::move(data));
  codegen::link_shared_library(objects, path, target);
}

}  // namespace kiln::driver
