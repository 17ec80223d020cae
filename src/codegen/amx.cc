#include "codegen/amx.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <cstdlib>
#include <functional>
#include <optional>
#include <stdexcept>

#include "codegen/dot_product.h"

namespace kiln::codegen::detail {

using llvm::Value;

AmxPlan amx_plan(ir::AmxOp op, int rows, int64_t n, int64_t k, int64_t lda, int64_t ldc) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("amx_gemm: " + what); };
  AmxPlan p;
  p.op = op;
  p.rows = rows;
  p.n = n;
  p.k = k;
  p.lda = lda;
  p.ldc = ldc;
  p.elem_bytes = op == ir::AmxOp::Dpbf16ps ? 2 : 1;
  p.group = 4 / p.elem_bytes;
  if (rows < 1 || rows > 16) fail("rows must be 1..16, got " + std::to_string(rows));
  if (n < 1 || k < 1) fail("n and k must be positive");
  if (k % p.group != 0)
    fail("k = " + std::to_string(k) + " is not a multiple of " + std::to_string(p.group));
  if (lda < k || ldc < n) fail("lda < k or ldc < n");
  int64_t row_bytes = k * p.elem_bytes;
  p.k_steps = row_bytes / 64;
  p.tail_bytes = static_cast<int>(row_bytes % 64);
  p.n_blocks = (n + 15) / 16;
  p.k_groups = k / p.group;
  bool two = p.n_blocks >= 2;
  if (p.k_steps > 0) {
    p.tiles[kAmxA] = {rows, 64};
    p.tiles[kAmxB0] = {16, 64};
    if (two) p.tiles[kAmxB1] = {16, 64};
  }
  if (p.tail_bytes > 0) {
    p.tiles[kAmxATail] = {rows, p.tail_bytes};
    p.tiles[kAmxBTail0] = {p.tail_bytes / 4, 64};
    if (two) p.tiles[kAmxBTail1] = {p.tail_bytes / 4, 64};
  }
  p.tiles[kAmxC0] = {rows, 64};
  if (two) p.tiles[kAmxC1] = {rows, 64};
  return p;
}

std::array<uint8_t, 64> amx_tile_config(const AmxPlan& plan) {
  std::array<uint8_t, 64> cfg{};
  cfg[0] = 1;  // palette 1: 8 tiles of up to 16 rows x 64 bytes
  for (int t = 0; t < 8; ++t) {
    cfg[16 + 2 * t] = static_cast<uint8_t>(plan.tiles[t].colsb & 0xff);
    cfg[17 + 2 * t] = static_cast<uint8_t>(plan.tiles[t].colsb >> 8);
    cfg[48 + t] = static_cast<uint8_t>(plan.tiles[t].rows);
  }
  return cfg;
}

std::string amx_gemm_lowering(const Target& target, ir::AmxOp op) {
  // KILN_DEBUG_AMX_EMULATE=1: the emulation whatever the target says, so that
  // a build for an AMX target (its templates, packing, epilogues) can be run
  // and checked on a machine without AMX (tests/driver/amx_build_test.cc).
  const char* force = std::getenv("KILN_DEBUG_AMX_EMULATE");
  if (force && *force && std::string(force) != "0") return "emulated";
  if (target.arch() != "x86_64" || !target.has_feature("amx-tile")) return "emulated";
  bool ok =
      op == ir::AmxOp::DpbusdU8I8 ? target.has_feature("amx-int8") : target.has_feature("amx-bf16");
  return ok ? "amx" : "emulated";
}

namespace {

// The tile operations, either as AMX instructions or emulated on an 8 KiB
// stack array (tile t at byte 1024 t, row r at 64 r) with the shapes of the
// same plan: the loops around them are the same code either way.
class TileOps {
 public:
  TileOps(llvm::IRBuilderBase& b, const Target& target, const AmxPlan& plan, bool amx)
      : b_(b), target_(target), plan_(plan), amx_(amx) {}

  void config() {
    if (amx_) {
      std::array<uint8_t, 64> bytes = amx_tile_config(plan_);
      llvm::Module* m = b_.GetInsertBlock()->getModule();
      auto* init = llvm::ConstantDataArray::get(b_.getContext(), llvm::ArrayRef<uint8_t>(bytes));
      auto* gv = new llvm::GlobalVariable(*m, init->getType(), true,
                                          llvm::GlobalValue::PrivateLinkage, init, "kiln.amx.cfg");
      gv->setAlignment(llvm::Align(64));
      b_.CreateIntrinsic(llvm::Intrinsic::x86_ldtilecfg, {}, {gv});
    } else {
      tiles_ = entry_alloca(8 * 1024, "amx.tiles");
    }
  }

