// hoist_guards (schedule/hoist_guards.h): neighbouring statements under the
// same test share one `if`, and an `if` that is a whole loop body (or an
// allocation's) moves above a loop whose variable it does not read; a test
// that reads memory or the loop's variable stays where it is.
#include "schedule/hoist_guards.h"

#include <gtest/gtest.h>

#include "ir/functor.h"
#include "ir/printer.h"

namespace kiln::test {
namespace {

using namespace kiln::ir;

Stmt store(const Buffer& b, const Var& k) { return make_store(b, make_float(1.0), Expr(k)); }

TEST(HoistGuards, MergesEqualTestsAndLiftsThemAboveLoopsAndAllocations) {
  Var i("i"), k("k");
  Buffer acc = make_buffer("acc", DataType::f32(), {make_int(8)}, MemScope::Local);
  Buffer out = make_buffer("out", DataType::f32(), {make_int(8)});
  Expr guard = Expr(i) < make_int(3);
  // for i { allocate acc { for k { if (i < 3) acc[k] = 1; if (i < 3) out[k] = 1 } } }
  Stmt inner = make_seq({make_if(guard, store(acc, k)), make_if(guard, store(out, k))});
  Stmt body = make_stmt<AllocateNode>(
      acc, make_int(8), make_for(k, make_int(0), make_int(8), ForKind::Serial, inner));
  Stmt s = make_for(i, make_int(0), make_int(4), ForKind::Serial, body);

  Stmt h = schedule::hoist_guards(s);
  SCOPED_TRACE(to_string(h));
  // for i { if (i < 3) { allocate acc { for k { acc[k] = 1; out[k] = 1 } } } }
  const auto* outer = h.as<ForNode>();
  ASSERT_NE(outer, nullptr);
  const auto* lifted = outer->body.as<IfThenElseNode>();
  ASSERT_NE(lifted, nullptr);
  const auto* alloc = lifted->then_case.as<AllocateNode>();
  ASSERT_NE(alloc, nullptr);
  const auto* loop = alloc->body.as<ForNode>();
  ASSERT_NE(loop, nullptr);
  const auto* seq = loop->body.as<SeqNode>();
  ASSERT_NE(seq, nullptr);
  EXPECT_EQ(seq->seq.size(), 2u);
  for (const Stmt& st : seq->seq) EXPECT_NE(st.as<StoreNode>(), nullptr);
}

TEST(HoistGuards, TestsOnTheLoopOrOnMemoryStay) {
  Var i("i"), k("k");
  Buffer out = make_buffer("out", DataType::f32(), {make_int(8)});
  Buffer flag = make_buffer("flag", DataType::i64(), {make_int(1)});
  // A test on k cannot leave k's loop.
  Stmt on_k = make_for(k, make_int(0), make_int(8), ForKind::Serial,
                       make_if(Expr(k) < make_int(5), store(out, k)));
  Stmt h = schedule::hoist_guards(on_k);
  ASSERT_NE(h.as<ForNode>(), nullptr) << to_string(h);
  EXPECT_NE(h.as<ForNode>()->body.as<IfThenElseNode>(), nullptr) << to_string(h);
  // A test that reads memory may change inside the loop: it stays.
  Expr reads = make_expr<LoadNode>(flag, make_int(0)) < make_int(1);
  Stmt on_mem =
      make_for(k, make_int(0), make_int(8), ForKind::Serial, make_if(reads, store(out, k)));
  Stmt m = schedule::hoist_guards(on_mem);
  ASSERT_NE(m.as<ForNode>(), nullptr) << to_string(m);
  // An if with an else is not a guard.
  Stmt with_else = make_for(k, make_int(0), make_int(8), ForKind::Serial,
                            make_if(Expr(i) < make_int(5), store(out, k), store(out, k)));
  EXPECT_NE(schedule::hoist_guards(with_else).as<ForNode>(), nullptr);
}

}  // namespace
}  // namespace kiln::test
