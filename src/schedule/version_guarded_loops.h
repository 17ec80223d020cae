// Versions a loop body whose inner loops test guards that the body cannot
// change: `if (c1 && ... && cn) body[every ci true] else body`.
//
// A register tile that a split leaves partial somewhere other than the last
// iteration of a serial loop (there peel_tail_loops.h splits it off) keeps
// its guards inside the reduction loop: dense over ViT's 197 rows, in row
// tiles of 4 spread over parallel tasks, tests `row < 197` on every
// accumulator update of the k loop, and LLVM keeps those accumulators in
// memory. The guards read only variables of loops around the tile, so the
// tile can test them all once: every full tile runs the first version, which
// has no guard left, and only a partial one runs the original (how MLAS and
// oneDNN keep a full-tile kernel beside the tail's).
//
// The same holds for vectorize_loops' `if (whole vector) vector statement
// else predicated vector statement`, which a column tile that does not
// divide the row leaves around every accumulator update: the first version
// takes the unpredicated arm of each.
//
// A body is versioned when some test (an `if`, with or without else, whose
// test reads no memory and no variable bound inside the body) sits inside a
// loop nested in it and guards a store to a Local buffer (an accumulator);
// the first version takes every such test's then-case; the outermost
// such body is versioned, once, where the copy keeps the kernel within
// `code_budget` (estimate_code_size, schedule/code_size.h; <= 0: no limit).
#pragma once

#include <cstdint>

#include "ir/stmt.h"

namespace kiln::schedule {

// At most this many distinct guards go into one version's test.
constexpr int kMaxVersionedGuards = 8;

ir::Stmt version_guarded_loops(const ir::Stmt& s, int64_t code_budget, int vector_bits);

}  // namespace kiln::schedule
