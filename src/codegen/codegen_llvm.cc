// Loop IR -> LLVM IR.
//
// Every kernel is a thin `int32_t name(void** args)` wrapper around an internal
// body function that takes each buffer as a `noalias` pointer and is always
// inlined: the alias facts survive inlining as scoped-noalias metadata, which
// lets LLVM vectorize and reorder loads across stores to other buffers.
// Parallel loops are outlined the same way (closure -> noalias body).
#include <llvm/IR/Constants.h>
#include <llvm/IR/DerivedTypes.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include <algorithm>
#include <bit>
#include <functional>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "codegen/amx.h"
#include "codegen/bf16_dot.h"
#include "codegen/codegen.h"
#include "codegen/dot_product.h"
#include "codegen/intrinsics.h"
#include "codegen/lane_offsets.h"
#include "codegen/lower_llvm.h"
#include "ir/const_int_bound.h"
#include "ir/functor.h"
#include "ir/simplify.h"

namespace kiln::codegen::detail {

using namespace kiln::ir;  // NOLINT(google-build-using-namespace)
using llvm::Value;

namespace {

[[noreturn]] void fail(const std::string& msg) { throw std::runtime_error("codegen: " + msg); }

// Buffers and variables that a statement reads from its enclosing scope:
// what a parallel loop's closure must carry.
class FreeVars : public IRVisitor {
 public:
  std::vector<const VarNode*> vars;
  std::vector<const BufferNode*> buffers;

 protected:
  void visit_var(const VarNode* op) override {
    if (seen_.insert(op).second) vars.push_back(op);
  }
  void visit_load(const LoadNode* op) override {
    add(op->buffer.get());
    IRVisitor::visit_load(op);
  }
  void visit_store(const StoreNode* op) override {
    add(op->buffer.get());
    IRVisitor::visit_store(op);
  }

 private:
  void add(const BufferNode* b) {
    if (seen_.insert(b).second) buffers.push_back(b);
  }
  std::unordered_set<const void*> seen_;
};

class CodeGenLLVM {
 public:
  CodeGenLLVM(const Target& target, llvm::TargetMachine& tm, llvm::LLVMContext& ctx)
      : target_(target), ctx_(ctx), b_(ctx) {
    module_ = std::make_unique<llvm::Module>("kiln", ctx);
    module_->setTargetTriple(tm.getTargetTriple().str());
    module_->setDataLayout(tm.createDataLayout());
    // a * b + c may fuse into one FMA (C's FP_CONTRACT): one rounding instead
    // of two, and half the instructions in every multiply-accumulate kernel.
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    b_.setFastMathFlags(target.fast_math ? llvm::FastMathFlags::getFast() : fmf);
    for (size_t i = 0; i < target.features.size(); ++i)
      features_ += (i ? "," : "") + target.features[i];
    avx512_ = target.has_feature("avx512f");
  }

  std::unique_ptr<llvm::Module> run(const std::vector<LoweredFunc>& funcs) {
    std::set<std::string> names;
    for (const LoweredFunc& f : funcs) {
      if (f.name.empty()) fail("a kernel has an empty name");
      if (!names.insert(f.name).second) fail("two kernels are named '" + f.name + "'");
      if (!f.body) fail("kernel '" + f.name + "' has no body");
      emit_kernel(f);
      emit_signature(f);
    }
    std::string err;
    llvm::raw_string_ostream os(err);
    if (llvm::verifyModule(*module_, &os)) fail("generated invalid LLVM IR: " + os.str());
    return std::move(module_);
  }

 private:
  // ---- types ------------------------------------------------------------------

  llvm::Type* i1() { return b_.getInt1Ty(); }
  llvm::Type* i8() { return b_.getInt8Ty(); }
  llvm::Type* i32() { return b_.getInt32Ty(); }
  llvm::Type* i64() { return b_.getInt64Ty(); }
  llvm::Type* f32() { return b_.getFloatTy(); }
  llvm::Type* ptr() { return b_.getPtrTy(); }

  static llvm::Type* vec(llvm::Type* elem, int lanes) {
    return lanes == 1 ? elem : llvm::FixedVectorType::get(elem, lanes);
  }

  // The type values of t have in registers. bfloat16 travels as its i16 bits
  // (LLVM 16's x86 backend cannot convert `bfloat`); bool is i1.
  llvm::Type* value_type(DataType t) {
    llvm::Type* e = nullptr;
    switch (t.code) {
      case TypeCode::Int:
      case TypeCode::UInt: e = b_.getIntNTy(t.bits); break;
      case TypeCode::Bool: e = i1(); break;
      case TypeCode::BFloat: e = b_.getInt16Ty(); break;
      case TypeCode::Handle: e = ptr(); break;
      case TypeCode::Float:
        if (t.bits == 16)
          e = b_.getHalfTy();
        else if (t.bits == 32)
          e = f32();
        else if (t.bits == 64)
          e = b_.getDoubleTy();
        else
          fail("unsupported float width in " + t.str());
        break;
    }
    return vec(e, t.lanes);
  }
  // In memory, bool takes one byte per element.
  llvm::Type* storage_type(DataType t) { return t.is_bool() ? vec(i8(), t.lanes) : value_type(t); }
  static llvm::Align elem_align(DataType t) { return llvm::Align(t.element_of().bytes()); }

  // ---- functions ----------------------------------------------------------------

  void set_target_attrs(llvm::Function* f) {
    f->addFnAttr(llvm::Attribute::NoUnwind);
    if (!target_.cpu.empty()) f->addFnAttr("target-cpu", target_.cpu);
    if (!features_.empty()) f->addFnAttr("target-features", features_);
    if (avx512_) {
      // Without these LLVM's tuning for recent Intel cores splits 512-bit
      // vectors into two 256-bit halves.
      f->addFnAttr("prefer-vector-width", "512");
      f->addFnAttr("min-legal-vector-width", "512");
    }
  }

  llvm::Function* new_function(const std::string& name, llvm::Type* ret,
                               const std::vector<llvm::Type*>& params, bool external) {
    auto* ft = llvm::FunctionType::get(ret, params, false);
    auto linkage = external ? llvm::Function::ExternalLinkage : llvm::Function::InternalLinkage;
    llvm::Function* f = llvm::Function::Create(ft, linkage, name, module_.get());
    set_target_attrs(f);
    return f;
  }

  llvm::FunctionCallee runtime_fn(const char* name, llvm::Type* ret,
                                  const std::vector<llvm::Type*>& params) {
    return module_->getOrInsertFunction(name, llvm::FunctionType::get(ret, params, false));
  }

  // Per-function codegen state; saved and restored around outlined closures.
  struct FnState {
    llvm::Function* fn = nullptr;
    std::unordered_map<const VarNode*, Value*> vars;
    std::unordered_map<const BufferNode*, Value*> buffers;
    std::vector<Value*> workspaces;  // live kiln_workspace_alloc results
    // An i1 alloca: some ir::Intrinsic::CheckIndex of this function found an
    // index out of range (created by the first one; see emit_check_index).
    Value* index_error = nullptr;
  };

  // Emits a function whose buffer parameters are noalias and which always
  // inlines into its caller; `bind` maps its parameters, `body` fills it.
  // The function returns 0 unless an error branch returns early, or
  // KILN_STATUS_INDEX_OUT_OF_RANGE where an index check failed.
  llvm::Function* emit_noalias_body(const std::string& name,
                                    const std::vector<const BufferNode*>& bufs,
                                    const std::vector<llvm::Type*>& extra_params,
                                    const std::function<void(llvm::Function*, size_t)>& bind,
                                    const std::function<void()>& body) {
    std::vector<llvm::Type*> params(bufs.size(), ptr());
    params.insert(params.end(), extra_params.begin(), extra_params.end());
    llvm::Function* f = new_function(name, i32(), params, false);
    f->addFnAttr(llvm::Attribute::AlwaysInline);
    for (size_t i = 0; i < bufs.size(); ++i) f->addParamAttr(i, llvm::Attribute::NoAlias);

    FnState saved = std::move(state_);
    auto ip = b_.saveIP();
    state_ = FnState{};
    state_.fn = f;
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
    for (size_t i = 0; i < bufs.size(); ++i) {
      f->getArg(i)->setName(bufs[i]->name);
      state_.buffers[bufs[i]] = f->getArg(i);
    }
    bind(f, bufs.size());
    body();
    Value* status = b_.getInt32(0);
    if (state_.index_error)
      status = b_.CreateSelect(b_.CreateLoad(i1(), state_.index_error),
                               b_.getInt32(KILN_STATUS_INDEX_OUT_OF_RANGE), status);
    b_.CreateRet(status);
    state_ = std::move(saved);
    b_.restoreIP(ip);
    return f;
  }

