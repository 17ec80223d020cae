// Operator templates as data: one registry of tunable kernel templates.
//
// A template (conv2d_NCHWc.x86, dense_pack.x86, ...) is a self-contained unit:
// the workload it accepts (see workload.h; each template documents its params
// in order), its config space, a fallback config chosen from the shape alone,
// its tensor expression, the schedule that applies a config, its FLOP count,
// its physical input/output shapes and a host reference in its own layouts.
// The graph compiler and the tuner find templates by name through
// find_template()/get_template() and never special-case one.
//
// Adding a template: implement OpTemplate in its own file and list it in the
// registry table in op_template.cc; then give the graph compiler a row for it
// in the strategy table (graph/passes/strategy.h: which operator, on which
// targets, with which rewrite). docs/architecture.md, "Templates and the
// strategy table", has the whole list.
#pragma once

#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "ir/function.h"
#include "ir/tensor.h"
#include "ops/kernel.h"
#include "ops/workload.h"
#include "schedule/config_space.h"
#include "schedule/lower.h"
#include "schedule/schedule.h"
#include "support/isa.h"

namespace kiln::ops {

struct TemplateInstance {
  std::vector<ir::Tensor>
      inputs;         // placeholders in kernel-argument order, in the template's layouts
  ir::Tensor anchor;  // the template's main output (e.g. conv result in NCHW[oc_bn]c)
  // Workload facts that schedule() needs and cannot read off the tensors'
  // shapes, by name (Winograd's "dilation_h" / "dilation_w": its output
  // phases); most templates leave it empty.
  std::map<std::string, int64_t> facts = {};
};

// Facts the build adds from the graph (graph/passes/parallel_splits.h), read
// by the NCHW[x]c convolutions' schedules: 1 when the kernel's parallel loop
// is to run its rows before its channel blocks (kSplitRows), and when its
// data input was written that way (kInputSplitRows: a padding copy follows
// it). Absent, as in the tuner's measurements of a kernel alone: channels.
inline constexpr const char* kSplitRows = "split_rows";
inline constexpr const char* kInputSplitRows = "input_split_rows";
bool has_fact(const TemplateInstance& inst, const char* fact);

class OpTemplate {
 public:
  virtual ~OpTemplate() = default;
  virtual std::string name() const = 0;  // "conv2d_NCHWc.x86"
  // Whether the template's activations are in NCHW[x]c: its first input's and
  // its output's last dims are channel blocks that the config chooses (and
  // that neighbouring operators must agree on; see layout_blocks()).
  virtual bool channel_blocked() const { return false; }
  // Every method below throws std::invalid_argument naming the workload key
  // when the workload is not one this template accepts.
  virtual schedule::ConfigSpace space(const Workload& w) const = 0;
  // The best choice without measuring for the target's ISA (lanes, register
  // budget); each template documents its rule.
  virtual schedule::Config fallback(const Workload& w, const Isa& isa) const = 0;
  // Whether a config of the space suits the ISA: its register tile's
  // accumulators (in the ISA's vectors) fit the ISA's vector registers, so
  // that the tile does not spill. The space itself is the same on every ISA
  // (records name configs by knob values, and a config computes the same
  // result everywhere); this is the ISA's part of it: what the tuner searches
  // on that target and what a config borrowed from another ISA must satisfy.
  // Every fallback(w, isa) fits isa.
  virtual bool fits(const Workload& w, const schedule::Config& cfg, const Isa& isa) const {
    return true;
  }
  virtual TemplateInstance compute(const Workload& w, const schedule::Config& cfg) const = 0;
  // Schedules inst inside sch (created by the caller with create_schedule({output})). `output`
  // is either inst.anchor or an injective epilogue of the SAME shape computed from inst.anchor
  // and other tensors (bias add, relu, clip, residual add, ...). The template inlines every
  // non-placeholder stage other than its own stages and `output`, and computes the anchor
  // inside output's register tile (the anchor at the tile loop of the output, the epilogue
  // applied while the tile is hot).
  virtual void schedule(schedule::Schedule& sch, const TemplateInstance& inst,
                        const ir::Tensor& output, const schedule::Config& cfg) const = 0;
  virtual double flops(const Workload& w) const = 0;
  // Shapes of the template's inputs and output for a config (the physical layouts).
  virtual std::vector<std::vector<int64_t>> input_shapes(const Workload& w,
                                                         const schedule::Config& cfg) const = 0;
  virtual std::vector<int64_t> output_shape(const Workload& w,
                                            const schedule::Config& cfg) const = 0;
  // Reference on host float arrays in the template's layouts (inputs in order, then the
  // output): used by tests and by the tuner to verify candidates. Accumulates in double.
  // Templates with non-float inputs or output throw std::logic_error here and implement
  // reference_typed() instead.
  virtual void reference(const Workload& w, const schedule::Config& cfg,
                         const std::vector<const float*>& inputs, float* output) const = 0;

