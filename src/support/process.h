// Running a helper program (the C compiler that links packages, the tuner's
// measurement worker) with its output captured and a deadline: one place for
// posix_spawn, pipes, timeouts and process groups.
#pragma once

#include <limits>
#include <string>
#include <vector>

namespace kiln::support {

struct ProcessResult {
  std::string spawn_error;  // non-empty: the process never started
  bool timed_out = false;
  int status = 0;  // waitpid status
  std::string out, err;
  double wall_s = 0;
};

// Runs argv (argv[0] a path, or a name looked up in PATH) with stdout and
// stderr captured (1 MiB each at most), in a process group of its own,
// killing the group once timeout_s of wall clock have passed. Signals the
// caller blocks or ignores are reset to their defaults in the child.
ProcessResult run_process(const std::vector<std::string>& argv,
                          double timeout_s = std::numeric_limits<double>::infinity());

}  // namespace kiln::support