  // NAME_signature: the kernel's argument signature (codegen.h), checked by the runtime.
  void emit_signature(const LoweredFunc& func) {
    llvm::Constant* text = llvm::ConstantDataArray::getString(ctx_, kernel_signature(func), true);
    auto* gv = new llvm::GlobalVariable(*module_, text->getType(), true,
                                        llvm::GlobalValue::ExternalLinkage, text,
                                        func.name + "_signature");
    gv->setAlignment(llvm::Align(1));
  }

  void emit_kernel(const LoweredFunc& func) {
    std::vector<const BufferNode*> bufs;
    for (const Buffer& buf : func.args) bufs.push_back(buf.get());
    llvm::Function* body = emit_noalias_body(
        func.name + ".body", bufs, {}, [](llvm::Function*, size_t) {}, [&] { emit(func.body); });

    llvm::Function* f = new_function(func.name, i32(), {ptr()}, true);
    f->getArg(0)->setName("args");
    b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", f));
    std::vector<Value*> call_args;
    for (size_t i = 0; i < bufs.size(); ++i) {
      Value* slot = b_.CreateConstInBoundsGEP1_64(ptr(), f->getArg(0), i);
      call_args.push_back(b_.CreateLoad(ptr(), slot, bufs[i]->name));
    }
    b_.CreateRet(b_.CreateCall(body, call_args));
  }

  // Returns rc from the current function (after freeing live workspaces) when
  // rc != 0; otherwise code continues in a fresh block.
  void return_if_error(Value* rc) {
    auto* err = llvm::BasicBlock::Create(ctx_, "error", state_.fn);
    auto* ok = llvm::BasicBlock::Create(ctx_, "ok", state_.fn);
    b_.CreateCondBr(b_.CreateICmpNE(rc, b_.getInt32(0)), err, ok, unlikely());
    b_.SetInsertPoint(err);
    for (auto it = state_.workspaces.rbegin(); it != state_.workspaces.rend(); ++it)
      b_.CreateCall(workspace_free(), {*it});
    b_.CreateRet(rc);
    b_.SetInsertPoint(ok);
  }

  // A distinct loop id (its first operand itself) carrying llvm.loop.unroll.disable.
  llvm::MDNode* unroll_disabled_loop_id() {
    llvm::MDNode* disable =
        llvm::MDNode::get(ctx_, {llvm::MDString::get(ctx_, "llvm.loop.unroll.disable")});
    llvm::TempMDTuple self = llvm::MDNode::getTemporary(ctx_, {});
    llvm::MDNode* id = llvm::MDNode::getDistinct(ctx_, {self.get(), disable});
    id->replaceOperandWith(0, id);
    return id;
  }
  llvm::MDNode* unlikely() { return llvm::MDBuilder(ctx_).createBranchWeights(1, 1 << 20); }

  llvm::FunctionCallee workspace_alloc() {
    return runtime_fn("kiln_workspace_alloc", ptr(), {i64()});
  }
  llvm::FunctionCallee workspace_free() {
    return runtime_fn("kiln_workspace_free", b_.getVoidTy(), {ptr()});
  }

  // ---- statements ---------------------------------------------------------------

  void emit(const Stmt& s) {
    switch (s.kind()) {
      case StmtKind::For: return emit_for(s.as<ForNode>());
      case StmtKind::Store: return emit_store(s.as<StoreNode>());
      case StmtKind::Allocate: return emit_allocate(s.as<AllocateNode>());
      case StmtKind::LetStmt: {
        auto* op = s.as<LetStmtNode>();
        Value* v = emit(op->value);
        return with_var(op->var, v, [&] { emit(op->body); });
      }
      case StmtKind::IfThenElse: return emit_if(s.as<IfThenElseNode>());
      case StmtKind::Seq:
        for (const Stmt& x : s.as<SeqNode>()->seq) emit(x);
        return;
      case StmtKind::Evaluate: emit(s.as<EvaluateNode>()->value); return;
      case StmtKind::TensorStore:
      case StmtKind::Realize:
        fail("TensorStore/Realize reached code generation: run storage flattening first");
    }
    fail("unknown statement kind");
  }

  void with_var(const Var& v, Value* value, const std::function<void()>& f) {
    auto& vars = state_.vars;
    auto old = vars.find(v.get());
    Value* prev = old == vars.end() ? nullptr : old->second;
    vars[v.get()] = value;
    f();
    if (prev)
      vars[v.get()] = prev;
    else
      vars.erase(v.get());
  }

  Value* emit_index(const Expr& e, llvm::Type* ty) {
    Value* v = emit(e);
    return e.dtype().is_uint() ? b_.CreateZExtOrTrunc(v, ty) : b_.CreateSExtOrTrunc(v, ty);
  }

  void emit_for(const ForNode* op) {
    if (!op->var.dtype().is_integer() || op->var.dtype().lanes != 1)
      fail("loop variable '" + op->var.name() + "' must be a scalar integer");
    if (op->for_kind == ForKind::Parallel && parallel_depth_ == 0) return emit_parallel_for(op);
    // Serial; Vectorized/Unrolled are normally rewritten earlier, and a serial
    // loop is a correct implementation of both. Nested parallel runs serially.
    llvm::Type* ty = value_type(op->var.dtype());
    Value* lo = emit_index(op->min, ty);
    Value* hi = b_.CreateAdd(lo, emit_index(op->extent, ty));
    emit_serial_loop(op->var, lo, hi, op->body, op->for_kind == ForKind::Rolled);
  }

  void emit_serial_loop(const Var& var, Value* lo, Value* hi, const Stmt& body,
                        bool keep_rolled = false) {
    llvm::BasicBlock* pre = b_.GetInsertBlock();
    auto* header = llvm::BasicBlock::Create(ctx_, "for." + var.name(), state_.fn);
    auto* loop = llvm::BasicBlock::Create(ctx_, "for.body." + var.name(), state_.fn);
    auto* exit = llvm::BasicBlock::Create(ctx_, "for.end." + var.name(), state_.fn);
    b_.CreateBr(header);
    b_.SetInsertPoint(header);
    llvm::PHINode* i = b_.CreatePHI(lo->getType(), 2, var.name());
    i->addIncoming(lo, pre);
    b_.CreateCondBr(b_.CreateICmpSLT(i, hi), loop, exit);
    b_.SetInsertPoint(loop);
    with_var(var, i, [&] { emit(body); });
    Value* next = b_.CreateAdd(i, llvm::ConstantInt::get(i->getType(), 1), "", false, true);
    i->addIncoming(next, b_.GetInsertBlock());
    llvm::BranchInst* back = b_.CreateBr(header);
    if (keep_rolled) back->setMetadata(llvm::LLVMContext::MD_loop, unroll_disabled_loop_id());
    b_.SetInsertPoint(exit);
  }

