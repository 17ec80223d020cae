#include "ops/amx_task_output.h"

#include <utility>

#include "ir/stmt.h"

namespace kiln::ops {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)

AmxTaskOutput::AmxTaskOutput(Buffer C, DataType acc_type, int64_t rows_per_task, int64_t N,
                             OpTemplate::TaskEpilogue epilogue)
    : C_(std::move(C)), rows_per_task_(rows_per_task), N_(N), epilogue_(std::move(epilogue)) {
  // Local: one task's rows, private to the task (its stack when small).
  if (epilogue_)
    acc_ = make_buffer("acc", acc_type, {make_int(rows_per_task), make_int(N)}, MemScope::Local);
}

Stmt AmxTaskOutput::rows(const Expr& row0, int64_t rows,
                         const std::function<Stmt(const Expr& c)>& gemm) const {
  if (!epilogue_) return gemm(load(C_, row0 * make_int(N_)));
  return make_seq({gemm(load(acc_, make_int(0))), epilogue_(row0, rows, acc_)});
}

Stmt AmxTaskOutput::task_body(Stmt body) const {
  if (!epilogue_) return body;
  return make_stmt<AllocateNode>(acc_, make_int(rows_per_task_ * N_), std::move(body));
}

}  // namespace kiln::ops
