#include "codegen/dot_product.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsAArch64.h>
#include <llvm/IR/IntrinsicsX86.h>

#include <stdexcept>
#include <vector>

namespace kiln::codegen::detail {

using llvm::Value;

namespace {

enum class Lowering {
  Vnni512,
  Vnni256,
  Vnni128,
  Pmaddwd512,
  Pmaddwd256,
  Pmaddwd128,
  Pmaddubsw512,
  Pmaddubsw256,
  Pmaddubsw128,
  Usdot,
  Sdot,
  Generic
};

struct Choice {
  Lowering how;
  int lanes;  // int32 lanes one instruction covers
};

// The instructions the target has, widest first (lanes <= want). b_narrow (b in
// [-64, 64]) swaps the exact pmaddwd sequence for pmaddubsw's on x86 targets
// without a dot instruction; with one, the promise changes nothing.
std::vector<Choice> choices(const Target& t, bool b_narrow) {
  std::vector<Choice> c;
  std::string arch = t.arch();
  if (arch == "x86_64" || arch == "i386" || arch == "x86") {
    bool vnni = t.has_feature("avx512vnni"), vl = t.has_feature("avx512vl");
    bool avxvnni = t.has_feature("avxvnni");
    if (vnni && t.has_feature("avx512f")) c.push_back({Lowering::Vnni512, 16});
    if ((vnni && vl) || avxvnni) {
      c.push_back({Lowering::Vnni256, 8});
      c.push_back({Lowering::Vnni128, 4});
    }
    bool ubsw = b_narrow && c.empty();
    if (t.has_feature("avx512bw"))
      c.push_back({ubsw ? Lowering::Pmaddubsw512 : Lowering::Pmaddwd512, 16});
    if (t.has_feature("avx2"))
      c.push_back({ubsw ? Lowering::Pmaddubsw256 : Lowering::Pmaddwd256, 8});
    if (t.has_feature("ssse3"))
      c.push_back({ubsw ? Lowering::Pmaddubsw128 : Lowering::Pmaddwd128, 4});
  } else if (arch == "aarch64") {
    if (t.has_feature("i8mm"))
      c.push_back({Lowering::Usdot, 4});
    else if (t.has_feature("dotprod"))
      c.push_back({Lowering::Sdot, 4});
  }
  return c;
}

Choice choose(const std::vector<Choice>& c, int lanes) {
  for (const Choice& x : c)
    if (x.lanes <= lanes) return x;
  return {Lowering::Generic, lanes};
}

const char* lowering_name(Lowering l) {
  switch (l) {
    case Lowering::Vnni512: return "vpdpbusd.512";
    case Lowering::Vnni256: return "vpdpbusd.256";
    case Lowering::Vnni128: return "vpdpbusd.128";
    case Lowering::Pmaddwd512: return "pmaddwd.512";
    case Lowering::Pmaddwd256: return "pmaddwd.256";
    case Lowering::Pmaddwd128: return "pmaddwd.128";
    case Lowering::Pmaddubsw512: return "pmaddubsw.512";
    case Lowering::Pmaddubsw256: return "pmaddubsw.256";
    case Lowering::Pmaddubsw128: return "pmaddubsw.128";
    case Lowering::Usdot: return "usdot";
    case Lowering::Sdot: return "sdot";
    case Lowering::Generic: return "generic";
  }
  return "?";
}

class Emitter {
 public:
  explicit Emitter(llvm::IRBuilderBase& b) : b_(b) {}

  llvm::VectorType* vec(llvm::Type* e, int n) { return llvm::FixedVectorType::get(e, n); }
  llvm::Type* i8() { return b_.getInt8Ty(); }
  llvm::Type* i16() { return b_.getInt16Ty(); }
  llvm::Type* i32() { return b_.getInt32Ty(); }

  // Elements [from, from + n) of v.
  Value* slice(Value* v, int from, int n) {
    int total = int(llvm::cast<llvm::FixedVectorType>(v->getType())->getNumElements());
    if (from == 0 && n == total) return v;
    std::vector<int> mask;
    for (int i = 0; i < n; ++i) mask.push_back(from + i);
    return b_.CreateShuffleVector(v, mask);
  }

