// A writer process for the records tests: the test binary, started with
// KILN_RECORDS_WRITER_DB set, adds records to that database (one transaction
// each) and prints the index of each committed one on stdout, then exits
// before gtest runs. It opens the database first, then waits for one byte on
// stdin, so that several writers can be started together. Used to test concurrent writers and a
// writer killed mid-way with real processes.
#pragma once

#include <string>

#include "tuner/records.h"

namespace kiln::tuner::records_testing {

inline constexpr const char* kWriterDbEnv = "KILN_RECORDS_WRITER_DB";
inline constexpr const char* kWriterCountEnv = "KILN_RECORDS_WRITER_COUNT";  // 0: until killed
inline constexpr const char* kWriterTagEnv = "KILN_RECORDS_WRITER_TAG";

// The i-th record a writer with `tag` adds (every tenth one a timeout).
Record writer_record(const std::string& tag, int i);

}  // namespace kiln::tuner::records_testing