  // for (v = min; v < min + extent; ++v) body, in parallel:
  //   struct { min, captured... } c;  rc = kiln_parallel_for(extent, closure, &c)
  // closure(begin, end, &c) unpacks c and calls an always-inlined body whose
  // buffer parameters are noalias, which runs v over [min+begin, min+end).
  void emit_parallel_for(const ForNode* op) {
    llvm::Type* ty = value_type(op->var.dtype());
    Value* lo = emit_index(op->min, ty);
    Value* extent = emit_index(op->extent, i64());

    FreeVars fv;
    fv.visit(op->body);
    std::vector<const BufferNode*> bufs;
    for (const BufferNode* buf : fv.buffers)
      if (state_.buffers.count(buf)) bufs.push_back(buf);
    std::vector<const VarNode*> vars;
    std::vector<Value*> fields{lo};
    for (const VarNode* v : fv.vars) {
      if (v == op->var.get() || !state_.vars.count(v)) continue;
      vars.push_back(v);
      fields.push_back(state_.vars[v]);
    }
    for (const BufferNode* buf : bufs) fields.push_back(state_.buffers[buf]);
    std::vector<llvm::Type*> field_types;
    for (Value* v : fields) field_types.push_back(v->getType());
    auto* closure_ty = llvm::StructType::get(ctx_, field_types);

    std::string name = state_.fn->getName().str() + ".par" + std::to_string(closure_count_++);
    // The body: (bufs..., i64 begin, i64 end, min, vars...).
    std::vector<llvm::Type*> extra{i64(), i64()};
    for (size_t k = 0; k < vars.size() + 1; ++k) extra.push_back(field_types[k]);
    ++parallel_depth_;
    llvm::Function* body = emit_noalias_body(
        name + ".body", bufs, extra,
        [&](llvm::Function* f, size_t n) {
          for (size_t k = 0; k < vars.size(); ++k) state_.vars[vars[k]] = f->getArg(n + 3 + k);
        },
        [&] {
          llvm::Function* f = state_.fn;
          size_t n = bufs.size();
          Value* mn = f->getArg(n + 2);
          Value* begin = b_.CreateAdd(mn, b_.CreateSExtOrTrunc(f->getArg(n), ty));
          Value* end = b_.CreateAdd(mn, b_.CreateSExtOrTrunc(f->getArg(n + 1), ty));
          emit_serial_loop(op->var, begin, end, op->body);
        });
    --parallel_depth_;

    // The closure: int32_t (int64_t begin, int64_t end, void* closure).
    llvm::Function* closure = new_function(name, i32(), {i64(), i64(), ptr()}, false);
    {
      auto ip = b_.saveIP();
      b_.SetInsertPoint(llvm::BasicBlock::Create(ctx_, "entry", closure));
      std::vector<Value*> loaded(fields.size());
      for (size_t k = 0; k < fields.size(); ++k)
        loaded[k] =
            b_.CreateLoad(field_types[k], b_.CreateStructGEP(closure_ty, closure->getArg(2), k));
      std::vector<Value*> args(loaded.begin() + 1 + vars.size(), loaded.end());  // buffers
      args.push_back(closure->getArg(0));
      args.push_back(closure->getArg(1));
      args.insert(args.end(), loaded.begin(), loaded.begin() + 1 + vars.size());
      b_.CreateRet(b_.CreateCall(body, args));
      b_.restoreIP(ip);
    }

    Value* storage = entry_alloca(closure_ty, nullptr, llvm::Align(16), name + ".closure");
    for (size_t k = 0; k < fields.size(); ++k)
      b_.CreateStore(fields[k], b_.CreateStructGEP(closure_ty, storage, k));
    auto launch = runtime_fn("kiln_parallel_for", i32(), {i64(), ptr(), ptr()});
    return_if_error(b_.CreateCall(launch, {extent, closure, storage}));
  }

  // An alloca in the entry block of the current function, so that it is
  // allocated once per call even when the allocation sits inside a loop.
  Value* entry_alloca(llvm::Type* ty, Value* count, llvm::Align align, const std::string& name) {
    llvm::BasicBlock& entry = state_.fn->getEntryBlock();
    llvm::IRBuilder<> eb(&entry, entry.getFirstInsertionPt());
    llvm::AllocaInst* a = eb.CreateAlloca(ty, count, name);
    a->setAlignment(align);
    return a;
  }

  void emit_allocate(const AllocateNode* op) {
    const BufferNode* buf = op->buffer.get();
    llvm::Type* elem = storage_type(buf->dtype.element_of());
    int64_t elem_bytes = buf->dtype.element_of().bytes();
    const int64_t* n = as_const_int(op->size);
    // Local tiles live on the stack; large or dynamic ones would overflow
    // thread stacks, so they go to the workspace allocator like global ones.
    if (buf->scope == MemScope::Local && n && *n * elem_bytes <= ir::kMaxLocalStackBytes) {
      int64_t bytes = std::max<int64_t>(*n, 1) * elem_bytes;
      auto align = llvm::Align(bytes >= 64 ? 64 : 16);
      Value* p = entry_alloca(elem, b_.getInt64(std::max<int64_t>(*n, 1)), align, buf->name);
      return with_buffer(buf, p, [&] { emit(op->body); });
    }
    Value* bytes = b_.CreateMul(emit_index(op->size, i64()), b_.getInt64(elem_bytes));
    Value* p = b_.CreateCall(workspace_alloc(), {bytes}, buf->name);
    // Out of memory: return KILN_STATUS_OUT_OF_MEMORY (freeing what this function holds).
    return_if_error(b_.CreateSelect(b_.CreateIsNull(p), b_.getInt32(KILN_STATUS_OUT_OF_MEMORY),
                                    b_.getInt32(0)));
    state_.workspaces.push_back(p);
    with_buffer(buf, p, [&] { emit(op->body); });
    state_.workspaces.pop_back();
    b_.CreateCall(workspace_free(), {p});
  }

  void with_buffer(const BufferNode* buf, Value* p, const std::function<void()>& f) {
    auto& bufs = state_.buffers;
    auto old = bufs.find(buf);
    Value* prev = old == bufs.end() ? nullptr : old->second;
    bufs[buf] = p;
    f();
    if (prev)
      bufs[buf] = prev;
    else
      bufs.erase(buf);
  }

  void emit_if(const IfThenElseNode* op) {
    if (op->cond.dtype() != DataType::boolean())
      fail("if condition must be a scalar bool, got " + op->cond.dtype().str());
    Value* c = emit(op->cond);
    auto* then_bb = llvm::BasicBlock::Create(ctx_, "if.then", state_.fn);
    auto* end_bb = llvm::BasicBlock::Create(ctx_, "if.end", state_.fn);
    auto* else_bb = op->else_case ? llvm::BasicBlock::Create(ctx_, "if.else", state_.fn) : end_bb;
    b_.CreateCondBr(c, then_bb, else_bb);
    b_.SetInsertPoint(then_bb);
    emit(op->then_case);
    b_.CreateBr(end_bb);
    if (op->else_case) {
      b_.SetInsertPoint(else_bb);
      emit(op->else_case);
      b_.CreateBr(end_bb);
    }
    b_.SetInsertPoint(end_bb);
  }

  // ---- memory -------------------------------------------------------------------

  Value* buffer_ptr(const Buffer& buf) {
    auto it = state_.buffers.find(buf.get());
    if (it == state_.buffers.end())
      fail("buffer '" + buf->name + "' is used but is neither an argument nor allocated");
    return it->second;
  }

  // A dense vector access: index = ramp(base, 1, lanes). Returns base or null.
  static const Expr* dense_base(const Expr& index) {
    auto* r = index.as<RampNode>();
    return r && is_const_int(r->stride, 1) ? &r->base : nullptr;
  }

  // A vector load whose lanes read base + constant offsets that all lie in
  // one window of `lanes` elements (lane_offsets.h): one load of the window
  // and a shuffle, instead of a gather. The window starts at the lowest
  // offset rounded down to a multiple of the lanes, so that the
  // permutations of one block (lane j of each group, j = 0, 1, ...) load
  // from the same address. The whole window is loaded when the lanes span
  // it, or when it is an aligned block of a buffer made of whole blocks
  // (the base a multiple of the lanes by its form: the gather reads inside
  // the block, so all of the block is inside the buffer); then the loads of
  // one block are one load (LLVM merges them). Otherwise only the elements
  // from the lowest to the highest offset are read (a masked load), so no
  // address outside the gather's own span is touched. Null if the index
  // has no such form.
  // Whether the buffer's constant size is a multiple of `lanes` elements.
  static bool whole_blocks(const Buffer& buf, int lanes) {
    int64_t n = 1;
    for (const Expr& d : buf->shape) {
      const int64_t* c = as_const_int(d);
      if (!c) return false;
      n *= *c;
    }
    return n > 0 && n % lanes == 0;
  }

