// The output side of one parallel task of kiln's AMX templates
// (dense_int8_amx.x86, dense_bf16_amx.x86, conv2d_NCHWc_int8_amx.x86,
// batch_matmul_int8_amx.x86; docs/amx.md, "Epilogues"): where a task's
// amx_gemm writes its rows and, with a fused epilogue
// (OpTemplate::TaskEpilogue), the per-task accumulator and the epilogue
// after the tiles. One class so that the four templates' loops agree on it.
#pragma once

#include <cstdint>
#include <functional>

#include "ir/function.h"
#include "ops/op_template.h"

namespace kiln::ops {

// The output side of one parallel task of an AMX template (dense, bf16
// dense, convolution, batched): where its amx_gemm writes the task's rows
// [row0, row0 + rows) of the anchor's flat [*, N] view, and what follows.
// Without an epilogue the GEMM writes C itself (from row0, ldc = N). With
// one (OpTemplate::TaskEpilogue) it writes the task's accumulator from row
// 0 (ldc = N) and the epilogue runs on those rows right after, while they
// are in L1/L2: `gemm(c)` builds the task's amx_gemm writing at `c` (a load
// of the buffer at the first row's offset).
class AmxTaskOutput {
 public:
  // C: the anchor's buffer (unused, may be null, with an epilogue).
  // rows_per_task: the most rows a task has (the accumulator's size: a full
  // task's rows, or all the rows when there are fewer, a classifier's one).
  AmxTaskOutput(ir::Buffer C, ir::DataType acc_type, int64_t rows_per_task, int64_t N,
                OpTemplate::TaskEpilogue epilogue);
  // The task body's statement for `rows` rows from row0.
  ir::Stmt rows(const ir::Expr& row0, int64_t rows,
                const std::function<ir::Stmt(const ir::Expr& c)>& gemm) const;
  // The whole task body (both row counts' branches): with an epilogue,
  // wrapped in the allocation of the task's accumulator, inside the parallel
  // loop (codegen puts it on the task's stack up to 256 KiB, a larger one in
  // the workspace allocator); unchanged without.
  ir::Stmt task_body(ir::Stmt body) const;

 private:
  ir::Buffer C_, acc_;
  int64_t rows_per_task_, N_;
  OpTemplate::TaskEpilogue epilogue_;
};

}  // namespace kiln::ops
