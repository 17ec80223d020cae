// Fixed-length features of a lowered kernel and of a config, for the tuner's
// cost model (cost_model.h).
//
// The cost model ranks candidate configs of a workload by predicted speed. It
// learns from the lowered loop IR rather than from knob values alone so that
// what it learns on one workload (a 16-lane contiguous register tile reused
// over a long reduction is fast; a strided innermost access is slow) carries
// over to workloads and templates it has not measured. Every vector has the
// same length whatever the kernel, so rows of different workloads share one
// training matrix; a slot a kernel does not fill is 0.
//
// Layout of extract_features (kLoweredFeatures floats). "log" below is
// log2(1 + x), applied to every count, size and extent, since they span
// orders of magnitude; trip counts multiply the extents of the enclosing
// loops and count statements under an `if` as if it always held.
//
//   [0, 48)   loops: the chain of loops around the hottest innermost loop (the
//             innermost loop with the most element operations, weighted by
//             its trip count), innermost first, kLoopSlots = 6 slots of 8:
//               0 log extent, 1..4 kind one-hot (serial, parallel, vectorized,
//               unrolled; lowering has already turned vectorized and unrolled
//               loops into vector statements and copies, so mostly 1 or 2),
//               5 depth (0 = outermost), 6 log product of the extents from
//               the outermost loop down to this one, 7 log number of store
//               statements in its body (copies made by unrolling show here).
//             Fewer loops than slots: the outer slots stay 0.
//   [48, 103) buffers: the kBufferSlots = 5 buffers with the most bytes
//             touched (ties: more element accesses, then first appearance),
//             11 floats each:
//               0 read, 1 written (0/1), 2 log bytes touched (distinct
//               elements, estimated from the extents of the loops its indices
//               depend on, capped at the buffer's size), 3 log element
//               accesses, 4 log reuse (element accesses / distinct elements),
//               5 log |lane stride| of its main access (the access with the
//               most element accesses; 0 when scalar or a broadcast),
//               6 log |stride| along the innermost enclosing loop of that
//               access, in elements (0 if the index does not depend on it),
//               7 log bytes touched per iteration of the outermost loop (the
//               working set of one parallel task), 8 log bytes touched by
//               one run of the innermost loop, 9 local (register/stack tile)
//               scope, 10 log2 lanes of the main access.
//   [103, 117) arithmetic, trip-weighted element operations (an operation on
//             a vector of n lanes counts n), each log:
//               0 float add/sub, 1 float mul, 2 fused multiply-add candidates
//               (a float add/sub with a float mul operand), 3 float div,
//               4 float min/max, 5 integer arithmetic (index math),
//               6 comparisons, logic and selects (guards included),
//               7 intrinsic calls (exp, tanh, ...), 8 casts, 9 loads,
//               10 stores, 11 all float operations, 12 vector operations
//               (counted once per instruction, not per lane), 13 scalar
//               float operations.
//   [117, 129) whole kernel:
//               0 widest vector store (lanes), 1 lanes of the hottest loop's
//               main store, 2 log extent of the widest parallel loop,
//               3 number of parallel loops, 4 log number of loops,
//               5 deepest loop nesting, 6 log number of store statements
//               (code size), 7 log bytes of local allocations, 8 log bytes
//               of global (workspace) allocations, 9 log trip count of the
//               hottest innermost loop, 10 log (float operations / bytes
//               touched by all buffers), 11 log trip-weighted `if` guards.
//
// Layout of knob_features (kKnobFeatures floats): the first kKnobSlots = 8
// knobs of the config in definition order, 5 floats each:
//   0..3 the first four values of the knob (a split's factors f0..f3, a
//        reorder's permutation, an integer knob's value; an annotation's
//        values as 0 none, 1 unroll, 2 vec), each log2(1 + |v|);
//   4 log position of the chosen candidate in the knob's candidate list.
// Knobs past the eighth are not represented.
//
// Everything here is deterministic: the same kernel or config gives the same
// floats bit for bit (the walk follows statement order; nothing depends on
// addresses or hashing).
#pragma once

#include <string>
#include <vector>

#include "ir/function.h"
#include "schedule/config_space.h"

namespace kiln::tuner {

inline constexpr int kLoopSlots = 6, kLoopFeatures = 8;
inline constexpr int kBufferSlots = 5, kBufferFeatures = 11;
inline constexpr int kArithFeatures = 14, kKernelFeatures = 12;
inline constexpr int kLoweredFeatures = kLoopSlots * kLoopFeatures +
                                        kBufferSlots * kBufferFeatures + kArithFeatures +
                                        kKernelFeatures;  // 129
inline constexpr int kKnobSlots = 8, kKnobSlotFeatures = 5;
inline constexpr int kKnobFeatures = kKnobSlots * kKnobSlotFeatures;  // 40
inline constexpr int kFeatures = kLoweredFeatures + kKnobFeatures;    // 169

// Offsets of the sections of extract_features' vector.
inline constexpr int kLoopOffset = 0;
inline constexpr int kBufferOffset = kLoopOffset + kLoopSlots * kLoopFeatures;
inline constexpr int kArithOffset = kBufferOffset + kBufferSlots * kBufferFeatures;
inline constexpr int kKernelOffset = kArithOffset + kArithFeatures;

// kLoweredFeatures floats describing f (layout above). f must be flat loop IR
// (what schedule::lower returns).
std::vector<float> extract_features(const ir::LoweredFunc& f);

// kKnobFeatures floats describing cfg's knob values (layout above).
std::vector<float> knob_features(const schedule::Config& cfg);

// extract_features(f) followed by knob_features(cfg): kFeatures floats, what
// the tuner feeds the cost model.
std::vector<float> combined_features(const ir::LoweredFunc& f, const schedule::Config& cfg);

// A short name per slot of combined_features ("loop0.extent", "buf2.reuse",
// "arith.fma", "knob3.v1", ...), for debugging and feature-importance dumps.
std::vector<std::string> feature_names();

}  // namespace kiln::tuner