  Value* emit_window_load(const LoadNode* op, llvm::Type* st, Value* base) {
    const int lanes = op->dtype.lanes;
    if (op->buffer->dtype.element_of().is_bool()) return nullptr;
    std::optional<LaneOffsets> lo = lane_offsets(op->index);
    if (!lo) return nullptr;
    auto [min_it, max_it] = std::minmax_element(lo->offsets.begin(), lo->offsets.end());
    const int64_t start = arith::floordiv_i(*min_it, lanes) * lanes;
    if (*max_it - start >= lanes) return nullptr;
    llvm::Type* vt = vec(st, lanes);
    Value* first = b_.CreateAdd(emit_index(lo->base, i64()), b_.getInt64(start));
    llvm::Align align = elem_align(op->buffer->dtype.element_of());
    Value* window;
    if ((*min_it == start && *max_it == start + lanes - 1) ||
        (is_multiple_of(lo->base, lanes) && whole_blocks(op->buffer, lanes))) {
      window = b_.CreateAlignedLoad(vt, b_.CreateInBoundsGEP(st, base, first), align);
    } else {
      // The window's start may lie before the buffer (only lanes from the
      // lowest offset on are read): a plain GEP, not an inbounds one.
      Value* p = b_.CreateGEP(st, base, first);
      std::vector<llvm::Constant*> bits;
      for (int i = 0; i < lanes; ++i)
        bits.push_back(b_.getInt1(i >= *min_it - start && i <= *max_it - start));
      window = b_.CreateMaskedLoad(vt, p, align, llvm::ConstantVector::get(bits),
                                   llvm::PoisonValue::get(vt));
    }
    std::vector<int> mask;
    for (int64_t o : lo->offsets) mask.push_back(static_cast<int>(o - start));
    return b_.CreateShuffleVector(window, window, mask);
  }

  // A predicated load or store (the vectorizer's partial vector): only the
  // lanes of the mask touch memory, so the address is a plain GEP (the
  // first lane's may lie past the buffer when no lane is on).
  Value* emit_mask(const Expr& predicate, int lanes, const std::string& buffer) {
    if (predicate.dtype().lanes != lanes || lanes == 1)
      fail("predicated access to '" + buffer + "': the predicate has " +
           std::to_string(predicate.dtype().lanes) + " lanes, the access " + std::to_string(lanes));
    return emit(predicate);
  }

  Value* emit_predicated_load(const LoadNode* op) {
    DataType elem = op->buffer->dtype.element_of();
    llvm::Type* st = storage_type(elem);
    llvm::Type* vt = vec(st, op->dtype.lanes);
    Value* mask = emit_mask(op->predicate, op->dtype.lanes, op->buffer->name);
    Value* zero = llvm::Constant::getNullValue(vt);
    Value* base = buffer_ptr(op->buffer);
    Value* v;
    if (const Expr* rb = dense_base(op->index))
      v = b_.CreateMaskedLoad(vt, b_.CreateGEP(st, base, emit_index(*rb, i64())), elem_align(elem),
                              mask, zero);
    else
      v = b_.CreateMaskedGather(
          vt, b_.CreateGEP(st, base, emit_index(op->index, vec(i64(), op->dtype.lanes))),
          elem_align(elem), mask, zero);
    return elem.is_bool() ? b_.CreateICmpNE(v, zero) : v;
  }

  void emit_predicated_store(const StoreNode* op, Value* v, int lanes) {
    DataType elem = op->buffer->dtype.element_of();
    llvm::Type* st = storage_type(elem);
    Value* mask = emit_mask(op->predicate, lanes, op->buffer->name);
    Value* base = buffer_ptr(op->buffer);
    if (const Expr* rb = dense_base(op->index))
      b_.CreateMaskedStore(v, b_.CreateGEP(st, base, emit_index(*rb, i64())), elem_align(elem),
                           mask);
    else
      b_.CreateMaskedScatter(v, b_.CreateGEP(st, base, emit_index(op->index, vec(i64(), lanes))),
                             elem_align(elem), mask);
  }

  Value* emit_load(const LoadNode* op) {
    if (op->predicate) return emit_predicated_load(op);
    DataType t = op->dtype;
    DataType elem = op->buffer->dtype.element_of();
    llvm::Type* st = storage_type(elem);
    Value* base = buffer_ptr(op->buffer);
    llvm::Type* vt = vec(st, t.lanes);
    Value* v;
    if (t.lanes == 1) {
      v = b_.CreateAlignedLoad(st, b_.CreateInBoundsGEP(st, base, emit_index(op->index, i64())),
                               elem_align(elem));
    } else if (const Expr* rb = dense_base(op->index)) {
      Value* p = b_.CreateInBoundsGEP(st, base, emit_index(*rb, i64()));
      v = b_.CreateAlignedLoad(vt, p, elem_align(elem));
    } else if (Value* w = emit_window_load(op, st, base)) {
      v = w;
    } else {
      Value* ptrs = b_.CreateInBoundsGEP(st, base, emit_index(op->index, vec(i64(), t.lanes)));
      v = b_.CreateMaskedGather(vt, ptrs, elem_align(elem));
    }
    return elem.is_bool() ? b_.CreateICmpNE(v, llvm::Constant::getNullValue(vt)) : v;
  }

  void emit_store(const StoreNode* op) {
    DataType elem = op->buffer->dtype.element_of();
    int lanes = op->value.dtype().lanes;
    if (op->index.dtype().lanes != lanes)
      fail("store to '" + op->buffer->name + "': value has " + std::to_string(lanes) +
           " lanes but the index has " + std::to_string(op->index.dtype().lanes));
    llvm::Type* st = storage_type(elem);
    Value* base = buffer_ptr(op->buffer);
    Value* v = emit(op->value);
    if (elem.is_bool()) v = b_.CreateZExt(v, vec(i8(), lanes));
    if (op->predicate) {
      emit_predicated_store(op, v, lanes);
    } else if (lanes == 1) {
      Value* p = b_.CreateInBoundsGEP(st, base, emit_index(op->index, i64()));
      b_.CreateAlignedStore(v, p, elem_align(elem));
    } else if (const Expr* rb = dense_base(op->index)) {
      Value* p = b_.CreateInBoundsGEP(st, base, emit_index(*rb, i64()));
      b_.CreateAlignedStore(v, p, elem_align(elem));
    } else {
      Value* ptrs = b_.CreateInBoundsGEP(st, base, emit_index(op->index, vec(i64(), lanes)));
      b_.CreateMaskedScatter(v, ptrs, elem_align(elem));
    }
  }

  // ---- expressions --------------------------------------------------------------

  Value* emit(const Expr& e) {
    if (!e) fail("null expression");
    switch (e.kind()) {
      case ExprKind::IntImm: return emit_int_imm(e.as<IntImmNode>());
      case ExprKind::FloatImm: return emit_float_imm(e.as<FloatImmNode>());
      case ExprKind::Var: {
        auto* v = e.as<VarNode>();
        auto it = state_.vars.find(v);
        if (it == state_.vars.end()) fail("variable '" + v->name + "' is used outside its scope");
        return it->second;
      }
      case ExprKind::Not: return b_.CreateNot(emit(e.as<NotNode>()->a));
      case ExprKind::Select: return emit_select(e.as<SelectNode>());
      case ExprKind::Cast: {
        auto* op = e.as<CastNode>();
        return emit_cast(emit(op->value), op->value.dtype(), op->dtype);
      }
      case ExprKind::Call: return emit_call(e.as<CallNode>());
      case ExprKind::Let: {
        auto* op = e.as<LetNode>();
        Value* result = nullptr;
        with_var(op->var, emit(op->value), [&] { result = emit(op->body); });
        return result;
      }
      case ExprKind::Load: return emit_load(e.as<LoadNode>());
      case ExprKind::Ramp: return emit_ramp(e.as<RampNode>());
      case ExprKind::Broadcast: {
        auto* op = e.as<BroadcastNode>();
        return b_.CreateVectorSplat(op->lanes, emit(op->value));
      }
      case ExprKind::TensorRead:
      case ExprKind::Reduce:
        fail("TensorRead/Reduce reached code generation: lower the tensor expressions first");
      default:
        if (is_binary(e.kind())) return emit_binary(static_cast<const BinaryNode*>(e.get()));
        fail("unknown expression kind");
    }
  }

