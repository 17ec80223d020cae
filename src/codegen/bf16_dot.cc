#include "codegen/bf16_dot.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsX86.h>
#include <llvm/IR/Module.h>

#include <vector>

namespace kiln::codegen::detail {

using llvm::Value;

namespace {

bool is_x86(const Target& t) {
  std::string arch = t.arch();
  return arch == "x86_64" || arch == "i386" || arch == "x86";
}

// The widest chunk (float lanes) of one instruction for `want` lanes; 0: generic.
int chunk_lanes(const Target& t, int want) {
  if (!is_x86(t) || !t.has_feature("avx512bf16")) return 0;
  if (want >= 16) return 16;
  if (!t.has_feature("avx512vl")) return 0;
  if (want >= 8) return 8;
  if (want >= 4) return 4;
  return 0;
}

Value* slice(llvm::IRBuilderBase& b, Value* v, int from, int n) {
  std::vector<int> idx;
  for (int i = 0; i < n; ++i) idx.push_back(from + i);
  return b.CreateShuffleVector(v, v, idx);
}

Value* concat(llvm::IRBuilderBase& b, Value* x, Value* y) {
  int nx = int(llvm::cast<llvm::FixedVectorType>(x->getType())->getNumElements());
  int ny = int(llvm::cast<llvm::FixedVectorType>(y->getType())->getNumElements());
  // shufflevector needs equal operand types: widen the shorter one first.
  int n = std::max(nx, ny);
  auto widen = [&](Value* v, int m) {
    if (m == n) return v;
    std::vector<int> idx;
    for (int i = 0; i < n; ++i) idx.push_back(i < m ? i : -1);
    return b.CreateShuffleVector(v, v, idx);
  };
  std::vector<int> idx;
  for (int i = 0; i < nx; ++i) idx.push_back(i);
  for (int i = 0; i < ny; ++i) idx.push_back(n + i);
  return b.CreateShuffleVector(widen(x, nx), widen(y, ny), idx);
}

Value* generic(llvm::IRBuilderBase& b, Value* acc, Value* a, Value* bb, int n) {
  llvm::Type* fv = llvm::FixedVectorType::get(b.getFloatTy(), n);
  llvm::Type* iv = llvm::FixedVectorType::get(b.getInt32Ty(), n);
  auto part = [&](Value* v, int which) {
    std::vector<int> idx;
    for (int i = 0; i < n; ++i) idx.push_back(2 * i + which);
    Value* h = b.CreateShuffleVector(v, v, idx);
    return b.CreateBitCast(b.CreateShl(b.CreateZExt(h, iv), 16), fv);
  };
  Value* r = b.CreateIntrinsic(llvm::Intrinsic::fma, {fv}, {part(a, 1), part(bb, 1), acc});
  return b.CreateIntrinsic(llvm::Intrinsic::fma, {fv}, {part(a, 0), part(bb, 0), r});
}

Value* instruction(llvm::IRBuilderBase& b, Value* acc, Value* a, Value* bb, int n) {
  namespace I = llvm::Intrinsic;
  I::ID id = n == 16  ? I::x86_avx512bf16_dpbf16ps_512
             : n == 8 ? I::x86_avx512bf16_dpbf16ps_256
                      : I::x86_avx512bf16_dpbf16ps_128;
  llvm::Function* f = I::getDeclaration(b.GetInsertBlock()->getModule(), id);
  // The declared operand types (bf16 or i32 vectors, by LLVM version) have the
  // bits of our <2N x i16>: bitcast.
  llvm::FunctionType* ft = f->getFunctionType();
  return b.CreateCall(
      f, {acc, b.CreateBitCast(a, ft->getParamType(1)), b.CreateBitCast(bb, ft->getParamType(2))});
}

}  // namespace

std::string dot2_bf16_lowering(const Target& target, int lanes) {
  int c = chunk_lanes(target, lanes);
  return c == 0 ? "generic" : "vdpbf16ps." + std::to_string(32 * c);
}

Value* emit_dot2_bf16(llvm::IRBuilderBase& b, const Target& target, Value* acc, Value* a,
                      Value* bb) {
  bool scalar = !acc->getType()->isVectorTy();
  if (scalar) acc = b.CreateVectorSplat(1, acc);
  int n = int(llvm::cast<llvm::FixedVectorType>(acc->getType())->getNumElements());
  Value* result = nullptr;
  for (int o = 0; o < n;) {
    int c = chunk_lanes(target, n - o);
    int take = c == 0 ? n - o : c;
    Value* ac = take == n ? acc : slice(b, acc, o, take);
    Value* xa = take == n ? a : slice(b, a, 2 * o, 2 * take);
    Value* xb = take == n ? bb : slice(b, bb, 2 * o, 2 * take);
    Value* r = c == 0 ? generic(b, ac, xa, xb, take) : instruction(b, ac, xa, xb, take);
    result = result ? concat(b, result, r) : r;
    o += take;
  }
  return scalar ? b.CreateExtractElement(result, uint64_t(0)) : result;
}

}  // namespace kiln::codegen::detail