  // x followed by y (vectors of one element type, any lengths).
  Value* concat(Value* x, Value* y) {
    int nx = int(llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements());
    int ny = int(llvm::cast<llvm::FixedVectorType>(y->getType())->getNumElements());
    int m = std::max(nx, ny);
    auto widen = [&](Value* v, int n) {
      if (n == m) return v;
      std::vector<int> mask;
      for (int i = 0; i < m; ++i) mask.push_back(i < n ? i : -1);
      return b_.CreateShuffleVector(v, mask);
    };
    std::vector<int> mask;
    for (int i = 0; i < nx; ++i) mask.push_back(i);
    for (int i = 0; i < ny; ++i) mask.push_back(m + i);
    return b_.CreateShuffleVector(widen(x, nx), widen(y, ny), mask);
  }

  // The 4 bytes of a splat operand repeated for n lanes: <4n x i8>.
  Value* splat_word(Value* a4, int n) {
    Value* word = b_.CreateBitCast(a4, i32());
    return b_.CreateBitCast(b_.CreateVectorSplat(n, word), vec(i8(), 4 * n));
  }

  Value* as_words(Value* bytes, int n) { return b_.CreateBitCast(bytes, vec(i32(), n)); }

  Value* splat_const(llvm::Type* e, int n, int64_t v) {
    return llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(n),
                                          llvm::ConstantInt::get(e, uint64_t(v), true));
  }

  Value* generic(Value* acc, Value* a, Value* bb, int n) {
    Value* p =
        b_.CreateMul(b_.CreateZExt(a, vec(i32(), 4 * n)), b_.CreateSExt(bb, vec(i32(), 4 * n)));
    Value* r = acc;
    for (int j = 0; j < 4; ++j) {
      std::vector<int> mask;
      for (int i = 0; i < n; ++i) mask.push_back(4 * i + j);
      r = b_.CreateAdd(r, b_.CreateShuffleVector(p, mask));
    }
    return r;
  }

  Value* vnni(llvm::Intrinsic::ID id, Value* acc, Value* a, Value* bb, int n) {
    return b_.CreateIntrinsic(id, {}, {acc, as_words(a, n), as_words(bb, n)});
  }

  // The bytes widened in int16 pairs, one pmaddwd per pair of bytes of each lane:
  //   a0 b0 + a1 b1 + a2 b2 + a3 b3 = pmaddwd((a0, a2), (b0, b2)) + pmaddwd((a1, a3), (b1, b3)).
  // Viewed as little-endian int16 words (x0 | x1 << 8) and (x2 | x3 << 8), the even bytes
  // are the words masked with 0xff (zero extension) or shifted up and back arithmetically
  // (sign extension), the odd bytes the words shifted down. Exact for every input: each
  // product fits int16 x int16 -> int32 and a pair sums to at most 2 * 255 * 128.
  // pmaddubsw would take the bytes as they are, but its int16 pair sums saturate
  // (2 * 255 * 128 > 32767), and the split that avoids that costs two pmaddubsw and two
  // pmaddwd per vector: twice the multiplies of this. The widening of a splat operand is
  // shared by every vector that uses it, that of b by every row of a register tile.
  Value* pmaddwd(llvm::Intrinsic::ID wd, Value* acc, Value* a, Value* bb, int n) {
    llvm::Type* words = vec(i16(), 2 * n);
    Value* aw = b_.CreateBitCast(a, words);
    Value* bw = b_.CreateBitCast(bb, words);
    Value* eight = splat_const(i16(), 2 * n, 8);
    Value* a_even = b_.CreateAnd(aw, splat_const(i16(), 2 * n, 0xff));
    Value* a_odd = b_.CreateLShr(aw, eight);
    Value* b_even = b_.CreateAShr(b_.CreateShl(bw, eight), eight);
    Value* b_odd = b_.CreateAShr(bw, eight);
    Value* even = b_.CreateIntrinsic(wd, {}, {a_even, b_even});
    Value* odd = b_.CreateIntrinsic(wd, {}, {a_odd, b_odd});
    return b_.CreateAdd(acc, b_.CreateAdd(even, odd));
  }

