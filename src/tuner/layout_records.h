// The records side of the build's graph-level layout choice
// (graph/passes/choose_layouts.h): each blocked convolution's candidate
// configs per channel-block pair, and layout transforms' times.
//
// Candidates. Per workload and per distinct (in_block, out_block) pair, one
// candidate: its time is the pair's fastest isolated record (so that every
// candidate of the model is timed the same way: in-graph times exist only for
// the fallback's blocks, and are slower than isolated ones, which would bias
// the choice against them); its config is the pair's fastest in-graph record
// where there is one (kiln tune's in-graph step), else that isolated one.
// More than one config per pair would not change the choice: a pair's options
// cost the same transforms, so only its fastest can win.
//
// Transform times are records of the target key's "measured=layout-transform"
// variant (target_key.h), workload key
//   layout_transform(data=[N,C,H,W],src_block=[B1],dst_block=[B2],dtype=float32)
// and config "{}", written by kiln tune after its search (cli/tune_command.cc,
// driver/measure_transforms.h). A transform without a record is estimated from
// the bytes it moves and this machine's copy bandwidth (measured once per
// process), and the build report says how many were.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tuner/records.h"

namespace kiln::codegen {
struct Target;
}

namespace kiln::tuner {

struct BlockCandidate {
  std::string config_json;
  double ms = 0;  // the block pair's fastest isolated time
  int64_t in_block = 0, out_block = 0;
  std::vector<int64_t> out_nchw;  // the output's NCHW shape
};

// Candidates of each workload (of a channel-blocked template) that has
// verified records in `db` for `target` measured with `threads` threads.
std::map<std::string, std::vector<BlockCandidate>> layout_candidates(
    const RecordDB& db, const codegen::Target& target, int threads,
    const std::vector<std::string>& workloads);

// The workload key of one transform's record.
std::string transform_workload_key(const std::vector<int64_t>& nchw, int64_t from, int64_t to);

// A transform a model's candidates may need.
struct TransformNeed {
  std::vector<int64_t> shape;  // NCHW
  int64_t from = 0, to = 0;
};
// For each workload's input (its "data" shape): every transform from NCHW or
// a block any candidate offers (that divides its channels) into an in_block
// of its own candidates; and each candidate's output back to NCHW (a join
// whose writers disagree runs in NCHW). Sorted, without duplicates.
std::vector<TransformNeed> needed_transforms(
    const std::map<std::string, std::vector<BlockCandidate>>& candidates);

// Transform workload key -> the mean of its record's times, for the target.
std::map<std::string, double> load_transform_times(const RecordDB& db,
                                                   const codegen::Target& target, int threads);
// The record of one measured transform (the target key: for_target(...) with
// measured = layout-transform).
Record transform_record(const TransformNeed& t, const std::string& target_key,
                        const std::vector<double>& times_ms);
std::string transform_target_key(const codegen::Target& target, int threads);

// This machine's copy bandwidth in GB/s (a 64 MiB memcpy, best of a few;
// measured on the first call).
double copy_bandwidth_gbs();
// A transform's estimated time: it reads and writes every element once.
double estimate_transform_ms(const std::vector<int64_t>& nchw);

}  // namespace kiln::tuner
