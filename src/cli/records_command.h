#pragma once

#include <string>
#include <vector>

namespace kiln::cli {

// `kiln records export DB -o OUT.jsonl [--workload KEY]` and
// `kiln records import DB IN.jsonl`; returns the exit status (0 done,
// 1 an error reading or writing the files, 2 a usage error).
int run_records(const std::vector<std::string>& args);

}  // namespace kiln::cli