  // ONNX Runtime's MLAS sequence: pmaddubsw multiplies the u8 bytes of a by the s8
  // bytes of b and adds neighbouring products into saturating int16 pairs
  // (a0 b0 + a1 b1, a2 b2 + a3 b3); pmaddwd by ones adds the two pairs of each
  // lane into int32. Exact when |b| <= 64: a pair is then within 2 * 255 * 64 =
  // 32640 < 32767 (the caller's promise, ir::Intrinsic::DotU8I8NarrowB).
  Value* pmaddubsw(llvm::Intrinsic::ID ubsw, llvm::Intrinsic::ID wd, Value* acc, Value* a,
                   Value* bb, int n) {
    Value* pairs = b_.CreateIntrinsic(ubsw, {}, {a, bb});
    Value* sums = b_.CreateIntrinsic(wd, {}, {pairs, splat_const(i16(), 2 * n, 1)});
    return b_.CreateAdd(acc, sums);
  }

  Value* neon(Lowering how, Value* acc, Value* a, Value* bb, int n) {
    llvm::Type* at = vec(i32(), n);
    llvm::Type* bt = vec(i8(), 4 * n);
    if (how == Lowering::Usdot)
      return b_.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_usdot, {at, bt}, {acc, a, bb});
    // sdot is s8 x s8: a - 128 is a ^ 0x80 as s8, and sum(a b) = sdot(a ^ 0x80, b) +
    // 128 sum(b), where 128 sum(b) = -sdot(0, splat(-128), b). Exact in int32.
    Value* as = b_.CreateXor(a, splat_const(i8(), 4 * n, 0x80));
    Value* r = b_.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_sdot, {at, bt}, {acc, as, bb});
    Value* neg128 =
        b_.CreateIntrinsic(llvm::Intrinsic::aarch64_neon_sdot, {at, bt},
                           {llvm::Constant::getNullValue(at), splat_const(i8(), 4 * n, -128), bb});
    return b_.CreateSub(r, neg128);
  }

  Value* chunk(Lowering how, Value* acc, Value* a, Value* bb, int n) {
    namespace I = llvm::Intrinsic;
    switch (how) {
      case Lowering::Vnni512: return vnni(I::x86_avx512_vpdpbusd_512, acc, a, bb, n);
      case Lowering::Vnni256: return vnni(I::x86_avx512_vpdpbusd_256, acc, a, bb, n);
      case Lowering::Vnni128: return vnni(I::x86_avx512_vpdpbusd_128, acc, a, bb, n);
      case Lowering::Pmaddwd512: return pmaddwd(I::x86_avx512_pmaddw_d_512, acc, a, bb, n);
      case Lowering::Pmaddwd256: return pmaddwd(I::x86_avx2_pmadd_wd, acc, a, bb, n);
      case Lowering::Pmaddwd128: return pmaddwd(I::x86_sse2_pmadd_wd, acc, a, bb, n);
      case Lowering::Pmaddubsw512:
        return pmaddubsw(I::x86_avx512_pmaddubs_w_512, I::x86_avx512_pmaddw_d_512, acc, a, bb, n);
      case Lowering::Pmaddubsw256:
        return pmaddubsw(I::x86_avx2_pmadd_ub_sw, I::x86_avx2_pmadd_wd, acc, a, bb, n);
      case Lowering::Pmaddubsw128:
        return pmaddubsw(I::x86_ssse3_pmadd_ub_sw_128, I::x86_sse2_pmadd_wd, acc, a, bb, n);
      case Lowering::Usdot:
      case Lowering::Sdot: return neon(how, acc, a, bb, n);
      case Lowering::Generic: return generic(acc, a, bb, n);
    }
    throw std::logic_error("dot4_u8i8: unknown lowering");
  }

 private:
  llvm::IRBuilderBase& b_;
};

}  // namespace

std::string dot4_u8i8_lowering(const Target& target, int lanes, bool b_narrow) {
  return lowering_name(choose(choices(target, b_narrow), lanes).how);
}

Value* emit_dot4_u8i8(llvm::IRBuilderBase& b, const Target& target, Value* acc, Value* a,
                      bool a_splat, Value* bytes_b, bool b_narrow) {
  Emitter e(b);
  bool scalar = !acc->getType()->isVectorTy();
  if (scalar) acc = b.CreateVectorSplat(1, acc);
  int n = int(llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements());
  std::vector<Choice> avail = choices(target, b_narrow);
  Value* result = nullptr;
  for (int o = 0; o < n;) {
    Choice c = choose(avail, n - o);
    Value* ac = e.slice(acc, o, c.lanes);
    Value* xa = a_splat ? e.splat_word(a, c.lanes) : e.slice(a, 4 * o, 4 * c.lanes);
    Value* xb = e.slice(bytes_b, 4 * o, 4 * c.lanes);
    Value* r = e.chunk(c.how, ac, xa, xb, c.lanes);
    result = result ? e.concat(result, r) : r;
    o += c.lanes;
  }
  return scalar ? b.CreateExtractElement(result, uint64_t(0)) : result;
}

