/* kiln's C deployment API: load a package, set inputs by name, run, read
 * outputs. Link libkiln_runtime only (no LLVM, no compiler).
 *
 *   kiln_executor* ex;
 *   if (kiln_executor_load("model.tar", &ex) != KILN_OK) {
 *     fprintf(stderr, "%s\n", kiln_last_error());
 *     return 1;
 *   }
 *   int64_t shape[4] = {1, 3, 224, 224};
 *   kiln_executor_set_input(ex, "input", data, "float32", 4, shape);
 *   kiln_executor_run(ex);
 *   kiln_executor_get_output(ex, 0, out, out_bytes);
 *   kiln_executor_free(ex);
 *
 * Every function returns KILN_OK (0) or an error code; kiln_last_error()
 * then holds the message (per thread, until the next failing call). Strings
 * and arrays returned through pointers live as long as the executor. An
 * executor must not be used by two threads at once. */
#ifndef KILN_RUNTIME_KILN_RUNTIME_H_
#define KILN_RUNTIME_KILN_RUNTIME_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kiln_executor kiln_executor;

enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR = 1,            /* anything else (I/O, a kernel failed, out of memory) */
  KILN_INVALID_ARGUMENT = 2, /* null pointer, unknown name, wrong shape or dtype, bad index */
  KILN_CORRUPT_PACKAGE = 3,  /* the package is not a valid kiln package */
};

/* The message of the last failing call on this thread ("" if none). */
const char* kiln_last_error(void);

/* Loads a package: a tar (mod.so, mod.json, mod.params) or a self-contained .so. */
int kiln_executor_load(const char* path, kiln_executor** out);
void kiln_executor_free(kiln_executor* ex);

int kiln_executor_num_inputs(const kiln_executor* ex, int32_t* out);
int kiln_executor_num_outputs(const kiln_executor* ex, int32_t* out);

/* Name, dtype ("float32", "int64", "bool", ...), rank and shape of input or
 * output i. Any out pointer may be NULL. An output shaped at run time (after
 * NonZero, TopK with a run-time k, ...) has the last run's shape (rank 0
 * before the first run; the pointer is valid until the next run). */
int kiln_executor_input_info(const kiln_executor* ex, int32_t i, const char** name,
                             const char** dtype, int32_t* ndim, const int64_t** shape);
int kiln_executor_output_info(const kiln_executor* ex, int32_t i, const char** name,
                              const char** dtype, int32_t* ndim, const int64_t** shape);

/* Copies data (dense, row-major, of the given dtype and shape) into the input
 * `name`; a wrong name, dtype or shape is KILN_INVALID_ARGUMENT with a message
 * listing the model's inputs. */
int kiln_executor_set_input(kiln_executor* ex, const char* name, const void* data,
                            const char* dtype, int32_t ndim, const int64_t* shape);

int kiln_executor_run(kiln_executor* ex);

/* Copies output i into dst, which holds dst_bytes (at least the output's size). */
int kiln_executor_get_output(const kiln_executor* ex, int32_t i, void* dst, size_t dst_bytes);
/* Points at output i inside the executor (valid until the next run or free). */
int kiln_executor_output_data(const kiln_executor* ex, int32_t i, const void** data,
                              size_t* nbytes);

/* Sequences and optionals (ONNX's non-tensor values: a model with If/Loop
 * post-processing may take or give them). kind: whether input or output i
 * is a sequence of tensors of its dtype, and whether it is optional (may be
 * empty); either pointer may be NULL. */
int kiln_executor_input_kind(const kiln_executor* ex, int32_t i, int32_t* is_sequence,
                             int32_t* is_optional);
int kiln_executor_output_kind(const kiln_executor* ex, int32_t i, int32_t* is_sequence,
                              int32_t* is_optional);
/* Copies `count` tensors (element k: data[k], ndims[k] axes of shapes[k],
 * the input's dtype) into the sequence input `name`. */
int kiln_executor_set_input_sequence(kiln_executor* ex, const char* name, int32_t count,
                                     const void* const* data, const int32_t* ndims,
                                     const int64_t* const* shapes);
/* Leaves the optional input `name` empty (set_input gives it a value). */
int kiln_executor_set_input_none(kiln_executor* ex, const char* name);
/* Whether output i is an empty optional after the last run. */
int kiln_executor_output_is_none(const kiln_executor* ex, int32_t i, int32_t* none);
/* A sequence output's length after the last run, and its element j (data,
 * rank, shape and bytes; valid until the next run). get_output and
 * output_data refuse a sequence output or an empty optional. */
int kiln_executor_output_sequence_length(const kiln_executor* ex, int32_t i, int32_t* length);
int kiln_executor_output_element(const kiln_executor* ex, int32_t i, int32_t j, const void** data,
                                 int32_t* ndim, const int64_t** shape, size_t* nbytes);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_KILN_RUNTIME_H_ */
