// Hoists bounds guards out of the loops and buffers they do not depend on.
//
// A split that does not divide its extent guards each statement it reaches
// with the same test. When the partial tile is a parallel task's (dense on
// ViT's 197 or ConvNeXt's 196 rows: 49 row tiles in tasks of 16), the test
// reads the parallel variable, so peel_tail_loops cannot peel it, and after
// unrolling every accumulator update of the register tile's k loop sits in
// its own `if`, and LLVM may keep the accumulators in memory (a conditional
// store cannot live in a register). version_guarded_loops.h gives whole
// tiles a copy without guards; in the copy that keeps them (the partial
// tile) and wherever versioning did not apply, this pass merges neighbouring
// statements guarded by the same test into one `if`, and moves an `if` that
// is a loop's (or an allocation's, or a let's) whole body above it when the
// test does not read that loop's variable: the whole register tile is then
// guarded once.
//
// Only tests that read no memory are moved (they read loop variables and
// constants, so nothing inside can change them).
#pragma once

#include "ir/stmt.h"

namespace kiln::schedule {

ir::Stmt hoist_guards(const ir::Stmt& s);

}  // namespace kiln::schedule