  void zero(int t) {
    if (amx_) {
      b_.CreateIntrinsic(llvm::Intrinsic::x86_tilezero, {}, {b_.getInt8(t)});
      return;
    }
    b_.CreateMemSet(tile(t, 0), b_.getInt8(0), 1024, llvm::MaybeAlign(64));
  }

  // Tile t's rows from p, p + stride, ... (stride in bytes).
  void load(int t, Value* p, int64_t stride) {
    if (amx_) {
      b_.CreateIntrinsic(llvm::Intrinsic::x86_tileloadd64, {},
                         {b_.getInt8(t), p, b_.getInt64(stride)});
      return;
    }
    const AmxTileShape& s = plan_.tiles[t];
    for (int r = 0; r < s.rows; ++r)
      b_.CreateMemCpy(tile(t, 64 * r), llvm::MaybeAlign(1), byte_gep(p, r * stride),
                      llvm::MaybeAlign(1), s.colsb);
  }

  void store(int t, Value* p, int64_t stride) {
    if (amx_) {
      b_.CreateIntrinsic(llvm::Intrinsic::x86_tilestored64, {},
                         {b_.getInt8(t), p, b_.getInt64(stride)});
      return;
    }
    const AmxTileShape& s = plan_.tiles[t];
    for (int r = 0; r < s.rows; ++r)
      b_.CreateMemCpy(byte_gep(p, r * stride), llvm::MaybeAlign(1), tile(t, 64 * r),
                      llvm::MaybeAlign(1), s.colsb);
  }

  // Tile c += tile a x tile bt (tdpbusd / tdpbf16ps).
  void dp(int c, int a, int bt) {
    bool bf16 = plan_.op == ir::AmxOp::Dpbf16ps;
    if (amx_) {
      auto id = bf16 ? llvm::Intrinsic::x86_tdpbf16ps : llvm::Intrinsic::x86_tdpbusd;
      b_.CreateIntrinsic(id, {}, {b_.getInt8(c), b_.getInt8(a), b_.getInt8(bt)});
      return;
    }
    // The instructions' definition: for each row m of c and group kk of a's
    // row, c[m][n] += sum_j a[m][g kk + j] * bt[kk][g n + j]. Columns are one
    // 16-lane vector (c's rows are 64 bytes in every plan).
    int groups = plan_.tiles[a].colsb / 4;
    llvm::Type* i32 = b_.getInt32Ty();
    llvm::Type* acc_ty = llvm::FixedVectorType::get(bf16 ? b_.getFloatTy() : i32, 16);
    emit_loop(b_, plan_.tiles[c].rows, [&](Value* m) {
      Value* row = b_.CreateMul(m, b_.getInt64(64));
      Value* cp = b_.CreateInBoundsGEP(b_.getInt8Ty(), tile(c, 0), row);
      Value* acc = b_.CreateAlignedLoad(acc_ty, cp, llvm::Align(64));
      Value* arow = b_.CreateInBoundsGEP(b_.getInt8Ty(), tile(a, 0), row);
      for (int kk = 0; kk < groups; ++kk) {
        Value* ap = byte_gep(arow, 4 * kk);
        Value* bp = tile(bt, 64 * kk);
        if (!bf16) {
          Value* a4 = b_.CreateAlignedLoad(llvm::FixedVectorType::get(b_.getInt8Ty(), 4), ap,
                                           llvm::Align(4));
          Value* b64 = b_.CreateAlignedLoad(llvm::FixedVectorType::get(b_.getInt8Ty(), 64), bp,
                                            llvm::Align(64));
          acc = emit_dot4_u8i8(b_, target_, acc, a4, true, b64);
        } else {
          acc = bf16_pair_step(acc, ap, bp);
        }
      }
      b_.CreateAlignedStore(acc, cp, llvm::Align(64));
    });
  }

  // A 64-byte-aligned stack buffer in the function's entry block.
  Value* entry_alloca(int bytes, const char* name) {
    llvm::Function* f = b_.GetInsertBlock()->getParent();
    llvm::IRBuilder<> eb(&f->getEntryBlock(), f->getEntryBlock().begin());
    auto* ty = llvm::ArrayType::get(eb.getInt8Ty(), bytes);
    llvm::AllocaInst* a = eb.CreateAlloca(ty, nullptr, name);
    a->setAlignment(llvm::Align(64));
    return a;
  }

