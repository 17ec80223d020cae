#include "records_writer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>

namespace kiln::tuner::records_testing {

Record writer_record(const std::string& tag, int i) {
  Record r;
  r.workload_key = "writer_" + tag + "(n=[" + std::to_string(i % 7) + "])";
  r.target_key =
      "llvm -mtriple=x86_64-pc-linux-gnu -mcpu=x86-64; features=+avx2; threads=1; kiln=0.1.0; "
      "llvm=16.0.6";
  r.config_json = "{\"i\":" + std::to_string(i) + ",\"tag\":\"" + tag + "\"}";
  if (i % 10 == 9) {
    r.error = ErrorClass::kTimeout;
    r.error_message = "timed out after 1 s";
  } else {
    r.times_ms = {1.0 + i * 1e-3, 1.5 + i * 1e-3};
    r.gflops = 1000.0 / (i + 1);
  }
  r.timestamp_unix = 1700000000 + i;
  r.kiln_version = "0.1.0";
  return r;
}

namespace {

// Runs during static initialization, before gtest's main, only in a child
// started with the writer environment.
int writer_main(const char* db_path) {
  const char* count_env = std::getenv(kWriterCountEnv);
  const char* tag_env = std::getenv(kWriterTagEnv);
  int count = count_env ? std::atoi(count_env) : 0;
  std::string tag = tag_env ? tag_env : "w";
  try {
    RecordDB db = RecordDB::open(db_path);
    char go = 0;
    if (read(0, &go, 1) != 1) return 5;
    for (int i = 0; count == 0 || i < count; ++i) {
      db.add(writer_record(tag, i));
      // Reported only after the commit returned: every reported index is durable.
      std::string line = std::to_string(i) + "\n";
      if (write(1, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 4;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "records writer %s: %s\n", tag.c_str(), e.what());
    return 3;
  }
  return 0;
}

const bool kWriterRan = [] {
  if (const char* db = std::getenv(kWriterDbEnv)) _exit(writer_main(db));
  return false;
}();

}  // namespace
}  // namespace kiln::tuner::records_testing
