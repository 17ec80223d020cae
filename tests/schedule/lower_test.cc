// Lowering without code generation: the interpreter runs the lowered IR and
// checks every memory access; structural checks look at what each pass made.
#include "schedule/lower.h"

#include <gtest/gtest.h>

#include <array>
#include <random>

#include "interpreter.h"
#include "ir/functor.h"
#include "ir/printer.h"
#include "ir/tensor.h"
#include "ops/dense.h"
#include "ops/reference.h"
#include "schedule/split_apply.h"

namespace kiln::test {
namespace {

using namespace kiln::ir;
using schedule::create_schedule;
using schedule::lower;

struct Dense {
  Tensor A, B, C;
  IterVar k;
};

Dense make_dense(int64_t M, int64_t N, int64_t K) {
  Dense d;
  d.A = placeholder({M, K}, DataType::f32(), "A");
  d.B = placeholder({K, N}, DataType::f32(), "B");
  d.k = reduce_axis(K, "k");
  d.C = compute(
      {M, N},
      [&](const std::vector<Var>& i) {
        return sum(at(d.A, i[0], d.k->var) * at(d.B, d.k->var, i[1]), {d.k});
      },
      "C");
  return d;
}

double run_dense(const schedule::Schedule& sch, const Dense& d, int64_t M, int64_t N, int64_t K) {
  LoweredFunc f = lower(sch, {d.A, d.B, d.C}, "dense");
  auto A = ops::reference::random_uniform(M * K, 1), B = ops::reference::random_uniform(K * N, 2);
  std::vector<float> C(M * N, NAN), ref(M * N);
  ops::reference::dense(A.data(), B.data(), ref.data(), M, N, K);
  Interpreter().run(f, {A.data(), B.data(), C.data()});
  return ops::reference::max_relative_error(C.data(), ref.data(), C.size());
}

// C's register tile: rows x cols of C computed at C's tile loop into a Local
// buffer, accumulating over k with its rows unrolled and columns vectorized;
// C's own tile copies it out, its columns vectorized (and rows unrolled if
// asked).
void schedule_register_tile(schedule::Schedule& sch, const Dense& d, int64_t rows, int64_t cols,
                            bool unroll_copy_rows) {
  Tensor CC = sch.cache_write(d.C, MemScope::Local);
  auto s = sch[d.C];
  auto t = s->tile(s->axis(0), s->axis(1), rows, cols);
  if (unroll_copy_rows) s->unroll(t[2]);
  s->vectorize(t[3]);
  auto sc = sch[CC];
  sc->compute_at(s, t[1]);
  sc->reorder({sc->reduce_axis(0), sc->axis(0), sc->axis(1)});
  sc->unroll(sc->axis(0));
  sc->vectorize(sc->axis(1));
}

int count_loads_with_ramp(const Stmt& s) {
  int n = 0;
  post_order_visit(s, [&](const Expr& e) {
    if (auto* l = e.as<LoadNode>()) n += l->index.as<RampNode>() != nullptr;
  });
  return n;
}

TEST(Lower, DefaultScheduleComputesDense) {
  auto d = make_dense(5, 7, 3);
  EXPECT_LE(run_dense(create_schedule({d.C}), d, 5, 7, 3), 1e-6);
}

TEST(Lower, NonDividingSplitsStayInBounds) {
  for (int64_t f : {2, 3, 4, 5, 8, 16}) {
    auto d = make_dense(13, 11, 7);
    auto sch = create_schedule({d.C});
    auto s = sch[d.C];
    auto [io, ii] = s->split(s->axis(0), f);
    auto [jo, ji] = s->split(s->axis(1), f + 1);
    auto [ko, ki] = s->split(s->reduce_axis(0), f);
    s->reorder({io, jo, ko, ii, ki, ji});
    SCOPED_TRACE("factor " + std::to_string(f));
    EXPECT_LE(run_dense(sch, d, 13, 11, 7), 1e-6);
  }
}

TEST(Lower, CacheWriteTileIsAllocatedAtItsRegion) {
  auto d = make_dense(32, 64, 16);
  auto sch = create_schedule({d.C});
  schedule_register_tile(sch, d, 4, 16, /*unroll_copy_rows=*/false);
  LoweredFunc f = lower(sch, {d.A, d.B, d.C}, "dense");
  // The local tile holds exactly 4 x 16 elements and the kernel has no guard.
  int64_t local_size = -1;
  bool has_if = false;
  class Finder : public IRVisitor {
   public:
    int64_t* size;
    bool* has_if;
    void visit_allocate(const AllocateNode* op) override {
      if (op->buffer->scope == MemScope::Local) *size = *as_const_int(op->size);
      IRVisitor::visit_allocate(op);
    }
    void visit_if(const IfThenElseNode* op) override {
      *has_if = true;
      IRVisitor::visit_if(op);
    }
  } finder;
  finder.size = &local_size;
  finder.has_if = &has_if;
  finder.visit(f.body);
  EXPECT_EQ(local_size, 64) << to_string(f);
  EXPECT_FALSE(has_if) << to_string(f);
  EXPECT_GT(count_loads_with_ramp(f.body), 0) << to_string(f);
  EXPECT_LE(run_dense(sch, d, 32, 64, 16), 1e-6);
}

TEST(Lower, UnrolledLoopDisappears) {
  auto d = make_dense(4, 4, 4);
  auto sch = create_schedule({d.C});
  auto s = sch[d.C];
  s->unroll(s->axis(1));
  LoweredFunc f = lower(sch, {d.A, d.B, d.C}, "dense");
  int loops = 0;
  class Loops : public IRVisitor {
   public:
    int* n;
    void visit_for(const ForNode* op) override {
      ++*n;
      IRVisitor::visit_for(op);
    }
  } v;
  v.n = &loops;
  v.visit(f.body);
  // Loops i and k remain; j is replicated 4 times, each copy with its own k loop.
  EXPECT_EQ(loops, 5) << to_string(f);
}

TEST(Lower, WithoutUnrollingTheUnrollLoopStaysAndStillComputes) {
  // LowerOptions{.unroll = false} (the tuner's feature extraction): the loop
  // marked unroll remains one loop, and the IR computes the same.
  auto d = make_dense(5, 4, 3);
  auto sch = create_schedule({d.C});
  auto s = sch[d.C];
  s->unroll(s->axis(1));
  LoweredFunc f = lower(sch, {d.A, d.B, d.C}, "dense", schedule::LowerOptions{.unroll = false});
  int loops = 0, unroll_loops = 0;
  class Loops : public IRVisitor {
   public:
    int *n, *unrolled;
    void visit_for(const ForNode* op) override {
      ++*n;
      *unrolled += op->for_kind == ForKind::Unrolled;
      IRVisitor::visit_for(op);
    }
  } v;
  v.n = &loops;
  v.unrolled = &unroll_loops;
  v.visit(f.body);
  EXPECT_EQ(loops, 3) << to_string(f);
  EXPECT_EQ(unroll_loops, 1) << to_string(f);
  auto A = ops::reference::random_uniform(15, 1), B = ops::reference::random_uniform(12, 2);
  std::vector<float> C(20, NAN), ref(20);
  ops::reference::dense(A.data(), B.data(), ref.data(), 5, 4, 3);
  Interpreter().run(f, {A.data(), B.data(), C.data()});
  EXPECT_LE(ops::reference::max_relative_error(C.data(), ref.data(), C.size()), 1e-6);
}

TEST(Lower, FusedAndInlinedStagesCompute) {
  Tensor A = placeholder({6, 10}, DataType::f32(), "A");
  Tensor B = compute(
      {6, 10}, [&](const std::vector<Var>& i) { return at(A, i[0], i[1]) * 2.0f; }, "B");
  Tensor C = compute(
      {6, 10}, [&](const std::vector<Var>& i) { return at(B, i[0], i[1]) + 1.0f; }, "C");
  auto sch = create_schedule({C});
  sch[B]->compute_inline();
  auto s = sch[C];
  auto fused = s->fuse(s->axis(0), s->axis(1));
  auto [o, in] = s->split(fused, 8);
  s->vectorize(in);
  s->parallel(o);
  LoweredFunc f = lower(sch, {A, C}, "k");
  auto a = ops::reference::random_uniform(60, 3);
  std::vector<float> c(60);
  Interpreter().run(f, {a.data(), c.data()});
  for (int i = 0; i < 60; ++i) EXPECT_FLOAT_EQ(c[i], a[i] * 2 + 1);
}

TEST(Lower, ComputeAtProducerCoversConsumerWindow) {
  // A 1-D 3-tap stencil with the producer computed per output tile.
  Tensor A = placeholder({20}, DataType::f32(), "A");
  Tensor B = compute(
      {22},
      [&](const std::vector<Var>& i) {
        Expr j = i[0] - 1;
        return select(logical_and(j >= 0, j < 20), at(A, max(min(j, make_int(19)), make_int(0))),
                      make_float(0.0));
      },
      "B");
  IterVar r = reduce_axis(3, "r");
  Tensor C = compute(
      {20}, [&](const std::vector<Var>& i) { return sum(at(B, i[0] + r->var), {r}); }, "C");
  for (int64_t f : {1, 3, 4, 7, 20}) {
    auto sch = create_schedule({C});
    auto s = sch[C];
    auto [o, in] = s->split(s->axis(0), f);
    sch[B]->compute_at(s, o);
    LoweredFunc fn = lower(sch, {A, C}, "stencil");
    auto a = ops::reference::random_uniform(20, 4);
    std::vector<float> c(20);
    Interpreter().run(fn, {a.data(), c.data()});
    for (int i = 0; i < 20; ++i) {
      float ref = (i > 0 ? a[i - 1] : 0) + a[i] + (i < 19 ? a[i + 1] : 0);
      EXPECT_NEAR(c[i], ref, 1e-6) << "factor " << f << " at " << i << "\n" << to_string(fn);
    }
  }
}

namespace kiln::test {
namespace {

// The element count of the last buffer a lowered function allocates.
int64_t last_allocation_size(const LoweredFunc& f) {
  class Finder : public IRVisitor {
   public:
    int64_t size = -1;
    void visit_allocate(const AllocateNode* op) override {
      size = *as_const_int(op->size);
      IRVisitor::visit_allocate(op);
    }
  } finder;
  finder.visit(f.body);
  return finder.size;
}

// A producer attached under a fused loop covers one tile, not the whole axis:
// the fused loop's value is one point at the attach point.
TEST(Lower, RegionUnderFusedLoopIsOneTile) {
  auto d = make_dense(16, 64, 8);
  auto sch = create_schedule({d.C});
  Tensor CC = sch.cache_write(d.C, MemScope::Local);
  auto s = sch[d.C];
  auto t = s->tile(s->axis(0), s->axis(1), 4, 16);
  auto fused = s->fuse(t[0], t[1]);
  s->parallel(fused);
  sch[CC]->compute_at(s, fused);
  LoweredFunc f = lower(sch, {d.A, d.B, d.C}, "dense");
  EXPECT_EQ(last_allocation_size(f), 4 * 16) << to_string(f);
  EXPECT_LE(run_dense(sch, d, 16, 64, 8), 1e-6);
}

// A producer read through truncating integer division and remainder (the
// Winograd output's tile p = oh / m, element oh % m) covers one tile when
// attached at the tile loop: x / 4 over x in [4 t, 4 t + 3] is the point t,
// x % 4 spans the producer's whole (4-long) axis.
TEST(Lower, RegionThroughTruncatingDivisionIsOneTile) {
  Tensor A = placeholder({24}, DataType::f32(), "A");
  Tensor P = compute(
      {6, 4}, [&](const std::vector<Var>& i) { return at(A, i[0] * 4 + i[1]) * 2.0f; }, "P");
  Tensor C = compute(
      {24}, [&](const std::vector<Var>& i) { return at(P, i[0] / 4, i[0] % 4) + 1.0f; }, "C");
  auto sch = create_schedule({C});
  auto s = sch[C];
  auto [o, in] = s->split(s->axis(0), 4);
  sch[P]->compute_at(s, o);
  LoweredFunc f = lower(sch, {A, C}, "tiles");
  EXPECT_EQ(last_allocation_size(f), 4) << to_string(f);
  auto a = ops::reference::random_uniform(24, 5);
  std::vector<float> c(24);
  Interpreter().run(f, {a.data(), c.data()});
  for (int i = 0; i < 24; ++i) EXPECT_FLOAT_EQ(c[i], a[i] * 2 + 1) << i << "\n" << to_string(f);
}

// cache_read: the readers see a copy of the input, computed per tile.
TEST(Lower, CacheReadCopyPerTile) {
  for (int64_t f : {3, 4, 8}) {
    auto d = make_dense(12, 20, 9);
    auto sch = create_schedule({d.C});
    Tensor AA = sch.cache_read(d.A, MemScope::Local, {d.C});
    auto s = sch[d.C];
    auto [io, ii] = s->split(s->axis(0), f);
    sch[AA]->compute_at(s, io);
    LoweredFunc fn = lower(sch, {d.A, d.B, d.C}, "dense");
    bool reads_copy = false;
    post_order_visit(fn.body, [&](const Expr& e) {
      if (auto* l = e.as<LoadNode>()) reads_copy |= l->buffer->name == "A.local";
    });
    EXPECT_TRUE(reads_copy) << to_string(fn);
    SCOPED_TRACE("factor " + std::to_string(f));
    EXPECT_LE(run_dense(sch, d, 12, 20, 9), 1e-6);
  }
}

// Bad schedules are refused with a message that names the stage.
TEST(Schedule, PrimitivesRejectLoopsOfOtherStages) {
  auto d = make_dense(8, 8, 8);
  auto sch = create_schedule({d.C});
  auto s = sch[d.C];
  auto [o, i] = s->split(s->axis(0), 4);
  EXPECT_THROW(s->split(s->axis(0), 2), std::invalid_argument);  // no longer a leaf
  EXPECT_THROW(s->fuse(i, o), std::invalid_argument);            // not outer-then-inner
  EXPECT_THROW(s->parallel(s->reduce_axis(0)), std::invalid_argument);
  EXPECT_THROW(sch[d.C]->compute_inline(), std::invalid_argument);  // an output
  try {
    s->split(s->axis(0), 0);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'C'"), std::string::npos) << e.what();
  }
}

// A register tile three vectors wide (48 floats at 512 bits, 24 at 256) is
// vectorized one native vector at a time: LLVM turned a loop-carried
// <48 x float> into 128-bit pieces shuffled together every step (a dense
// 8 x 48 tile ran 12x slower than 8 x 32). Widths of a power of two, or of no
// whole number of vectors (40 at 512 bits), keep one vector. Every width
// computes the reference's result, with rows the tiles do not divide.
TEST(Lower, VectorLoopsOfSeveralNativeVectorsAreSplitIntoThem) {
  struct Case {
    int vector_bits;
    int64_t cols, widest;  // the tile's columns; the widest float vector expected
  };
  for (const Case& c : {Case{512, 48, 16}, Case{256, 24, 8}, Case{512, 32, 32}, Case{512, 40, 40},
                        Case{256, 48, 8}}) {
    ops::DenseWorkload w{13, 2 * c.cols, 12};
    auto space = ops::dense_pack_space(w, schedule::SplitPolicy::All);
    auto cfg = schedule::Config::from_json(
        space, R"({"knobs": {"tile_y": [4, 1, 4], "tile_x": [2, 1, )" + std::to_string(c.cols) +
                   R"(], "tile_k": [3, 4], "tile_order": 0}})");
    auto kern = ops::dense_pack(w, cfg, /*pack_in_kernel=*/false);
    schedule::LowerOptions o;
    o.vector_bits = c.vector_bits;
    LoweredFunc f = schedule::lower(kern.sch, kern.args, "dense", o);
    int64_t widest = 0;
    post_order_visit(f.body, [&](const Expr& e) {
      if (e.dtype().is_float()) widest = std::max<int64_t>(widest, e.dtype().lanes);
    });
    EXPECT_EQ(widest, c.widest) << c.cols << " columns at " << c.vector_bits << " bits\n"
                                << to_string(f);
    auto A = ops::reference::random_uniform(w.M * w.K, 7),
         B = ops::reference::random_uniform(w.K * w.N, 8);
    auto Bp = ops::pack_dense_weight(B.data(), w.K, w.N, c.cols);
    std::vector<float> C(w.M * w.N, NAN), ref(w.M * w.N);
    ops::reference::dense(A.data(), B.data(), ref.data(), w.M, w.N, w.K);
    Interpreter().run(f, {A.data(), Bp.data(), C.data()});
    EXPECT_LE(ops::reference::max_relative_error(C.data(), ref.data(), C.size()), 1e-6)
        << c.cols << " columns at " << c.vector_bits << " bits";
  }
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// A register tile (rows unrolled, columns vectorized, accumulated in a Local
// buffer) whose column split does not divide N, nor its row split M: the
// partial tiles' loads of B and stores of C are predicated, the Local tile's
// updates are not (they stay in registers), no per-lane loop is left, and
// the results match the reference with every access in bounds.
TEST(Lower, PartialVectorsOfARegisterTileArePredicated) {
  for (auto [M, N, K, rows, cols] : std::vector<std::array<int64_t, 5>>{
           {13, 37, 5, 4, 16}, {9, 197, 3, 8, 32}, {5, 13, 4, 2, 8}, {6, 8, 2, 3, 8}}) {
    SCOPED_TRACE(std::to_string(M) + "x" + std::to_string(N) + "x" + std::to_string(K));
    auto d = make_dense(M, N, K);
    auto sch = create_schedule({d.C});
    schedule_register_tile(sch, d, rows, cols, /*unroll_copy_rows=*/true);
    LoweredFunc f = lower(sch, {d.A, d.B, d.C}, "dense");
    int local_predicated = 0, global_predicated = 0, lane_loops = 0;
    post_order_visit(f.body, [&](const Expr& e) {
      if (auto* l = e.as<LoadNode>(); l && l->predicate)
        ++(l->buffer->scope == MemScope::Local ? local_predicated : global_predicated);
    });
    class Stmts : public IRVisitor {
     public:
      int *local, *global, *loops;
      int64_t lanes = 0;
      void visit_store(const StoreNode* op) override {
        if (op->predicate) ++*(op->buffer->scope == MemScope::Local ? local : global);
        IRVisitor::visit_store(op);
      }
      void visit_for(const ForNode* op) override {
        const int64_t* ext = as_const_int(op->extent);
        *loops += ext && *ext == lanes;  // no other loop of these shapes has this extent
        IRVisitor::visit_for(op);
      }
    } stmts;
    stmts.local = &local_predicated;
    stmts.global = &global_predicated;
    stmts.loops = &lane_loops;
    stmts.lanes = cols;
    stmts.visit(f.body);
    EXPECT_EQ(local_predicated, 0) << to_string(f);
    EXPECT_EQ(global_predicated > 0, N % cols != 0) << to_string(f);
    EXPECT_EQ(lane_loops, 0) << to_string(f);
    EXPECT_LE(run_dense(sch, d, M, N, K), 1e-6);
  }
}

// A register tile over packed (padded) weights whose width does not divide N:
// the tile's reads stay inside the padded buffer, so its lanes past N need no
// guard and the accumulation stays vectorized; only the copy-out is guarded.
TEST(Lower, HarmlessOverrunKeepsTileVectorized) {
  ops::DenseWorkload w{10, 20, 12};
  auto space = ops::dense_pack_space(w, schedule::SplitPolicy::All);
  auto cfg = schedule::Config::from_json(
      space,
      R"({"knobs": {"tile_y": [3, 1, 4], "tile_x": [3, 1, 8], "tile_k": [3, 4], "tile_order": 0}})");
  auto kern = ops::dense_pack(w, cfg, /*pack_in_kernel=*/false);
  LoweredFunc f = lower(kern.sch, kern.args, "dense");
  int vector_tile_updates = 0;
  class Stores : public IRVisitor {
   public:
    int* n;
    void visit_store(const StoreNode* op) override {
      if (op->buffer->name == "C.local" && op->index.as<RampNode>()) ++*n;
      IRVisitor::visit_store(op);
    }
  } stores;
  stores.n = &vector_tile_updates;
  stores.visit(f.body);
  EXPECT_GT(vector_tile_updates, 0) << to_string(f);

  auto A = ops::reference::random_uniform(w.M * w.K, 5),
       B = ops::reference::random_uniform(w.K * w.N, 6);
  auto Bp = ops::pack_dense_weight(B.data(), w.K, w.N, 8);
  std::vector<float> C(w.M * w.N, NAN), ref(w.M * w.N);
  ops::reference::dense(A.data(), B.data(), ref.data(), w.M, w.N, w.K);
  Interpreter().run(f, {A.data(), Bp.data(), C.data()});
  EXPECT_LE(ops::reference::max_relative_error(C.data(), ref.data(), C.size()), 1e-6);
}

}  // namespace
}  // namespace kiln::test

namespace kiln::test {
namespace {

// A vectorized loop under a split that does not divide: full tiles run as
// vectors, the last one as a vector under a predicate (only its lanes inside
// the tensor read and write memory; the interpreter checks every access).
TEST(Lower, NonDividingVectorLoopRunsFullTilesAsVectors) {
  for (int64_t n : {37, 64, 100}) {
    Tensor A = placeholder({n}, DataType::f32(), "A");
    Tensor B = compute(
        {n}, [&](const std::vector<Var>& i) { return at(A, i[0]) * 3.0f; }, "B");
    auto sch = create_schedule({B});
    auto s = sch[B];
    auto [o, in] = s->split(s->axis(0), 16);
    s->vectorize(in);
    LoweredFunc f = lower(sch, {A, B}, "scale");
    int vector_stores = 0, predicated = 0;
    class Count : public IRVisitor {
     public:
      int *stores, *predicated;
      void visit_store(const StoreNode* op) override {
        *stores += op->index.as<RampNode>() != nullptr;
        *predicated += bool(op->predicate);
        IRVisitor::visit_store(op);
      }
      void visit_load(const LoadNode* op) override {
        *predicated += bool(op->predicate);
        IRVisitor::visit_load(op);
      }
      void visit_for(const ForNode* op) override {
        // Only loops over tiles are left: the per-lane loop is gone.
        EXPECT_FALSE(is_const_int(op->extent, 16)) << to_string(op->body);
        IRVisitor::visit_for(op);
      }
    } count;
    count.stores = &vector_stores;
    count.predicated = &predicated;
    count.visit(f.body);
    const bool tail = n % 16 != 0;
    EXPECT_EQ(vector_stores, tail ? 2 : 1) << to_string(f);
    EXPECT_EQ(predicated, tail ? 2 : 0) << to_string(f);  // the tail's load and store
    auto a = ops::reference::random_uniform(n, 7);
    std::vector<float> b(n, NAN);
    Interpreter().run(f, {a.data(), b.data()});
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(b[i], a[i] * 3.0f) << n << " " << i;
  }
}

}  // namespace
}  // namespace kiln::test

// A row buffer computed per row with vector stores (Softmax's exp(x - max):
// a Local stage at the row loop, read by the row's sum and by the output),
// whose row length the lanes do not divide: the last vector is stored on
// every lane (Local buffers are not predicated), so the allocation is padded
// to whole vectors. The interpreter checks every access against it.
TEST(Lower, VectorizedRowBufferIsPaddedToWholeVectors) {
  for (auto [rows, n, lanes] : std::vector<std::array<int64_t, 3>>{
           {3, 197, 16}, {2, 13, 8}, {4, 5, 4}, {2, 32, 16}, {3, 1, 4}}) {
    SCOPED_TRACE(std::to_string(rows) + "x" + std::to_string(n) + " lanes " +
                 std::to_string(lanes));
    Tensor X = placeholder({rows, n}, DataType::f32(), "X");
    Tensor E = compute(
        {rows, n}, [&](const std::vector<Var>& i) { return exp(at(X, i[0], i[1])); }, "E");
    IterVar k = reduce_axis(n, "k");
    Tensor S = compute(
        {rows, 1}, [&](const std::vector<Var>& i) { return sum(at(E, i[0], k->var), {k}); }, "S");
    Tensor Y = compute(
        {rows, n}, [&](const std::vector<Var>& i) { return at(E, i[0], i[1]) / at(S, i[0], 0); },
        "Y");
    auto sch = create_schedule({Y});
    auto y = sch[Y];
    auto [yo, yi] = y->split(y->axis(1), lanes);
    y->vectorize(yi);
    auto e = sch[E];
    auto [eo, ei] = e->split(e->axis(1), lanes);
    e->vectorize(ei);
    e->compute_at(y, y->axis(0));
    sch[S]->compute_at(y, y->axis(0));
    LoweredFunc f = lower(sch, {X, Y}, "rows");
    class Allocations : public IRVisitor {
     public:
      int64_t e_size = -1;
      void visit_allocate(const AllocateNode* op) override {
        if (op->buffer->name == "E") e_size = *as_const_int(op->size);
        IRVisitor::visit_allocate(op);
      }
    } allocations;
    allocations.visit(f.body);
    int64_t e_size = allocations.e_size;
    EXPECT_EQ(e_size, (n + lanes - 1) / lanes * lanes) << to_string(f);
    auto x = ops::reference::random_uniform(rows * n, 7);
    std::vector<float> out(static_cast<size_t>(rows * n));
    Interpreter().run(f, {x.data(), out.data()});
    for (int64_t r = 0; r < rows; ++r) {
      double total = 0;
      for (int64_t j = 0; j < n; ++j) total += std::exp(double(x[r * n + j]));
      for (int64_t j = 0; j < n; ++j)
        EXPECT_NEAR(out[r * n + j], std::exp(double(x[r * n + j])) / total, 1e-6);
    }
  }
}

}  // namespace
}  // namespace kiln::test