  Value* emit_int_imm(const IntImmNode* op) {
    DataType t = op->dtype;
    if (t.is_float()) return const_float(t, static_cast<double>(op->value));
    return llvm::ConstantInt::get(value_type(t), static_cast<uint64_t>(op->value), t.is_int());
  }
  Value* emit_float_imm(const FloatImmNode* op) {
    DataType t = op->dtype;
    if (!t.is_float()) {
      return llvm::ConstantInt::get(value_type(t), static_cast<uint64_t>(op->value), t.is_int());
    }
    return const_float(t, op->value);
  }
  Value* const_float(DataType t, double v) {
    if (t.code == TypeCode::BFloat) {
      // Round to nearest even, like the runtime conversion below.
      uint32_t bits = std::bit_cast<uint32_t>(static_cast<float>(v));
      uint16_t h =
          v != v ? 0x7fc0 : static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
      return llvm::ConstantInt::get(value_type(t), h);
    }
    return llvm::ConstantFP::get(value_type(t), v);
  }

  Value* emit_ramp(const RampNode* op) {
    DataType t = op->base.dtype();
    Value* base = b_.CreateVectorSplat(op->lanes, emit(op->base));
    Value* stride = b_.CreateVectorSplat(op->lanes, emit(op->stride));
    std::vector<llvm::Constant*> steps;
    for (int i = 0; i < op->lanes; ++i) {
      steps.push_back(t.is_float() ? llvm::ConstantFP::get(value_type(t), i)
                                   : llvm::ConstantInt::get(value_type(t), i));
    }
    Value* iota = llvm::ConstantVector::get(steps);
    if (t.is_float()) return b_.CreateFAdd(base, b_.CreateFMul(stride, iota));
    return b_.CreateAdd(base, b_.CreateMul(stride, iota));
  }

  Value* emit_select(const SelectNode* op) {
    Value* c = emit(op->cond);
    return b_.CreateSelect(c, emit(op->true_value), emit(op->false_value));
  }

  // bfloat16 <-> float32 on the i16 bit pattern.
  Value* bf16_to_f32(Value* v, int lanes) {
    Value* w = b_.CreateShl(b_.CreateZExt(v, vec(i32(), lanes)), 16);
    return b_.CreateBitCast(w, vec(f32(), lanes));
  }
  Value* f32_to_bf16(Value* v, int lanes) {
    // Round to nearest even; NaN stays a (quiet) NaN.
    Value* bits = b_.CreateBitCast(v, vec(i32(), lanes));
    auto c = [&](uint32_t x) { return llvm::ConstantInt::get(vec(i32(), lanes), x); };
    Value* lsb = b_.CreateAnd(b_.CreateLShr(bits, 16), c(1));
    Value* rounded = b_.CreateLShr(b_.CreateAdd(bits, b_.CreateAdd(c(0x7fff), lsb)), 16);
    Value* nan = b_.CreateFCmpUNO(v, v);
    Value* r = b_.CreateSelect(nan, c(0x7fc0), rounded);
    return b_.CreateTrunc(r, vec(b_.getInt16Ty(), lanes));
  }

  Value* emit_cast(Value* v, DataType from, DataType to) {
    if (from.element_of() == to.element_of()) return v;
    int lanes = to.lanes;
    if (from.code == TypeCode::BFloat)
      return emit_cast(bf16_to_f32(v, lanes), DataType::f32(lanes), to);
    if (to.code == TypeCode::BFloat) {
      Value* f = emit_cast(v, from, DataType::f32(lanes));
      return f32_to_bf16(f, lanes);
    }
    llvm::Type* ty = value_type(to);
    if (to.is_bool()) {
      if (from.code == TypeCode::Float)
        return b_.CreateFCmpUNE(v, llvm::Constant::getNullValue(v->getType()));
      return b_.CreateICmpNE(v, llvm::Constant::getNullValue(v->getType()));
    }
    if (from.is_bool()) {
      return to.code == TypeCode::Float ? b_.CreateUIToFP(v, ty) : b_.CreateZExt(v, ty);
    }
    if (from.is_integer() && to.is_integer()) return b_.CreateIntCast(v, ty, from.is_int());
    if (from.is_integer()) return from.is_int() ? b_.CreateSIToFP(v, ty) : b_.CreateUIToFP(v, ty);
    if (to.is_integer()) return to.is_int() ? b_.CreateFPToSI(v, ty) : b_.CreateFPToUI(v, ty);
    // float <-> float (half, float, double); double -> half goes via float.
    if (from.bits == 64 && to.bits == 16)
      return emit_cast(emit_cast(v, from, DataType::f32(lanes)), DataType::f32(lanes), to);
    return to.bits > from.bits ? b_.CreateFPExt(v, ty) : b_.CreateFPTrunc(v, ty);
  }

  // acc + dot4_u8i8(0, ...) (a reduction's update) is dot4_u8i8(acc, ...): one
  // accumulating instruction instead of a dot product and an add.
  static const CallNode* zero_acc_dot4(const Expr& e) {
    auto* c = e.as<CallNode>();
    return c && is_dot4_u8i8(c->op) && is_zero(c->args[0]) ? c : nullptr;
  }

  // The <2n x i16> pairs of a dot2_bf16 operand given as two element
  // expressions (lane i of x0 / x1 is element 2i / 2i+1), when they are two
  // loads of neighbouring elements of one buffer: scalars (the pair is one
  // 32-bit word, splat to every lane: vpbroadcastd or an embedded broadcast)
  // or ramps of stride 2 whose bases differ by 1 (one contiguous load; as
  // gathers they would cost more than the dot product). Null otherwise: the
  // caller interleaves with shuffles.
  Value* dot2_pairs(const Expr& x0, const Expr& x1, int n) {
    auto* l0 = x0.as<LoadNode>();
    auto* l1 = x1.as<LoadNode>();
    if (!l0 || !l1 || l0->buffer != l1->buffer || l0->predicate || l1->predicate) return nullptr;
    bool scalar = x0.dtype().lanes == 1 && x1.dtype().lanes == 1;
    const Expr *b0 = nullptr, *b1 = nullptr;
    if (scalar) {
      b0 = &l0->index;
      b1 = &l1->index;
    } else {
      auto* r0 = l0->index.as<RampNode>();
      auto* r1 = l1->index.as<RampNode>();
      if (r0 && r1 && r0->lanes == n && r1->lanes == n && is_const_int(r0->stride, 2) &&
          is_const_int(r1->stride, 2)) {
        b0 = &r0->base;
        b1 = &r1->base;
      }
    }
    if (!b0 || !is_const_int(simplify(*b1 - *b0), 1)) return nullptr;
    llvm::Type* st = storage_type(l0->buffer->dtype.element_of());
    Value* p = b_.CreateInBoundsGEP(st, buffer_ptr(l0->buffer), emit_index(*b0, i64()));
    if (!scalar) return b_.CreateAlignedLoad(vec(b_.getInt16Ty(), 2 * n), p, llvm::Align(2));
    // The pair as <2 x i16>, repeated by a shuffle (a bitcast of an i32 splat
    // sends LLVM 16's VectorCombine into endless recursion once the
    // intrinsic's operand is bitcast on to <2n x bfloat>).
    llvm::Type* pair = vec(b_.getInt16Ty(), 2);
    Value* two = b_.CreateAlignedLoad(pair, p, llvm::Align(2));
    if (n == 1) return two;
    std::vector<int> idx;
    for (int i = 0; i < n; ++i) idx.insert(idx.end(), {0, 1});
    return b_.CreateShuffleVector(two, two, idx);
  }