  Value* byte_gep(Value* p, int64_t off) {
    return off == 0 ? p : b_.CreateInBoundsGEP(b_.getInt8Ty(), p, b_.getInt64(off));
  }

  // for (i = 0; i < n; ++i) body(i), i an i64.
  static void emit_loop(llvm::IRBuilderBase& b, int64_t n,
                        const std::function<void(Value*)>& body) {
    if (n <= 0) return;
    llvm::Function* f = b.GetInsertBlock()->getParent();
    llvm::BasicBlock* pre = b.GetInsertBlock();
    auto* loop = llvm::BasicBlock::Create(b.getContext(), "amx.loop", f);
    auto* exit = llvm::BasicBlock::Create(b.getContext(), "amx.exit", f);
    b.CreateBr(loop);
    b.SetInsertPoint(loop);
    llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, "amx.i");
    i->addIncoming(b.getInt64(0), pre);
    body(i);
    Value* next = b.CreateAdd(i, b.getInt64(1));
    i->addIncoming(next, b.GetInsertBlock());
    b.CreateCondBr(b.CreateICmpULT(next, b.getInt64(n)), loop, exit);
    b.SetInsertPoint(exit);
  }

 private:
  Value* tile(int t, int64_t off) { return byte_gep(tiles_, 1024 * t + off); }

  // tdpbf16ps's step for one pair: acc += a0 * b_even, then acc += a1 * b_odd,
  // each a float32 add rounded to nearest even (the products are exact).
  Value* bf16_pair_step(Value* acc, Value* ap, Value* bp) {
    llvm::IRBuilderBase::FastMathFlagGuard guard(b_);
    b_.clearFastMathFlags();
    auto* i16 = b_.getInt16Ty();
    auto* v16i32 = llvm::FixedVectorType::get(b_.getInt32Ty(), 16);
    auto* v16f = llvm::FixedVectorType::get(b_.getFloatTy(), 16);
    auto widen = [&](Value* h16) {  // <16 x i16> bf16 bits -> <16 x float>
      return b_.CreateBitCast(b_.CreateShl(b_.CreateZExt(h16, v16i32), 16), v16f);
    };
    Value* bv = b_.CreateAlignedLoad(llvm::FixedVectorType::get(i16, 32), bp, llvm::Align(64));
    std::vector<int> even, odd;
    for (int i = 0; i < 16; ++i) {
      even.push_back(2 * i);
      odd.push_back(2 * i + 1);
    }
    Value* be = widen(b_.CreateShuffleVector(bv, even));
    Value* bo = widen(b_.CreateShuffleVector(bv, odd));
    Value* a0 = b_.CreateAlignedLoad(i16, ap, llvm::Align(2));
    Value* a1 = b_.CreateAlignedLoad(i16, byte_gep(ap, 2), llvm::Align(2));
    Value* a0v = widen(b_.CreateVectorSplat(16, a0));
    Value* a1v = widen(b_.CreateVectorSplat(16, a1));
    acc = b_.CreateFAdd(acc, b_.CreateFMul(a0v, be));
    return b_.CreateFAdd(acc, b_.CreateFMul(a1v, bo));
  }

  llvm::IRBuilderBase& b_;
  const Target& target_;
  const AmxPlan& plan_;
  bool amx_;
  Value* tiles_ = nullptr;
};

}  // namespace

