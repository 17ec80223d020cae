/* The C ABI between generated kernels and the kiln runtime.
 *
 * Generated code calls only these symbols; they are exported by
 * libkiln_runtime.so, which never links LLVM. Kernels themselves have the
 * signature `int32_t kernel(void** args)`: args[i] is the data pointer of the
 * kernel's i-th buffer argument; they return 0 on success, else one of the
 * KILN_STATUS_ codes below. */
#ifndef KILN_RUNTIME_C_RUNTIME_API_H_
#define KILN_RUNTIME_C_RUNTIME_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef int32_t (*kiln_kernel_fn)(void** args);

/* A kernel's status. */
#define KILN_STATUS_OK 0
/* kiln_workspace_alloc returned NULL. */
#define KILN_STATUS_OUT_OF_MEMORY (-1)
/* An index read at run time (Gather, GatherElements, GatherND, ScatterElements,
 * ScatterND) was outside [-n, n) for its axis of size n, which ONNX makes an
 * error. The kernel ran to the end with every read clamped into bounds; its
 * outputs are not valid. */
#define KILN_STATUS_INDEX_OUT_OF_RANGE 2

/* The body of a parallel loop: runs iterations [begin, end) with the closure
 * the generated code packed its free variables into. */
typedef int32_t (*kiln_parallel_body_fn)(int64_t begin, int64_t end, void* closure);

/* Runs body over [0, extent) on the thread pool, split into contiguous blocks,
 * and returns when all finished: 0, or the first non-zero body result. A block
 * may run in several calls of body, on more than one thread (a thread that
 * finishes first takes over part of a slower one's block): body must accept
 * any sub-range. */
int32_t kiln_parallel_for(int64_t extent, kiln_parallel_body_fn body, void* closure);

/* Thread count of kiln_parallel_for. Defaults to the environment variable
 * KILN_NUM_THREADS, else the number of cores. n <= 0 restores the default. */
void kiln_set_num_threads(int32_t n);
int32_t kiln_get_num_threads(void);

/* 64-byte aligned scratch memory for kernels' global-scope allocations. */
void* kiln_workspace_alloc(int64_t bytes);
void kiln_workspace_free(void* ptr);

#ifdef __cplusplus
}
#endif

#endif /* KILN_RUNTIME_C_RUNTIME_API_H_ */
