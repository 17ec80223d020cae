// How each kernel shares its work between threads: by rows or by channel
// blocks of its NCHW[x]c activations.
//
// The runtime gives each thread one contiguous block of a kernel's parallel
// loop (runtime/thread_pool.cc; a thread that finishes first takes over only
// the tail of a slower one's), so the loop order decides which part of the
// output a thread writes: the leading dims of the fused parallel loop. When a
// kernel reads the part of a tensor that the other core wrote, every cache
// line crosses between the cores; on the 2-core Zen 5 VM that cost 2.4-3.3x
// a read of its own lines, and writing lines the other core holds 6.7x
// (bench/runtime/results/row-splits-2026-11-30-zen5.md). A kernel that splits
// its output the way its producer split its input reads only what its own
// core wrote.
//
// The choice per kernel, in graph order:
//  - a direct convolution (conv2d_NCHWc.x86) splits by rows when its
//    activations (input plus output) outweigh its weights: each thread then
//    reads all the weights but only its rows of the input; else by channels
//    (each thread half the weights, all of the input);
//  - a kernel without weights of its own (elementwise, pooling, padding,
//    concat copies, layout transforms) and a lane-window convolution
//    (depthwise, grouped by lanes: a few weights a channel) split as the
//    producer of their largest input did; a graph input counts as rows;
//  - every other template (Winograd, dense, batched matmul, grouped convs,
//    int8 and bf16 convs) keeps its channel split: Winograd by rows ran
//    ResNet-18's 3x3 convolutions 1.10-1.34x slower.
// A kernel that reduces whole planes (GlobalAveragePool, a squeeze-
// excitation's squeeze) can only split by channels; what it reads is written
// by channels too, and so, back through the kernels that follow their input,
// is what those read: otherwise both cores read that tensor, and the core
// that next writes its storage takes every line back from the other.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "graph/passes/fuse_ops.h"

namespace kiln::graph {

struct ParallelSplit {
  bool rows = false;        // the kernel's own parallel loop: rows first
  bool input_rows = false;  // its main input was written by rows (a conv's padding copy)
};

// One split per group of `kernel_groups` (each becomes one kernel, in
// execution order). view_sources: the values whose storage another value's
// view shares (a reshape's input, a concat's inputs written in place), by the
// view's value: a reader of the view follows the producers of those.
std::vector<ParallelSplit> choose_parallel_splits(
    const Graph& g, const std::vector<FusedGroup>& kernel_groups,
    const std::map<std::string, std::vector<std::string>>& view_sources);

}  // namespace kiln::graph