  // A pair dot product (dot2_bf16 or dot2_i16) whose accumulator is zero.
  static const CallNode* zero_acc_dot2(const Expr& e) {
    auto* c = e.as<CallNode>();
    if (!c || (c->op != Intrinsic::DotBF16 && c->op != Intrinsic::DotI16)) return nullptr;
    const Expr* acc = &c->args[0];
    if (auto* bc = acc->as<BroadcastNode>()) acc = &bc->value;
    if (auto* f = acc->as<FloatImmNode>()) return f->value == 0.0 ? c : nullptr;
    return is_zero(*acc) ? c : nullptr;
  }
  Value* emit_pair_dot(const CallNode* op, Value* acc, Value* a, Value* bb) {
    if (op->op == Intrinsic::DotI16) return emit_dot2_i16(b_, target_, acc, a, bb);
    return emit_dot2_bf16(b_, target_, acc, a, bb);
  }
  // dot2_bf16 and dot2_i16: pairs of 16-bit elements.
  Value* emit_dot2_call(const CallNode* op, Value* acc_override = nullptr) {
    Value* acc = acc_override ? acc_override : emit(op->args[0]);
    if (op->args.size() == 3) return emit_pair_dot(op, acc, emit(op->args[1]), emit(op->args[2]));
    // The element form: interleave a0, a1 (and b0, b1) into <2N x i16> pairs,
    // broadcasting a one-lane argument (dot2_pairs: one load where they are
    // neighbours in memory).
    int n = op->dtype.lanes;
    if (Value* a = dot2_pairs(op->args[1], op->args[2], n))
      if (Value* bb = dot2_pairs(op->args[3], op->args[4], n)) return emit_pair_dot(op, acc, a, bb);
    auto lanes = [&](int i) {
      Value* v = emit(op->args[i]);
      if (op->args[i].dtype().lanes == 1) v = b_.CreateVectorSplat(n, v);
      return v;
    };
    auto pair = [&](Value* x, Value* y) {
      if (!x->getType()->isVectorTy()) x = b_.CreateVectorSplat(1, x);
      if (!y->getType()->isVectorTy()) y = b_.CreateVectorSplat(1, y);
      std::vector<int> idx;
      for (int i = 0; i < n; ++i) {
        idx.push_back(i);
        idx.push_back(n + i);
      }
      return b_.CreateShuffleVector(x, y, idx);
    };
    Value* a = pair(lanes(1), lanes(2));
    Value* bb = pair(lanes(3), lanes(4));
    return emit_pair_dot(op, acc, a, bb);
  }

  Value* emit_binary(const BinaryNode* op) {
    DataType t = op->a.dtype();
    if (op->kind == ExprKind::Add && t == op->b.dtype()) {
      if (auto* c = zero_acc_dot4(op->b)) return emit_dot4(c, emit(op->a));
      if (auto* c = zero_acc_dot4(op->a)) return emit_dot4(c, emit(op->b));
      // The same for dot2_bf16: x + dot2_bf16(0, a, b) becomes dot2_bf16(x, a, b),
      // one vdpbf16ps. In float this reassociates (x + p1) + p0 for x + (p1 + p0):
      // the accumulation order of a reduction, which templates tolerate anyway.
      // And for dot2_i16 (exact: wrapping int32 adds associate).
      if (auto* c = zero_acc_dot2(op->b)) return emit_dot2_call(c, emit(op->a));
      if (auto* c = zero_acc_dot2(op->a)) return emit_dot2_call(c, emit(op->b));
    }
    if (op->b.dtype() != t)
      fail(std::string("binary operands of different types: ") + t.str() + " and " +
           op->b.dtype().str());
    Value* a = emit(op->a);
    Value* b = emit(op->b);
    if (t.code == TypeCode::BFloat) {
      // Compute in float32 and round back (comparisons and logic stay bool).
      DataType f = DataType::f32(t.lanes);
      Value* r = emit_binary_values(op, bf16_to_f32(a, t.lanes), bf16_to_f32(b, t.lanes), f);
      return r->getType()->getScalarType()->isFloatTy() ? f32_to_bf16(r, t.lanes) : r;
    }
    return emit_binary_values(op, a, b, t);
  }

  Value* emit_binary_values(const BinaryNode* op, Value* a, Value* b, DataType t) {
    bool fl = t.is_float(), sg = t.is_int();
    bool nsw = sg && t.bits >= 32;  // index arithmetic; narrow ints may wrap on purpose
    switch (op->kind) {
      case ExprKind::Add: return fl ? b_.CreateFAdd(a, b) : b_.CreateAdd(a, b, "", false, nsw);
      case ExprKind::Sub: return fl ? b_.CreateFSub(a, b) : b_.CreateSub(a, b, "", false, nsw);
      case ExprKind::Mul: return fl ? b_.CreateFMul(a, b) : b_.CreateMul(a, b, "", false, nsw);
      case ExprKind::Div:
        return fl ? b_.CreateFDiv(a, b) : sg ? b_.CreateSDiv(a, b) : b_.CreateUDiv(a, b);
      case ExprKind::Mod:
        return fl ? b_.CreateFRem(a, b) : sg ? b_.CreateSRem(a, b) : b_.CreateURem(a, b);
      case ExprKind::FloorDiv:
      case ExprKind::FloorMod: return emit_floor_divmod(op, a, b, t);
      case ExprKind::Min:
      case ExprKind::Max: {
        bool is_min = op->kind == ExprKind::Min;
        Value* c = fl   ? (is_min ? b_.CreateFCmpOLT(a, b) : b_.CreateFCmpOGT(a, b))
                   : sg ? (is_min ? b_.CreateICmpSLT(a, b) : b_.CreateICmpSGT(a, b))
                        : (is_min ? b_.CreateICmpULT(a, b) : b_.CreateICmpUGT(a, b));
        return b_.CreateSelect(c, a, b);
      }
      case ExprKind::And: return b_.CreateAnd(a, b);
      case ExprKind::Or: return b_.CreateOr(a, b);
      default: return emit_compare(op->kind, a, b, t);
    }
  }

  Value* emit_compare(ExprKind k, Value* a, Value* b, DataType t) {
    using P = llvm::CmpInst::Predicate;
    if (t.is_float()) {
      // Ordered, except != which is true for NaN as in C.
      P p = k == ExprKind::EQ   ? P::FCMP_OEQ
            : k == ExprKind::NE ? P::FCMP_UNE
            : k == ExprKind::LT ? P::FCMP_OLT
            : k == ExprKind::LE ? P::FCMP_OLE
            : k == ExprKind::GT ? P::FCMP_OGT
                                : P::FCMP_OGE;
      return b_.CreateFCmp(p, a, b);
    }
    bool sg = t.is_int();
    P p = k == ExprKind::EQ   ? P::ICMP_EQ
          : k == ExprKind::NE ? P::ICMP_NE
          : k == ExprKind::LT ? (sg ? P::ICMP_SLT : P::ICMP_ULT)
          : k == ExprKind::LE ? (sg ? P::ICMP_SLE : P::ICMP_ULE)
          : k == ExprKind::GT ? (sg ? P::ICMP_SGT : P::ICMP_UGT)
                              : (sg ? P::ICMP_SGE : P::ICMP_UGE);
    return b_.CreateICmp(p, a, b);
  }

  // Division rounding toward -inf. Signed: q = a/b, r = a%b (truncating), and
  // when r != 0 has the other sign than b: q -= 1, r += b. A positive power of
  // two divisor becomes a shift / mask.
  Value* emit_floor_divmod(const BinaryNode* op, Value* a, Value* b, DataType t) {
    bool div = op->kind == ExprKind::FloorDiv;
    if (t.is_float()) {
      Value* q = b_.CreateIntrinsic(llvm::Intrinsic::floor, {a->getType()}, {b_.CreateFDiv(a, b)});
      return div ? q : b_.CreateFSub(a, b_.CreateFMul(q, b));
    }
    if (!t.is_int()) return div ? b_.CreateUDiv(a, b) : b_.CreateURem(a, b);
    const int64_t* k = as_const_int(op->b);
    if (k && *k > 0 && (*k & (*k - 1)) == 0) {
      if (div)
        return b_.CreateAShr(a,
                             llvm::ConstantInt::get(a->getType(), std::countr_zero(uint64_t(*k))));
      return b_.CreateAnd(a, llvm::ConstantInt::get(a->getType(), *k - 1));
    }
    Value* q = b_.CreateSDiv(a, b);
    Value* r = b_.CreateSRem(a, b);
    Value* zero = llvm::Constant::getNullValue(a->getType());
    Value* adj = (k && *k > 0) ? b_.CreateICmpSLT(r, zero)
                               : b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                              b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
    if (div) return b_.CreateSub(q, b_.CreateZExt(adj, a->getType()));
    return b_.CreateAdd(r, b_.CreateSelect(adj, b, zero));
  }

