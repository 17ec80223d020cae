/* Deploying a kiln package from C through kiln_runtime.h: loads the package,
 * feeds zeros to every input, runs, prints each output's shape and first
 * float32 values. Links only kiln_runtime.
 *
 *   deploy_c model.tar */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/kiln_runtime.h"

static int check(int status) {
  if (status != KILN_OK) fprintf(stderr, "deploy_c: %s\n", kiln_last_error());
  return status;
}

static size_t dtype_bytes(const char* dtype) {
  if (!strcmp(dtype, "float64") || !strcmp(dtype, "int64") || !strcmp(dtype, "uint64")) return 8;
  if (!strcmp(dtype, "float32") || !strcmp(dtype, "int32") || !strcmp(dtype, "uint32")) return 4;
  if (!strcmp(dtype, "float16") || !strcmp(dtype, "int16") || !strcmp(dtype, "uint16")) return 2;
  return 1;
}

int main(int argc, char** argv) {
  kiln_executor* ex = NULL;
  int32_t n_in = 0, n_out = 0;
  if (argc != 2) {
    fprintf(stderr, "usage: %s MODEL.tar\n", argv[0]);
    return 2;
  }
  if (check(kiln_executor_load(argv[1], &ex))) return 1;
  if (check(kiln_executor_num_inputs(ex, &n_in)) || check(kiln_executor_num_outputs(ex, &n_out)))
    goto fail;
  for (int32_t i = 0; i < n_in; ++i) {
    const char *name, *dtype;
    int32_t ndim;
    const int64_t* shape;
    size_t bytes;
    void* zeros;
    int status;
    if (check(kiln_executor_input_info(ex, i, &name, &dtype, &ndim, &shape))) goto fail;
    bytes = dtype_bytes(dtype);
    for (int32_t d = 0; d < ndim; ++d) bytes *= (size_t)shape[d];
    zeros = calloc(bytes ? bytes : 1, 1);
    status = check(kiln_executor_set_input(ex, name, zeros, dtype, ndim, shape));
    free(zeros);
    if (status) goto fail;
  }
  if (check(kiln_executor_run(ex))) goto fail;
  for (int32_t i = 0; i < n_out; ++i) {
    const char *name, *dtype;
    int32_t ndim;
    const int64_t* shape;
    const void* data;
    size_t bytes;
    if (check(kiln_executor_output_info(ex, i, &name, &dtype, &ndim, &shape)) ||
        check(kiln_executor_output_data(ex, i, &data, &bytes)))
      goto fail;
    printf("output %d %s: %s [", (int)i, name, dtype);
    for (int32_t d = 0; d < ndim; ++d) printf("%s%lld", d ? ", " : "", (long long)shape[d]);
    printf("]");
    if (!strcmp(dtype, "float32"))
      for (size_t k = 0; k < bytes / 4 && k < 8; ++k) printf(" %g", ((const float*)data)[k]);
    printf("\n");
  }
  kiln_executor_free(ex);
  return 0;
fail:
  kiln_executor_free(ex);
  return 1;
}
