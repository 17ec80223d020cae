// Helpers the AMX build tests share (amx_build_test, amx_conv_build_test,
// amx_bmm_build_test): the targets with and without the tile features, the
// switch that runs an AMX build's tiles emulated here, and what a package's
// kernels used.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>

#include "driver/build.h"
#include "driver_harness.h"
#include "ir/functor.h"

namespace kiln::test {

inline graph::Graph import_built(const OnnxBuilder& b, const ScratchDir& dir) {
  std::string path = dir.file("m.onnx");
  write_bytes(path, b.bytes());
  return frontend::import_onnx(path, {});
}

// Template name -> number of kernels of mod.json that use it.
inline std::map<std::string, size_t> templates_of(const nlohmann::json& mod) {
  std::map<std::string, size_t> r;
  for (const auto& k : mod.at("kernels"))
    for (const auto& t : k.at("op_types")) {
      std::string s = t.get<std::string>();
      if (s.find(".x86") != std::string::npos) ++r[s];
    }
  return r;
}

// Kernels of mod.json that run an AMX template with nodes fused after it.
inline size_t templates_with_epilogue(const nlohmann::json& mod) {
  size_t n = 0;
  for (const auto& k : mod.at("kernels")) {
    const auto& ops = k.at("op_types");
    bool tmpl = false;
    for (const auto& t : ops) tmpl |= t.get<std::string>().find("_amx.x86") != std::string::npos;
    n += tmpl && ops.size() > 1;
  }
  return n;
}

inline codegen::Target sapphire_rapids() {
  return codegen::Target::parse("llvm -mtriple=x86_64-linux-gnu -mcpu=sapphirerapids");
}

// This machine's target with AMX's int8 features: the strategy takes the
// tile templates, codegen emulates the tiles (under EmulateTiles).
inline codegen::Target host_with_amx() {
  codegen::Target t = codegen::Target::host();
  t.features.push_back("+amx-tile");
  t.features.push_back("+amx-int8");
  return t;
}

// This machine's target without AMX (what it is on CPUs without AMX): the
// VNNI / AVX2 templates.
inline codegen::Target host_without_amx() {
  codegen::Target t = codegen::Target::host();
  std::erase(t.features, "+amx-tile");
  std::erase(t.features, "+amx-int8");
  t.features.push_back("-amx-tile");
  t.features.push_back("-amx-int8");
  return t;
}

// KILN_DEBUG_AMX_EMULATE=1 for the scope of one test.
struct EmulateTiles {
  EmulateTiles() { setenv("KILN_DEBUG_AMX_EMULATE", "1", 1); }
  ~EmulateTiles() { unsetenv("KILN_DEBUG_AMX_EMULATE"); }
};

// The shape of an AMX kernel's lowered IR as far as its epilogue goes
// (docs/amx.md, "Epilogues"): where the tiles write, what is allocated where,
// where the output is stored.
struct TileKernelShape {
  int gemms = 0;                      // amx_gemm calls
  int gemms_into_task_acc = 0;        // of them, writing the task's accumulator "acc"
  int parallel_loops = 0;             // parallel loops (the template's task loop)
  int64_t acc_elems = 0;              // the per-task accumulator's elements (0: none)
  bool acc_outside_parallel = false;  // an "acc" allocated outside the task loop
  int64_t largest_alloc_elems = 0;    // the largest allocation of the acc's type (-1: dynamic)
  bool output_stored_outside_parallel = false;
  bool output_stored_inside_parallel = false;
  // Inside the task loop, a sequence whose amx_gemm into the task's
  // accumulator comes before the statement storing the output.
  bool epilogue_after_gemm = false;
  int64_t output_elems = 0;  // the kernel's output (its last argument)
};

inline TileKernelShape tile_kernel_shape(const ir::LoweredFunc& f) {
  class Walk : public ir::IRVisitor {
   public:
    Walk(TileKernelShape& r, const ir::Buffer& out) : r_(r), out_(out) {}

   protected:
    void visit_for(const ir::ForNode* op) override {
      bool parallel = op->for_kind == ir::ForKind::Parallel;
      r_.parallel_loops += parallel;
      depth_ += parallel;
      ir::IRVisitor::visit_for(op);
      depth_ -= parallel;
    }
    void visit_allocate(const ir::AllocateNode* op) override {
      const int64_t* n = ir::as_const_int(op->size);
      if (op->buffer->name == "acc") {
        r_.acc_elems = n ? *n : -1;
        r_.acc_outside_parallel |= depth_ == 0;
      }
      allocs_.emplace_back(op->buffer->dtype, n ? *n : -1);
      ir::IRVisitor::visit_allocate(op);
    }
    void visit_store(const ir::StoreNode* op) override {
      if (op->buffer == out_) {
        (depth_ > 0 ? r_.output_stored_inside_parallel : r_.output_stored_outside_parallel) = true;
      }
      ir::IRVisitor::visit_store(op);
    }
    void visit_call(const ir::CallNode* op) override {
      if (op->op == ir::Intrinsic::AmxGemm) {
        ++r_.gemms;
        const auto* c = op->args.at(0).as<ir::LoadNode>();
        if (c && c->buffer->name == "acc") {
          ++r_.gemms_into_task_acc;
          acc_dtype_ = c->buffer->dtype;
        }
      }
      ir::IRVisitor::visit_call(op);
    }
    void visit_seq(const ir::SeqNode* op) override {
      if (depth_ > 0) {
        bool gemm = false;
        for (const ir::Stmt& s : op->seq) {
          if (const auto* e = s.as<ir::EvaluateNode>())
            if (const auto* c = e->value.as<ir::CallNode>())
              if (c->op == ir::Intrinsic::AmxGemm) gemm = true;
          if (gemm && stores_output(s)) r_.epilogue_after_gemm = true;
        }
      }
      ir::IRVisitor::visit_seq(op);
    }

   public:
    // The largest allocation of the accumulator's type (-1: one of unknown size).
    int64_t largest_acc_type_alloc() const {
      int64_t m = 0;
      for (const auto& [t, n] : allocs_)
        if (t == acc_dtype_) m = n < 0 || m < 0 ? -1 : std::max(m, n);
      return m;
    }

   private:
    bool stores_output(const ir::Stmt& s) const {
      struct Finder : ir::IRVisitor {
        const ir::Buffer* out = nullptr;
        bool found = false;
        void visit_store(const ir::StoreNode* op) override {
          found |= op->buffer == *out;
          ir::IRVisitor::visit_store(op);
        }
      } f;
      f.out = &out_;
      f.visit(s);
      return f.found;
    }
    TileKernelShape& r_;
    ir::Buffer out_;
    int depth_ = 0;
    ir::DataType acc_dtype_ = ir::DataType::i32();
    std::vector<std::pair<ir::DataType, int64_t>> allocs_;
  };
  TileKernelShape r;
  r.output_elems = 1;
  for (const ir::Expr& d : f.args.back()->shape) r.output_elems *= *ir::as_const_int(d);
  Walk walk(r, f.args.back());
  walk.visit(f.body);
  r.largest_alloc_elems = walk.largest_acc_type_alloc();
  return r;
}

// Checks every AMX kernel of m that has a fused epilogue: the tiles write a
// per-task accumulator allocated inside the parallel task loop, the epilogue
// stores the output inside that loop right after the task's amx_gemm, and
// nothing is stored outside it. Returns how many such kernels there were.
inline int expect_epilogues_per_task(const driver::BuiltModule& m) {
  int n = 0;
  for (const ir::LoweredFunc& f : m.funcs) {
    TileKernelShape s = tile_kernel_shape(f);
    if (s.gemms == 0 || s.gemms_into_task_acc == 0) continue;
    SCOPED_TRACE(f.name);
    ++n;
    EXPECT_EQ(s.gemms_into_task_acc, s.gemms) << "some tiles write elsewhere";
    EXPECT_GE(s.parallel_loops, 1);
    EXPECT_GT(s.acc_elems, 0);
    EXPECT_FALSE(s.acc_outside_parallel);
    EXPECT_TRUE(s.output_stored_inside_parallel);
    EXPECT_FALSE(s.output_stored_outside_parallel);
    EXPECT_TRUE(s.epilogue_after_gemm);
    // No allocation of the accumulator's type beyond one task's.
    EXPECT_EQ(s.largest_alloc_elems, s.acc_elems);
  }
  return n;
}

}  // namespace kiln::test
