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
};

// "ok", "compile_error", "runtime_error", "timeout", "wrong_result", "invalid_config".
const char* to_string(ErrorClass e);
// The inverse of to_string; throws std::invalid_argument listing the valid names.
ErrorClass parse_error_class(const std::string& s);

}  // namespace kiln::tuner