  // ---- intrinsics ---------------------------------------------------------------

  // The bytes of one dot4_u8i8 operand given as four byte expressions (lane i of
  // parts[j] is byte 4i+j): <4n x i8>, or <4 x i8> with *splat when every part is
  // scalar (the same bytes for every lane). Four loads of neighbouring bytes of
  // one buffer (scalar, or ramps of stride 4 whose bases differ by 0..3) become
  // one contiguous load; anything else is interleaved with shuffles.
  Value* dot4_bytes(const std::vector<Expr>& parts, int n, bool* splat) {
    bool scalar = true;
    for (auto& p : parts) scalar &= p.dtype().lanes == 1;
    *splat = scalar;
    int len = scalar ? 4 : 4 * n;
    auto* l0 = parts[0].as<LoadNode>();
    if (l0 && l0->predicate) l0 = nullptr;
    const Expr* base0 = nullptr;
    if (l0 && scalar) base0 = &l0->index;
    if (auto* r0 = l0 ? l0->index.as<RampNode>() : nullptr)
      if (r0->lanes == n && is_const_int(r0->stride, 4)) base0 = &r0->base;
    bool adjacent = base0 != nullptr;
    for (int j = 1; j < 4 && adjacent; ++j) {
      auto* lj = parts[j].as<LoadNode>();
      const Expr* bj = nullptr;
      if (lj && lj->buffer == l0->buffer && !lj->predicate) {
        if (scalar) bj = &lj->index;
        if (auto* r = lj->index.as<RampNode>())
          if (r->lanes == n && is_const_int(r->stride, 4)) bj = &r->base;
      }
      adjacent = bj && is_const_int(simplify(*bj - *base0), j);
    }
    if (adjacent) {
      llvm::Type* st = storage_type(l0->buffer->dtype.element_of());
      Value* p = b_.CreateInBoundsGEP(st, buffer_ptr(l0->buffer), emit_index(*base0, i64()));
      return b_.CreateAlignedLoad(vec(i8(), len), p, llvm::Align(1));
    }
    std::vector<Value*> v;
    for (auto& p : parts) {
      Value* x = emit(p);
      if (!scalar && p.dtype().lanes == 1) x = b_.CreateVectorSplat(n, x);
      v.push_back(x);
    }
    if (scalar) {
      Value* out = llvm::PoisonValue::get(vec(i8(), 4));
      for (int j = 0; j < 4; ++j) out = b_.CreateInsertElement(out, v[j], uint64_t(j));
      return out;
    }
    std::vector<int> cat, inter;
    for (int i = 0; i < 2 * n; ++i) cat.push_back(i);
    Value* v01 = b_.CreateShuffleVector(v[0], v[1], cat);
    Value* v23 = b_.CreateShuffleVector(v[2], v[3], cat);
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < 4; ++j) inter.push_back(j < 2 ? j * n + i : 2 * n + (j - 2) * n + i);
    return b_.CreateShuffleVector(v01, v23, inter);
  }

  // dot4_u8i8 (codegen/dot_product.h); acc_override replaces a zero accumulator.
  Value* emit_dot4(const CallNode* op, Value* acc_override = nullptr) {
    int n = op->dtype.lanes;
    Value* acc = acc_override ? acc_override : emit(op->args[0]);
    bool a_splat = false;
    Value *a, *bb;
    if (op->args.size() == 3) {
      a = emit(op->args[1]);
      bb = emit(op->args[2]);
      a_splat = op->args[1].dtype().lanes == 4 && n > 1;
      if (n == 1) a_splat = false;
    } else {
      std::vector<Expr> pa(op->args.begin() + 1, op->args.begin() + 5);
      std::vector<Expr> pb(op->args.begin() + 5, op->args.end());
      a = dot4_bytes(pa, n, &a_splat);
      bool b_splat = false;
      bb = dot4_bytes(pb, n, &b_splat);
      if (b_splat && n > 1)
        bb = b_.CreateBitCast(b_.CreateVectorSplat(n, b_.CreateBitCast(bb, i32())),
                              vec(i8(), 4 * n));
      if (n == 1) a_splat = false;
    }
    return emit_dot4_u8i8(b_, target_, acc, a, a_splat, bb, op->op == Intrinsic::DotU8I8NarrowB);
  }

  // amx_gemm (ir/expr.h; codegen/amx.h): its first three arguments are
  // scalar loads whose addresses it takes; it writes C and yields 0.
  Value* emit_amx_gemm_call(const CallNode* op) {
    auto addr = [&](const Expr& e) {
      auto* l = e.as<LoadNode>();
      llvm::Type* st = storage_type(l->buffer->dtype.element_of());
      return b_.CreateInBoundsGEP(st, buffer_ptr(l->buffer), emit_index(l->index, i64()));
    };
    auto imm = [&](size_t i) { return *as_const_int(op->args[i]); };
    emit_amx_gemm(b_, target_, static_cast<AmxOp>(imm(3)), imm(4), imm(5), imm(6), imm(7), imm(8),
                  addr(op->args[0]), addr(op->args[1]), addr(op->args[2]));
    return b_.getInt32(0);
  }

  // check_index(in_range, value): the run-time index check of the indexing
  // operators (ir/expr.h). The error channel is the kernel's return value,
  // which already carries failures out of parallel loops and which the
  // executor checks after every kernel: the function keeps one i1 "an index
  // was out of range" in an entry-block alloca, ORs every check's failure
  // into it without a branch (a vector check: the OR of its lanes), runs to
  // the end and returns KILN_STATUS_INDEX_OUT_OF_RANGE if it is set
  // (emit_noalias_body). SROA turns the alloca into a register carried
  // through the loops: per index one compare and one OR, no store to memory,
  // no branch, nothing in a kernel without checks. A parallel loop's body
  // has a flag of its own and returns it; kiln_parallel_for returns the
  // first non-zero status of its blocks, and return_if_error passes it on.
  // The read stays in bounds without the flag: the caller clamps value.
  Value* emit_check_index(const CallNode* op) {
    Value* ok = emit(op->args[0]);
    Value* v = emit(op->args[1]);
    Value* bad = b_.CreateNot(ok);
    if (op->args[0].dtype().lanes > 1) bad = b_.CreateOrReduce(bad);
    if (!state_.index_error) {
      llvm::BasicBlock& entry = state_.fn->getEntryBlock();
      llvm::IRBuilder<> eb(&entry, entry.getFirstInsertionPt());
      auto* flag = eb.CreateAlloca(i1(), nullptr, "index_error");
      eb.CreateStore(b_.getFalse(), flag);
      state_.index_error = flag;
    }
    b_.CreateStore(b_.CreateOr(b_.CreateLoad(i1(), state_.index_error), bad), state_.index_error);
    return v;
  }

  Value* emit_call(const CallNode* op) {
    DataType t = op->dtype;
    if (is_dot4_u8i8(op->op)) return emit_dot4(op);
    if (op->op == Intrinsic::DotBF16 || op->op == Intrinsic::DotI16) return emit_dot2_call(op);
    if (op->op == Intrinsic::AmxGemm) return emit_amx_gemm_call(op);
    if (op->op == Intrinsic::ShiftLeft || op->op == Intrinsic::ShiftRight) return emit_shift(op);
    if (op->op == Intrinsic::CheckIndex) return emit_check_index(op);
    if (!t.is_float()) fail(std::string(intrinsic_name(op->op)) + " on " + t.str());
    std::vector<Value*> args;
    for (const Expr& a : op->args) args.push_back(emit(a));
    if (t.bits == 16) {
      // half / bfloat16: compute in float32 and round back.
      DataType f = DataType::f32(t.lanes);
      for (size_t i = 0; i < args.size(); ++i) args[i] = emit_cast(args[i], op->args[i].dtype(), f);
      return emit_cast(emit_math(op->op, args, f), f, t);
    }
    return emit_math(op->op, args, t);
  }