// ---- DotI16: int16 pairs ------------------------------------------------------------

namespace {

struct PairChoice {
  const char* name;
  llvm::Intrinsic::ID id;  // not_intrinsic: generic
  bool accumulates;        // vpdpwssd adds acc itself; pmaddwd needs an add
  int lanes;
};

std::vector<PairChoice> pair_choices(const Target& t) {
  namespace I = llvm::Intrinsic;
  std::vector<PairChoice> c;
  std::string arch = t.arch();
  if (arch != "x86_64" && arch != "i386" && arch != "x86") return c;
  bool vnni = t.has_feature("avx512vnni"), vl = t.has_feature("avx512vl");
  if (vnni && t.has_feature("avx512f"))
    c.push_back({"vpdpwssd.512", I::x86_avx512_vpdpwssd_512, true, 16});
  if ((vnni && vl) || t.has_feature("avxvnni")) {
    c.push_back({"vpdpwssd.256", I::x86_avx512_vpdpwssd_256, true, 8});
    c.push_back({"vpdpwssd.128", I::x86_avx512_vpdpwssd_128, true, 4});
  }
  if (t.has_feature("avx512bw"))
    c.push_back({"pmaddwd.512", I::x86_avx512_pmaddw_d_512, false, 16});
  if (t.has_feature("avx2")) c.push_back({"pmaddwd.256", I::x86_avx2_pmadd_wd, false, 8});
  if (t.has_feature("sse2")) c.push_back({"pmaddwd.128", I::x86_sse2_pmadd_wd, false, 4});
  return c;
}

PairChoice choose_pair(const std::vector<PairChoice>& c, int lanes) {
  for (const PairChoice& x : c)
    if (x.lanes <= lanes) return x;
  return {"generic", llvm::Intrinsic::not_intrinsic, false, lanes};
}

}  // namespace

std::string dot2_i16_lowering(const Target& target, int lanes) {
  return choose_pair(pair_choices(target), lanes).name;
}

Value* emit_dot2_i16(llvm::IRBuilderBase& b, const Target& target, Value* acc, Value* a,
                     Value* bb) {
  Emitter e(b);
  bool scalar = !acc->getType()->isVectorTy();
  if (scalar) acc = b.CreateVectorSplat(1, acc);
  int n = int(llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements());
  std::vector<PairChoice> avail = pair_choices(target);
  Value* result = nullptr;
  for (int o = 0; o < n;) {
    PairChoice c = choose_pair(avail, n - o);
    Value* ac = e.slice(acc, o, c.lanes);
    Value* xa = e.slice(a, 2 * o, 2 * c.lanes);
    Value* xb = e.slice(bb, 2 * o, 2 * c.lanes);
    Value* r;
    if (c.id == llvm::Intrinsic::not_intrinsic) {
      llvm::Type* wide = e.vec(e.i32(), 2 * c.lanes);
      Value* p = b.CreateMul(b.CreateSExt(xa, wide), b.CreateSExt(xb, wide));
      r = ac;
      for (int j = 0; j < 2; ++j) {
        std::vector<int> mask;
        for (int i = 0; i < c.lanes; ++i) mask.push_back(2 * i + j);
        r = b.CreateAdd(r, b.CreateShuffleVector(p, mask));
      }
    } else if (c.accumulates) {
      llvm::Type* words = e.vec(e.i32(), c.lanes);  // vpdpwssd takes the pairs as i32 words
      r = b.CreateIntrinsic(c.id, {}, {ac, b.CreateBitCast(xa, words), b.CreateBitCast(xb, words)});
    } else {
      r = b.CreateAdd(ac, b.CreateIntrinsic(c.id, {}, {xa, xb}));
    }
    result = result ? e.concat(result, r) : r;
    o += c.lanes;
  }
  return scalar ? b.CreateExtractElement(result, uint64_t(0)) : result;
}

}  // namespace kiln::codegen::detail
