// Peels the partial last iteration off serial loops.
//
// A split whose factor does not divide the extent leaves guards in the loop
// body: after unroll_loops, tests like `ow.o < 2` on the outer tile loop that
// hold on every iteration but the last. Left in place, they sit inside the
// reduction loops, so LLVM keeps the guarded accumulators in memory (a
// conditional store cannot live in a register) and the whole register tile
// spills. This pass rewrites such a loop as the first extent-1 iterations,
// where simplify() then drops the guards, followed by the last iteration on
// its own, where they fold to constants: a full tile and a narrower one, each
// held in registers (how MLAS and oneDNN handle a row that the tile width does
// not divide).
#pragma once

#include "ir/stmt.h"

namespace kiln::schedule {

// Loops of constant extent 2..kMaxPeeledExtent only: peeling copies the body once.
ir::Stmt peel_tail_loops(const ir::Stmt& s);

}  // namespace kiln::schedule