  Value* emit_math(Intrinsic fn, const std::vector<Value*>& args, DataType t) {
    llvm::Type* ty = value_type(t);
    Value* x = args[0];
    auto llvm_intrin = [&](llvm::Intrinsic::ID id) { return b_.CreateIntrinsic(id, {ty}, args); };
    bool f32 = t.bits == 32;
    switch (fn) {
      case Intrinsic::Sqrt: return llvm_intrin(llvm::Intrinsic::sqrt);
      case Intrinsic::Fabs: return llvm_intrin(llvm::Intrinsic::fabs);
      case Intrinsic::Floor: return llvm_intrin(llvm::Intrinsic::floor);
      case Intrinsic::Ceil: return llvm_intrin(llvm::Intrinsic::ceil);
      case Intrinsic::Round: return llvm_intrin(llvm::Intrinsic::round);  // half away from 0
      case Intrinsic::RoundEven: return llvm_intrin(llvm::Intrinsic::roundeven);
      case Intrinsic::DotU8I8: break;         // emit_call handles it
      case Intrinsic::DotU8I8NarrowB: break;  // emit_call handles it
      case Intrinsic::DotBF16: break;         // emit_call handles it
      case Intrinsic::DotI16: break;          // emit_call handles it
      case Intrinsic::AmxGemm: break;         // emit_call handles it
      case Intrinsic::ShiftLeft: break;       // emit_call handles it
      case Intrinsic::ShiftRight: break;      // emit_call handles it
      case Intrinsic::CheckIndex: break;      // emit_call handles it
      case Intrinsic::Pow: return llvm_intrin(llvm::Intrinsic::pow);
      case Intrinsic::Rsqrt:
        return b_.CreateFDiv(llvm::ConstantFP::get(ty, 1.0),
                             b_.CreateIntrinsic(llvm::Intrinsic::sqrt, {ty}, {x}));
      case Intrinsic::Exp: return f32 ? emit_exp_f32(b_, x) : llvm_intrin(llvm::Intrinsic::exp);
      case Intrinsic::Log: return f32 ? emit_log_f32(b_, x) : llvm_intrin(llvm::Intrinsic::log);
      case Intrinsic::Tanh: return f32 ? emit_tanh_f32(b_, x) : libm_per_lane("tanh", x, t);
      case Intrinsic::Erf: return f32 ? emit_erf_f32(b_, x) : libm_per_lane("erf", x, t);
      case Intrinsic::Sin: return f32 ? emit_trig_f32(emit_sin_f32, "sinf", x, t) : libm(fn, x, t);
      case Intrinsic::Cos: return f32 ? emit_trig_f32(emit_cos_f32, "cosf", x, t) : libm(fn, x, t);
      case Intrinsic::Tan: return f32 ? emit_trig_f32(emit_tan_f32, "tanf", x, t) : libm(fn, x, t);
      case Intrinsic::Asin: return f32 ? emit_asin_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Acos: return f32 ? emit_acos_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Atan: return f32 ? emit_atan_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Sinh: return f32 ? emit_sinh_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Cosh: return f32 ? emit_cosh_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Asinh: return f32 ? emit_asinh_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Acosh: return f32 ? emit_acosh_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Atanh: return f32 ? emit_atanh_f32(b_, x) : libm(fn, x, t);
      case Intrinsic::Sigmoid: {
        if (f32) return emit_sigmoid_f32(b_, x);
        Value* e = b_.CreateIntrinsic(llvm::Intrinsic::exp, {ty}, {b_.CreateFNeg(x)});
        llvm::Constant* one = llvm::ConstantFP::get(ty, 1.0);
        return b_.CreateFDiv(one, b_.CreateFAdd(one, e));
      }
    }
    fail("unknown intrinsic");
  }

  // The float64 function of libm's that has the intrinsic's name (sin, asinh, ...).
  Value* libm(Intrinsic fn, Value* x, DataType t) {
    return libm_per_lane(intrinsic_name(fn), x, t);
  }

  // sin, cos or tan on float32: the vector polynomial, except that a vector
  // with a finite lane at or beyond the reduction's limit (the polynomial's
  // reduction by pi/2 loses bits there) branches to libm's float function
  // per lane and takes its value on those lanes. The branch is rarely taken,
  // and the common path stays straight vector code.
  using VectorMathFn = Value* (*)(llvm::IRBuilderBase&, Value*);
  Value* emit_trig_f32(VectorMathFn fast_fn, const char* libm_name, Value* x, DataType t) {
    Value* fast = fast_fn(b_, x);
    llvm::Type* ty = x->getType();
    Value* ax = b_.CreateIntrinsic(llvm::Intrinsic::fabs, {ty}, {x});
    Value* huge = b_.CreateAnd(b_.CreateFCmpOGE(ax, llvm::ConstantFP::get(ty, kTrigReduceLimitF32)),
                               b_.CreateFCmpONE(ax, llvm::ConstantFP::getInfinity(ty)));
    Value* any = t.lanes > 1 ? b_.CreateOrReduce(huge) : huge;
    llvm::BasicBlock* from = b_.GetInsertBlock();
    auto* slow = llvm::BasicBlock::Create(ctx_, "trig.huge", state_.fn);
    auto* done = llvm::BasicBlock::Create(ctx_, "trig.done", state_.fn);
    llvm::MDBuilder md(ctx_);
    b_.CreateCondBr(any, slow, done, md.createBranchWeights(1, 1000));
    b_.SetInsertPoint(slow);
    Value* exact = b_.CreateSelect(huge, libm_per_lane(libm_name, x, t), fast);
    llvm::BasicBlock* slow_end = b_.GetInsertBlock();
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
    llvm::PHINode* r = b_.CreatePHI(ty, 2);
    r->addIncoming(fast, from);
    r->addIncoming(exact, slow_end);
    return r;
  }

  // shl / shr: LLVM's shifts are poison for amounts >= the bit width (and
  // C's undefined), so the amount is clamped into range and out-of-range
  // lanes take the limit value (ir::Intrinsic::ShiftLeft): 0, or for an
  // arithmetic shift right the sign fill (a shift by width - 1).
  Value* emit_shift(const CallNode* op) {
    DataType t = op->dtype;
    Value* x = emit(op->args[0]);
    Value* y = emit(op->args[1]);
    llvm::Type* ty = x->getType();
    Value* width = llvm::ConstantInt::get(ty, t.bits);
    Value* in_range = b_.CreateICmpULT(y, width);
    Value* amount = b_.CreateSelect(in_range, y, llvm::ConstantInt::get(ty, 0));
    if (op->op == Intrinsic::ShiftLeft)
      return b_.CreateSelect(in_range, b_.CreateShl(x, amount), llvm::ConstantInt::get(ty, 0));
    if (t.is_uint())
      return b_.CreateSelect(in_range, b_.CreateLShr(x, amount), llvm::ConstantInt::get(ty, 0));
    Value* fill = b_.CreateAShr(x, llvm::ConstantInt::get(ty, t.bits - 1));
    return b_.CreateSelect(in_range, b_.CreateAShr(x, amount), fill);
  }

  // float64 fallback: one libm call per lane.
  Value* libm_per_lane(const char* name, Value* x, DataType t) {
    llvm::Type* et = value_type(t.element_of());
    auto fn = runtime_fn(name, et, {et});
    if (t.lanes == 1) return b_.CreateCall(fn, {x});
    Value* out = llvm::PoisonValue::get(x->getType());
    for (int i = 0; i < t.lanes; ++i)
      out = b_.CreateInsertElement(out, b_.CreateCall(fn, {b_.CreateExtractElement(x, i)}), i);
    return out;
  }

  const Target& target_;
  llvm::LLVMContext& ctx_;
  llvm::IRBuilder<> b_;
  std::unique_ptr<llvm::Module> module_;
  std::string features_;
  bool avx512_ = false;
  FnState state_;
  int parallel_depth_ = 0;
  int closure_count_ = 0;
};

}  // namespace

std::unique_ptr<llvm::Module> lower_to_llvm(const std::vector<LoweredFunc>& funcs,
                                            const Target& target, llvm::TargetMachine& tm,
                                            llvm::LLVMContext& ctx) {
  return CodeGenLLVM(target, tm, ctx).run(funcs);
}

}  // namespace kiln::codegen::detail
