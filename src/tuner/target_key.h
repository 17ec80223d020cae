// What a tuning record is valid for, besides its workload: the target.
//
// A kernel tuned on one machine is only known to be right and fast where the
// same code comes out: the same triple, CPU model and fast-math setting, the
// same ISA features codegen may use, the same thread count it was measured
// with, and the same kiln and LLVM that generated it (docs/design.md, "What a
// tuning record is keyed by"). TVM's keys ignored -mcpu and bit their users;
// these keys name everything that changes the generated code, and nothing
// that does not (a host's +sgx or +rdrnd must not split its records).
//
// The key is one line of text, e.g.
//   llvm -mtriple=x86_64-pc-linux-gnu -mcpu=rocketlake; features=+avx2,+avx512f,+fma;
//   threads=8; kiln=0.1.0; llvm=16.0.6
// (without the line break), and parse(key()) gives the same TargetKey back.
// Times measured inside a compiled model rather than in isolation (kiln
// tune's in-graph step, driver/measure_in_graph.h) are kept under the same
// key with a sixth field, "; measured=in-graph": they are a different
// measurement of the same kernels, never mixed with the isolated ones (trial
// counts, claims and the search see only the isolated key). Layout
// transforms' times (kiln tune's last step, tuner/layout_records.h) are kept
// under "; measured=layout-transform", for the build's layout choice.
// Isolated times taken with cold weights (MeasureOptions::cold_weights: every
// call reads its weights from memory, as in a model whose weights outgrow the
// last-level cache) are kept under "; measured=cold-weights": the search of a
// cold run sees only those, and builds read them before warm isolated ones.
#pragma once

#include <string>

namespace kiln::codegen {
struct Target;
}

namespace kiln::tuner {

struct TargetKey {
  // codegen::Target::str() without its feature list: "llvm -mtriple=T [-mcpu=C] [-fast-math]".
  std::string target;
  // The effective features that matter for codegen, sorted, "+a,+b"; empty if none.
  std::string features;
  int threads = 1;
  std::string kiln_version;
  std::string llvm_version;
  // "" for the tuner's isolated measurements, kColdWeights for isolated ones
  // with cold weights, kInGraph for in-graph ones.
  std::string measured;
  static constexpr const char* kInGraph = "in-graph";
  static constexpr const char* kLayoutTransform = "layout-transform";
  static constexpr const char* kColdWeights = "cold-weights";

  std::string key() const;
  // The same key with measured = kInGraph.
  TargetKey in_graph() const;
  // A target string codegen::Target::parse turns back into the measured
  // target's ISA: `target` with the features as -mattr. `target` alone is not
  // enough where -mcpu implies nothing (a host LLVM calls "generic", such as
  // Zen 5 with LLVM 16, parses as SSE).
  std::string codegen_target() const;
  // The key of isolated measurements: measured = kColdWeights when `cold`, else "".
  TargetKey isolated(bool cold) const;
  // Parses key()'s format; anything else throws std::invalid_argument quoting the text.
  static TargetKey parse(const std::string& key);
  // The key of records tuned for `target` with `threads` threads by this kiln and LLVM.
  // Throws std::invalid_argument if threads < 1.
  static TargetKey for_target(const codegen::Target& target, int threads);

  // The fields in which *this and `other` differ, e.g. "threads 8 vs 4; llvm 16.0.6 vs 17.0.1";
  // empty if the keys are equal. For messages saying why records do not apply.
  std::string differences(const TargetKey& other) const;

  bool operator==(const TargetKey&) const = default;
};

}  // namespace kiln::tuner