namespace {

// One panel of p.rows rows at c / a under t's configuration (already loaded).
void emit_panel(llvm::IRBuilderBase& b, TileOps& t, const AmxPlan& p, Value* c, Value* a, Value* bp,
                Value* spill) {
  auto* i8 = b.getInt8Ty();
  const int64_t lda_bytes = p.lda * p.elem_bytes, ldc_bytes = p.ldc * 4;
  const int64_t partial_cols = p.n % 16;  // columns of a partial last block (0: none)

  // Packed B: block nb's group row kg lies at (nb * k_groups + kg) * 64 bytes.
  auto b_at = [&](Value* nb, Value* kg) {
    Value* off =
        b.CreateMul(b.CreateAdd(b.CreateMul(nb, b.getInt64(p.k_groups)), kg), b.getInt64(64));
    return b.CreateInBoundsGEP(i8, bp, off);
  };
  // count (1 or 2) blocks from nb0; the last one partial when last_partial.
  auto blocks = [&](Value* nb0, int count, bool last_partial) {
    const int creg[2] = {kAmxC0, kAmxC1}, breg[2] = {kAmxB0, kAmxB1},
              btail[2] = {kAmxBTail0, kAmxBTail1};
    for (int j = 0; j < count; ++j) t.zero(creg[j]);
    TileOps::emit_loop(b, p.k_steps, [&](Value* ks) {
      t.load(kAmxA, b.CreateInBoundsGEP(i8, a, b.CreateMul(ks, b.getInt64(64))), lda_bytes);
      for (int j = 0; j < count; ++j) {
        Value* nb = b.CreateAdd(nb0, b.getInt64(j));
        t.load(breg[j], b_at(nb, b.CreateMul(ks, b.getInt64(16))), 64);
        t.dp(creg[j], kAmxA, breg[j]);
      }
    });
    if (p.tail_bytes > 0) {
      t.load(kAmxATail, t.byte_gep(a, p.k_steps * 64), lda_bytes);
      for (int j = 0; j < count; ++j) {
        Value* nb = b.CreateAdd(nb0, b.getInt64(j));
        t.load(btail[j], b_at(nb, b.getInt64(p.k_steps * 16)), 64);
        t.dp(creg[j], kAmxATail, btail[j]);
      }
    }
    for (int j = 0; j < count; ++j) {
      Value* nb = b.CreateAdd(nb0, b.getInt64(j));
      Value* cp = b.CreateInBoundsGEP(i8, c, b.CreateMul(nb, b.getInt64(64)));
      if (!(last_partial && j == count - 1)) {
        t.store(creg[j], cp, ldc_bytes);
        continue;
      }
      // Columns past N are not C's: the tile goes to the stack, its valid part to C.
      t.store(creg[j], spill, 64);
      for (int r = 0; r < p.rows; ++r)
        b.CreateMemCpy(t.byte_gep(cp, r * ldc_bytes), llvm::MaybeAlign(4),
                       t.byte_gep(spill, 64 * r), llvm::MaybeAlign(64), partial_cols * 4);
    }
  };

  const int64_t full = p.n / 16, pairs = full / 2, rest = p.n_blocks - 2 * pairs;
  TileOps::emit_loop(b, pairs,
                     [&](Value* pi) { blocks(b.CreateMul(pi, b.getInt64(2)), 2, false); });
  if (rest > 0) blocks(b.getInt64(2 * pairs), static_cast<int>(rest), partial_cols != 0);
}

}  // namespace

void emit_amx_gemm(llvm::IRBuilderBase& b, const Target& target, ir::AmxOp op, int64_t rows,
                   int64_t n, int64_t k, int64_t lda, int64_t ldc, Value* c, Value* a, Value* bp) {
  if (rows < 1) throw std::invalid_argument("amx_gemm: rows must be positive");
  const bool amx = amx_gemm_lowering(target, op) == "amx";
  const int64_t full = rows / 16, tail = rows % 16;
  std::optional<AmxPlan> p16, pt;
  if (full > 0) p16 = amx_plan(op, 16, n, k, lda, ldc);
  if (tail > 0) pt = amx_plan(op, static_cast<int>(tail), n, k, lda, ldc);
  const int elem = p16 ? p16->elem_bytes : pt->elem_bytes;
  Value* spill = nullptr;
  // Full panels under one configuration (loaded once), then the partial panel
  // under its own: ldtilecfg zeroes the tiles, so it goes between panels.
  if (p16) {
    TileOps t(b, target, *p16, amx);
    if (n % 16) spill = t.entry_alloca(1024, "amx.c_partial");
    t.config();
    const int64_t a_panel = 16 * lda * elem, c_panel = 16 * ldc * 4;
    TileOps::emit_loop(b, full, [&](Value* pi) {
      Value* cp = b.CreateInBoundsGEP(b.getInt8Ty(), c, b.CreateMul(pi, b.getInt64(c_panel)));
      Value* ap = b.CreateInBoundsGEP(b.getInt8Ty(), a, b.CreateMul(pi, b.getInt64(a_panel)));
      emit_panel(b, t, *p16, cp, ap, bp, spill);
    });
  }
  if (pt) {
    TileOps t(b, target, *pt, amx);
    if (n % 16 && !spill) spill = t.entry_alloca(1024, "amx.c_partial");
    t.config();
    emit_panel(b, t, *pt, t.byte_gep(c, full * 16 * ldc * 4), t.byte_gep(a, full * 16 * lda * elem),
               bp, spill);
  }
  if (amx) b.CreateIntrinsic(llvm::Intrinsic::x86_tilerelease, {}, {});
}

}  // namespace kiln::codegen::detail
