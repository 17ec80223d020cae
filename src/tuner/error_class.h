// Why a tuning candidate has no time: one enum for the measurement that
// finds the failure and the records database that stores it.
#pragma once

#include <string>

namespace kiln::tuner {

enum class ErrorClass {
  kOk,
  kCompileError,   // malformed workload key, template rejects it, lower/codegen/link failed
  kRuntimeError,   // the worker died by a signal, exited without a result, or the kernel failed
  kTimeout,        // the worker ran past its timeout and was killed
  kWrongResult,    // ran, but the output differs from the reference implementation
  kInvalidConfig,  // the config JSON is not a point of the template's space
  // The kernel is too large to compile in bounded time: its estimated size
  // (schedule/code_size.h) is over MeasureOptions::code_budget, or compiling
  // it took longer than MeasureOptions::compile_budget_s.
  kCompileBudget,
};

// "ok", "compile_error", "runtime_error", "timeout", "wrong_result", "invalid_config",
// "compile_budget".
const char* to_string(ErrorClass e);
// The inverse of to_string; throws std::invalid_argument listing the valid names.
ErrorClass parse_error_class(const std::string& s);

}  // namespace kiln::tuner