  // Element types of the inputs (kernel-argument order) and of the output. The defaults
  // (every one float32) are what the float templates have; integer templates (dense_int8,
  // conv2d_NCHWc_int8) override both. Callers that allocate host buffers for a template
  // (the measure worker, the graph interpreter, the kernel tests) size and fill them by
  // these types.
  virtual std::vector<ir::DataType> input_dtypes(const Workload& w) const;
  virtual ir::DataType output_dtype(const Workload& w) const { return ir::DataType::f32(); }
  // The reference on buffers of those types. Integer templates compute exactly (int64
  // accumulation) so that kernels are compared bit-exact. The default calls reference():
  // float templates need not implement it.
  virtual void reference_typed(const Workload& w, const schedule::Config& cfg,
                               const std::vector<const void*>& inputs, void* output) const;
  // Random data for input `i` (kernel-argument order) of type t, n elements, where the
  // tuner and the kernel tests check the kernel against the reference. The default is
  // fill_random(); a template whose kernel is exact only on a subset of the values
  // (the int8 templates with 7-bit weights, ops/int8_weight_range.h) draws from it.
  virtual void fill_random_input(const Workload& w, size_t i, ir::DataType t, void* data, int64_t n,
                                 std::mt19937_64& rng) const;

  // A template whose kernel the schedule language cannot express (tile
  // instructions through the ir::amx_gemm statement, which no schedule
  // primitive produces) builds its loop IR itself: true here, and
  // build_loops() writes the anchor, in its own layout, from the inputs.
  // compute() still defines what it computes (the epilogues fused after it,
  // the interpreter, the reference); schedule() is then used by nothing that
  // generates its code. lower_template_kernel() and driver/lower_group.cc
  // take this path; everything else stays template-agnostic.
  virtual bool builds_own_loops() const { return false; }
  // What such a template runs in each of its parallel tasks right after the
  // task's tile GEMM: a fused epilogue (driver/lower_group.cc), on the task's
  // rows while they are still in L1/L2, instead of a second pass over a
  // whole-output accumulator. Called with the task's first row `row0` of the
  // anchor's flat [rows, N] view (N its last dimension, the rows all the
  // others), its row count, and `acc`: the task's accumulator, `rows` x N
  // row-major from offset 0, in the anchor's element type, which the GEMM has
  // just written. Returns the statement that finishes those rows (reads acc,
  // writes the group's output).
  using TaskEpilogue =
      std::function<ir::Stmt(const ir::Expr& row0, int64_t rows, const ir::Buffer& acc)>;
  // The kernel body over `args`: the input buffers in kernel-argument order,
  // then, without an epilogue, the anchor's buffer (flat as input_shapes /
  // output_shape say), which the loops write. With an epilogue `args` holds
  // the inputs only: each task's GEMM writes an accumulator of the task's
  // rows, allocated inside the task (never the whole output), and the task
  // then runs epilogue() on it.
  virtual ir::Stmt build_loops(const Workload& w, const schedule::Config& cfg,
                               const std::vector<ir::Buffer>& args,
                               const TaskEpilogue& epilogue) const;
};

// Random host data of one element type, n elements at `data`: float32 uniform in
// [-1, 1] (the same draws as before typed buffers existed, so float references and
// their caches do not change), uint8 and int8 over their full range (every product
// and sign the integer instructions can see), bfloat16 the float32 draws rounded to
// nearest even, int32 uniform in [-2^20, 2^20] (a bias
// of realistic size; it cannot overflow an int32 sum with it). Throws
// std::invalid_argument on any other type.
void fill_random(ir::DataType t, void* data, int64_t n, std::mt19937_64& rng);
// How far `out` is from `ref` (n elements of type t): float32 the max relative error
// of ops/reference.h; integer types 0 when bit-identical, else +inf (integer kernels
// are exact: any difference is a wrong result).
double max_error(ir::DataType t, const void* out, const void* ref, int64_t n);
// The graph's dtype name ("float32", "uint8", "int8", "int32") of t and back; throws
// std::invalid_argument naming the type otherwise.
std::string graph_dtype_name(ir::DataType t);
ir::DataType dtype_from_graph_name(const std::string& name);

const OpTemplate* find_template(const std::string& name);  // nullptr if unknown
const OpTemplate& get_template(const std::string& name);   // throws std::invalid_argument
std::vector<std::string> template_names();                 // registry order

// The template alone as a kernel: compute, schedule with output = anchor,
// arguments inputs then anchor, named after the template ("conv2d_NCHWc_x86").
Kernel make_kernel(const OpTemplate& t, const Workload& w, const schedule::Config& cfg);

// The template alone, lowered (what the tuner compiles and measures): the
// template's own loops when it builds_own_loops(), else lower() of
// make_kernel's schedule with `options`. Named as make_kernel names it.
ir::LoweredFunc lower_template_kernel(const OpTemplate& t, const Workload& w,
                                      const schedule::Config& cfg,
                                      const schedule::LowerOptions& options);

// The channel blocks (input, output) a conv template's config lays its
// activations out in; {0, 0} for templates without a blocked layout. Configs
// of neighbouring convolutions that disagree cost a layout transform between
// them, which a kernel measured alone does not show.
std::pair<int64_t, int64_t> layout_blocks(const OpTemplate& t, const Workload& w,
                                          const schedule::Config& cfg);
// The channel blocks of the template's fallback. They are the same for every
// ISA (16 channels where they divide: a multiple of every ISA's lanes), so
// that records and layouts agree across targets; only register tiles follow
// the ISA.
std::pair<int64_t, int64_t> fallback_layout_blocks(const OpTemplate& t, const Workload& w);

namespace detail {

// What every template's schedule() starts with. Checks that `output` is the
// anchor or has its shape; inlines every non-placeholder stage of sch that is
// neither `output` nor one of the anchor's own stages; then sets up the
// register-tile pair: `tile` accumulates (the anchor itself in Local scope, or
// a Local cache_write of it when output == anchor) and `out` is the stage
// whose tile loop the caller attaches `tile` to.
struct TileStages {
  schedule::Stage tile;
  schedule::Stage out;
};
TileStages prepare_anchor(schedule::Schedule& sch, const ir::Tensor& anchor,
                          const ir::Tensor& output, const std::string& template_name);

// Whether the epilogue stages between `anchor` and `output` compute a
// transcendental function (exp, log, tanh, erf, sigmoid, pow) or a float
// division: tens of instructions and several constants per vector, so that
// one register tile's worth at once, unrolled, spills.
bool epilogue_is_heavy(const ir::Tensor& anchor, const ir::Tensor& output);

// Constant shape of a tensor.
std::vector<int64_t> const_shape(const ir::Tensor& t);

// Largest divisor of n that is <= cap (at least 1).
int64_t largest_divisor_at_most(int64_t n, int64_t cap);

// The config of `space` whose split/knob values are given as JSON knobs text
// (the same format as Config::to_json's "knobs", without braces).
schedule::Config config_from_knobs(const schedule::ConfigSpace& space, const std::string& knobs);

// Knob values by name, for fallback(): splits by their inner factors (the
// outermost is derived), then the point of a space (throws if not a point).
class KnobValues {
 public:
  KnobValues& split(const std::string& name, int64_t extent, const std::vector<int64_t>& inner);
  KnobValues& knob(const std::string& name, int64_t value);
  schedule::Config in(const schedule::ConfigSpace& space) const;

 private:
  std::string text_;
};

[[noreturn]] void bad_workload(const Workload& w, const std::string& what);

}  // namespace detail
}  // namespace kiln::ops
