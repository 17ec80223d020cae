// libFuzzer target: `kiln records import` (RecordDB::import_jsonl): JSON
// lines parsed and validated (fields, times, error classes, configs against
// their template's space), then stored in one transaction. A bad file must
// be one error naming the line, never a crash, and must add nothing.
#include <cstdio>
#include <cstdlib>

#include "fuzz/fuzz_input.h"
#include "tuner/records.h"

namespace {

// One database for many inputs, started afresh now and then so that it stays
// small (imports of valid records make it grow).
kiln::tuner::RecordDB& database() {
  static int uses = 0;
  static std::unique_ptr<kiln::tuner::RecordDB> db;
  if (!db || ++uses % 2000 == 0) {
    db.reset();
    const std::string path = kiln::fuzz::scratch_file("records.db");
    for (const char* ext : {"", "-wal", "-shm"}) std::remove((path + ext).c_str());
    db = std::make_unique<kiln::tuner::RecordDB>(kiln::tuner::RecordDB::open(path));
  }
  return *db;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kiln::fuzz::write_file("records.jsonl", data, size);
  kiln::tuner::RecordDB& db = database();
  const size_t before = db.count();
  bool failed = false;
  size_t added = 0;
  try {
    added = db.import_jsonl(path);
  } catch (const std::exception& e) {
    failed = true;
    if (std::string(e.what()).empty()) std::abort();
  }
  // All or nothing: a failed import adds no record, a good one what it says.
  const size_t after = db.count();
  if ((failed && after != before) || (!failed && after != before + added)) {
    std::fprintf(stderr, "fuzz: import changed %zu -> %zu records (failed %d, added %zu)\n", before,
                 after, failed, added);
    std::abort();
  }
  return 0;
}
