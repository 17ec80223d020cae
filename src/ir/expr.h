// Expressions of kiln's IR: immutable, shared nodes behind the `Expr` handle.
//
// The same node types serve the tensor-expression level (TensorRead, Reduce)
// and the loop IR (Load, Ramp, Broadcast). Variables compare by identity: two
// `Var`s with the same name are different variables.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln::ir {

enum class ExprKind : uint8_t {
  IntImm,
  FloatImm,
  Var,
  Add,
  Sub,
  Mul,
  Div,
  Mod,
  FloorDiv,
  FloorMod,
  Min,
  Max,
  EQ,
  NE,
  LT,
  LE,
  GT,
  GE,
  And,
  Or,
  Not,
  Select,
  Cast,
  Call,
  Let,
  Load,
  Ramp,
  Broadcast,  // loop IR
  TensorRead,
  Reduce,  // tensor expressions
};

struct ExprNode {
  ExprKind kind;
  DataType dtype;
  ExprNode(ExprKind k, DataType t) : kind(k), dtype(t) {}
  virtual ~ExprNode() = default;
};

struct VarNode;
class Var;

// Handle to an immutable expression node. Null handles are allowed (optional
// parts of a node) and test false.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> n) : node_(std::move(n)) {}
  // Integer literals become int64 (the index type), float literals float32.
  Expr(int v);      // NOLINT(google-explicit-constructor)
  Expr(int64_t v);  // NOLINT(google-explicit-constructor)
  Expr(float v);    // NOLINT(google-explicit-constructor)
  Expr(double v);   // NOLINT(google-explicit-constructor)

  const ExprNode* get() const { return node_.get(); }
  const ExprNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  ExprKind kind() const { return node_->kind; }
  DataType dtype() const { return node_->dtype; }
  bool same_as(const Expr& o) const { return node_ == o.node_; }

  template <typename T>
  const T* as() const {
    return node_ && node_->kind == T::kKind ? static_cast<const T*>(node_.get()) : nullptr;
  }

 private:
  std::shared_ptr<const ExprNode> node_;
};

template <typename T, typename... Args>
Expr make_expr(Args&&... args) {
  return Expr(std::make_shared<const T>(std::forward<Args>(args)...));
}

// ---- leaves -----------------------------------------------------------------

struct IntImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::IntImm;
  int64_t value;
  IntImmNode(DataType t, int64_t v) : ExprNode(kKind, t), value(v) {}
};

struct FloatImmNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::FloatImm;
  double value;
  FloatImmNode(DataType t, double v) : ExprNode(kKind, t), value(v) {}
};

struct VarNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Var;
  std::string name;
  VarNode(std::string n, DataType t) : ExprNode(kKind, t), name(std::move(n)) {}
};

// A variable handle; converts to Expr. Default type is int64, the index type.
class Var {
 public:
  Var() = default;
  explicit Var(std::string name, DataType t = DataType::i64());
  explicit Var(std::shared_ptr<const VarNode> n) : node_(std::move(n)) {}
  operator Expr() const { return Expr(node_); }  // NOLINT(google-explicit-constructor)
  const VarNode* get() const { return node_.get(); }
  const VarNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  const std::string& name() const { return node_->name; }
  DataType dtype() const { return node_->dtype; }
  bool same_as(const Var& o) const { return node_ == o.node_; }
  bool operator==(const Var& o) const { return node_ == o.node_; }
  bool operator<(const Var& o) const { return node_ < o.node_; }

 private:
  std::shared_ptr<const VarNode> node_;
};

struct VarHash {
  size_t operator()(const Var& v) const { return std::hash<const void*>()(v.get()); }
};

// ---- arithmetic, comparison, logic ------------------------------------------

// All binary nodes share this layout; `kind` tells which operation it is.
// Div and Mod truncate toward zero on integers (C semantics); FloorDiv and
// FloorMod round toward negative infinity and are what index math uses.
struct BinaryNode : ExprNode {
  Expr a, b;
  BinaryNode(ExprKind k, DataType t, Expr x, Expr y)
      : ExprNode(k, t), a(std::move(x)), b(std::move(y)) {}
};

template <ExprKind K>
struct BinaryOf : BinaryNode {
  static constexpr ExprKind kKind = K;
  BinaryOf(DataType t, Expr x, Expr y) : BinaryNode(K, t, std::move(x), std::move(y)) {}
};
using AddNode = BinaryOf<ExprKind::Add>;
using SubNode = BinaryOf<ExprKind::Sub>;
using MulNode = BinaryOf<ExprKind::Mul>;
using DivNode = BinaryOf<ExprKind::Div>;
using ModNode = BinaryOf<ExprKind::Mod>;
using FloorDivNode = BinaryOf<ExprKind::FloorDiv>;
using FloorModNode = BinaryOf<ExprKind::FloorMod>;
using MinNode = BinaryOf<ExprKind::Min>;
using MaxNode = BinaryOf<ExprKind::Max>;
using EQNode = BinaryOf<ExprKind::EQ>;
using NENode = BinaryOf<ExprKind::NE>;
using LTNode = BinaryOf<ExprKind::LT>;
using LENode = BinaryOf<ExprKind::LE>;
using GTNode = BinaryOf<ExprKind::GT>;
using GENode = BinaryOf<ExprKind::GE>;
using AndNode = BinaryOf<ExprKind::And>;
using OrNode = BinaryOf<ExprKind::Or>;

bool is_binary(ExprKind k);
bool is_comparison(ExprKind k);

struct NotNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Not;
  Expr a;
  explicit NotNode(Expr x);
};

struct SelectNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Select;
  Expr cond, true_value, false_value;
  SelectNode(Expr c, Expr t, Expr f);
};

struct CastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Cast;
  Expr value;
  CastNode(DataType t, Expr v) : ExprNode(kKind, t), value(std::move(v)) {}
};

// Pure math functions. Codegen emits each as vector code where lanes > 1.
enum class Intrinsic : uint8_t {
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Erf,
  Sigmoid,
  Fabs,
  Pow,
  Floor,
  Ceil,
  Round,      // half away from zero (C's round)
  RoundEven,  // half to even (IEEE's default rounding; ONNX QuantizeLinear's)
  // Trigonometric and hyperbolic functions and their inverses (C's sin, asin,
  // sinh, asinh, ...): NaN outside the domain, as in C.
  Sin,
  Cos,
  Tan,
  Asin,
  Acos,
  Atan,
  Sinh,
  Cosh,
  Asinh,
  Acosh,
  Atanh,
  // Integer shifts shl(x, y) and shr(x, y), x and y of one integer type:
  // x * 2^y wrapped and floor(x / 2^y) (logical for unsigned x, arithmetic
  // for signed). Defined for every y: where y >= the bit width (or, read as
  // unsigned, negative) shl gives 0 and shr 0 (or -1 for negative signed x),
  // the limits of shifting one bit at a time, where C and LLVM leave it
  // undefined.
  ShiftLeft,
  ShiftRight,
  // The 4-way u8 x s8 dot product accumulate (x86 vpdpbusd, Arm usdot/sdot):
  //   r[i] = acc[i] + sum_{j<4} int32(a[4i+j]) * int32(b[4i+j])      (wrapping int32)
  // with a unsigned 8-bit and b signed 8-bit. Result int32xN. Two argument forms:
  //   dot4_u8i8(acc, a, b): acc int32xN (or a scalar: broadcast), a uint8x(4N) or
  //     uint8x4 (the same four bytes for every lane), b int8x(4N);
  //   dot4_u8i8(acc, a0, a1, a2, a3, b0, b1, b2, b3): byte j of lane i is aj[i] / bj[i];
  //     each argument has N lanes or one (the same for every lane). This is the form a
  //     tensor expression writes with scalar reads (templates), and the one the
  //     vectorizer keeps: codegen turns four loads of neighbouring bytes back into one.
  // Codegen picks the instruction from the target's features (codegen_llvm.cc); the
  // definition above is what the simplifier folds and what every lowering must equal
  // bit for bit.
  DotU8I8,
  // DotU8I8 with a promise about b (the weights): every byte of b is in [-64, 64]
  // (7-bit weights, `kiln quantize --reduce-range`). Same arguments, same value
  // where the promise holds; outside it the result is unspecified. Targets with a
  // dot instruction lower it as DotU8I8; x86 without one (AVX2, AVX-512BW without
  // VNNI) as pmaddwd(pmaddubsw(a, b), 1) + acc, which is exact only under the
  // promise: pmaddubsw saturates its int16 pair sums, and 2 * 255 * 64 = 32640
  // is the largest that stays below 32767 (codegen/dot_product.h). A sibling of
  // DotU8I8 rather than a flag on it, so that every DotU8I8 keeps its lowering.
  DotU8I8NarrowB,
  // The bf16 pair dot product accumulate (x86 vdpbf16ps):
  //   r[i] = (acc[i] + float(a[2i+1]) * float(b[2i+1])) + float(a[2i]) * float(b[2i])
  // acc float32xN (or a scalar: broadcast), a and b bfloat16x(2N); result float32xN.
  // A second form, dot2_bf16(acc, a0, a1, b0, b1), gives element j of lane i as
  // aj[i] / bj[i] (each N lanes or one, broadcast): the form a tensor expression
  // writes with scalar reads and the vectorizer keeps (codegen interleaves).
  // Each product of two bf16 values is exact in float32, so each step is one
  // float32 rounding (round to nearest even); the odd element is added first, as
  // the instruction does. Denormal inputs/results are flushed by the instruction
  // and not by the generic lowering: templates tolerate that difference.
  DotBF16,
  // The int16 pair dot product accumulate (x86 pmaddwd + add, vpdpwssd with VNNI):
  //   r[i] = acc[i] + int32(a[2i]) * int32(b[2i]) + int32(a[2i+1]) * int32(b[2i+1])
  // (wrapping int32), a and b int16. The same two forms as DotBF16:
  // dot2_i16(acc, a, b) with acc int32xN (or a scalar), a and b int16x(2N), and
  // dot2_i16(acc, a0, a1, b0, b1), element j of lane i being aj[i] / bj[i]. The
  // GEMM of integer Winograd (ops/winograd_conv2d_int8.h) multiplies its
  // transformed tiles, which outgrow 8 bits, with it. pmaddwd's one inexact
  // case (both pairs -32768 * -32768 = 2^31) wraps to -2^31, as the definition does.
  DotI16,
  // A whole tile GEMM on x86 AMX (Advanced Matrix Extensions), a statement:
  // Evaluate(amx_gemm(...)) (see amx_gemm() below; result int32 0, never a value
  // anything reads). The only intrinsic with side effects: it writes C. Its
  // first three arguments are Loads whose *addresses* it takes (the first
  // element of C, A and packed B); the others are immediates. Codegen lowers it
  // with tile instructions where the target has amx-int8 / amx-bf16, and
  // otherwise with the same loops over tiles emulated in memory
  // (codegen/amx.h), which is how machines without AMX test its indexing.
  AmxGemm,
  // check_index(in_range, value): value, and where in_range is false (on any
  // lane) the kernel reports an index out of range: it runs to the end and
  // returns KILN_STATUS_INDEX_OUT_OF_RANGE (runtime/c_runtime_api.h), which
  // the executor turns into an error naming the kernel. The run-time range
  // check of the indexing operators (Gather, GatherElements, GatherND, the
  // scatters; graph/ops/op_util.h's checked_run_time_index): value is the
  // index itself, clamped after the call so that the read stays in bounds
  // whatever the flag says. The only side effect is that flag (idempotent:
  // a copy of the call, or a call in an unselected branch, reports the same
  // kind of thing, never writes memory); code generation keeps it in a
  // register of the kernel's function (codegen_llvm.cc).
  CheckIndex,
};
const char* intrinsic_name(Intrinsic op);
// Sin through Atanh: the trigonometric and hyperbolic functions and inverses.
bool is_transcendental_trig(Intrinsic op);

struct CallNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Call;
  Intrinsic op;
  std::vector<Expr> args;
  CallNode(DataType t, Intrinsic o, std::vector<Expr> a)
      : ExprNode(kKind, t), op(o), args(std::move(a)) {}
};

struct LetNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Let;
  Var var;
  Expr value, body;
  LetNode(Var v, Expr val, Expr b)
      : ExprNode(kKind, b.dtype()), var(std::move(v)), value(std::move(val)), body(std::move(b)) {}
};

// ---- loop IR: buffers, loads, vectors -----------------------------------------

enum class MemScope : uint8_t { Global, Local };

// The largest Local buffer codegen places on a worker's stack; larger or
// dynamically sized ones go to the workspace allocator. Templates whose
// accumulators live in a Local buffer (conv2d's row buffer, dense's task
// buffer) reject configs beyond it, so such buffers stay on the stack where
// LLVM can promote them to registers.
constexpr int64_t kMaxLocalStackBytes = 256 * 1024;

// A flat array of elements. Kernel arguments and allocations are buffers;
// identity (the node pointer) names the memory.
struct BufferNode {
  std::string name;
  DataType dtype;           // element type (scalar)
  std::vector<Expr> shape;  // logical shape, row-major; informational after flattening
  MemScope scope = MemScope::Global;
};
using Buffer = std::shared_ptr<const BufferNode>;
Buffer make_buffer(std::string name, DataType dtype, std::vector<Expr> shape,
                   MemScope scope = MemScope::Global);

// Reads buffer[index]; a vector index (a Ramp or any vector int) reads lanes.
// A predicate (a bool vector of the index's lanes; null: every lane) reads
// only the lanes where it holds, the others are 0 and touch no memory: the
// vectorizer's partial vectors (schedule/vectorize_loops.cc).
struct LoadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Load;
  Buffer buffer;
  Expr index;
  Expr predicate;
  LoadNode(Buffer buf, Expr idx, Expr pred = Expr());
};

// The vector base, base + stride, ..., base + (lanes-1) * stride.
struct RampNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Ramp;
  Expr base, stride;
  int lanes;
  RampNode(Expr b, Expr s, int l);
};

struct BroadcastNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Broadcast;
  Expr value;
  int lanes;
  BroadcastNode(Expr v, int l)
      : ExprNode(kKind, v.dtype().with_lanes(l)), value(std::move(v)), lanes(l) {}
};

// ---- tensor expressions -------------------------------------------------------

struct Range {
  Expr min, extent;
};

enum class IterKind : uint8_t { DataPar, Reduce };

// A named iteration variable with its domain; axes of compute definitions and
// the loops a schedule derives from them.
struct IterVarNode {
  Var var;
  Range dom;
  IterKind kind = IterKind::DataPar;
};
using IterVar = std::shared_ptr<const IterVarNode>;
IterVar make_iter_var(Range dom, const std::string& name, IterKind kind = IterKind::DataPar);

struct TensorNode;
using Tensor = std::shared_ptr<const TensorNode>;

// Reads tensor[indices...] inside a compute definition.
struct TensorReadNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::TensorRead;
  Tensor tensor;
  std::vector<Expr> indices;
  TensorReadNode(Tensor t, std::vector<Expr> idx);
};

enum class ReduceOp : uint8_t { Sum, Max, Min, Prod };

// combiner over `axes` of `source`, starting from `identity`. Only valid as the
// whole body of a compute definition.
struct ReduceNode : ExprNode {
  static constexpr ExprKind kKind = ExprKind::Reduce;
  ReduceOp op;
  Expr source;
  std::vector<IterVar> axes;
  Expr identity;
  ReduceNode(ReduceOp o, Expr src, std::vector<IterVar> ax, Expr id)
      : ExprNode(kKind, src.dtype()),
        op(o),
        source(std::move(src)),
        axes(std::move(ax)),
        identity(std::move(id)) {}
};

// ---- constructors with type rules -------------------------------------------

Expr make_const(DataType t, double value);  // int or float immediate of type t
Expr make_int(int64_t v, DataType t = DataType::i64());
Expr make_float(double v, DataType t = DataType::f32());
Expr make_bool(bool v);
Expr cast(DataType t, Expr v);
// Binary op of kind k; an immediate operand is converted to the other side's
// type, a scalar operand is broadcast to the other side's lanes.
Expr make_binary(ExprKind k, Expr a, Expr b);
Expr select(Expr cond, Expr t, Expr f);
Expr call(Intrinsic op, std::vector<Expr> args);
Expr ramp(Expr base, Expr stride, int lanes);
Expr broadcast(Expr value, int lanes);
Expr load(Buffer buf, Expr index, Expr predicate = Expr());

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);  // float division, or truncating integer division
Expr operator%(Expr a, Expr b);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
// Logical operators are named functions, not && || !: overloading those on a
// handle that also tests for null in `if (!e)` invites silent mistakes.
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);
Expr logical_not(Expr a);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr floordiv(Expr a, Expr b);
Expr floormod(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);

Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr rsqrt(Expr x);
Expr tanh(Expr x);
Expr erf(Expr x);
Expr sigmoid(Expr x);
Expr fabs(Expr x);
Expr pow(Expr x, Expr y);
Expr floor(Expr x);
Expr ceil(Expr x);
Expr round(Expr x);
Expr round_even(Expr x);
Expr sin(Expr x);
Expr cos(Expr x);
Expr tan(Expr x);
Expr asin(Expr x);
Expr acos(Expr x);
Expr atan(Expr x);
Expr sinh(Expr x);
Expr cosh(Expr x);
Expr asinh(Expr x);
Expr acosh(Expr x);
Expr atanh(Expr x);
// Intrinsic::ShiftLeft / ShiftRight; operands are unified like a binary op's and
// must be integers.
Expr shift_left(Expr x, Expr y);
Expr shift_right(Expr x, Expr y);
// Intrinsic::CheckIndex: value (any type), reporting a run-time index out of
// range where in_range (bool, scalar or value's lanes) is false.
Expr check_index(Expr in_range, Expr value);
// Intrinsic::DotU8I8 in its two forms (see there); throw std::invalid_argument on types
// or lanes that do not fit.
Expr dot4_u8i8(Expr acc, Expr a, Expr b);
Expr dot4_u8i8(Expr acc, const std::vector<Expr>& a4, const std::vector<Expr>& b4);
// Intrinsic::DotU8I8NarrowB in the same two forms (the caller promises b in [-64, 64]).
Expr dot4_u8i8_narrow_b(Expr acc, Expr a, Expr b);
Expr dot4_u8i8_narrow_b(Expr acc, const std::vector<Expr>& a4, const std::vector<Expr>& b4);
// Whether op is DotU8I8 or DotU8I8NarrowB (the two share arguments and value).
bool is_dot4_u8i8(Intrinsic op);
// The bound of DotU8I8NarrowB's b bytes: |b| <= 64.
constexpr int kDot4NarrowBMax = 64;
// The scalar definition of DotU8I8: acc + sum_j a[j] * b[j], wrapping in int32.
int32_t dot4_u8i8_value(int32_t acc, const uint8_t a[4], const int8_t b[4]);
// Intrinsic::DotBF16; throws std::invalid_argument on types or lanes that do not fit.
Expr dot2_bf16(Expr acc, Expr a, Expr b);
Expr dot2_bf16(Expr acc, Expr a0, Expr a1, Expr b0, Expr b1);
// The scalar definition of DotBF16 on bf16 bit patterns (generic lowering, bit for bit).
float dot2_bf16_value(float acc, const uint16_t a[2], const uint16_t b[2]);
// Intrinsic::DotI16 in its two forms; throws std::invalid_argument on types or lanes
// that do not fit.
Expr dot2_i16(Expr acc, Expr a, Expr b);
Expr dot2_i16(Expr acc, Expr a0, Expr a1, Expr b0, Expr b1);
// The scalar definition of DotI16: acc + a[0] b[0] + a[1] b[1], wrapping in int32.
int32_t dot2_i16_value(int32_t acc, const int16_t a[2], const int16_t b[2]);
// bfloat16 bits <-> float32: widening is exact; narrowing rounds to nearest even
// (a NaN becomes the quiet NaN 0x7fc0), as codegen's cast to bfloat16 does.
float bf16_to_f32_value(uint16_t h);
uint16_t f32_to_bf16_value(float x);

// Intrinsic::AmxGemm: C[rows, N] = A[rows, K] x B[K, N], C overwritten (not
// accumulated), in panels of 16 rows with tiles configured once per call:
//   C[c0 + r * ldc + n] = sum_{k < K} A[a0 + r * lda + k] * B(k, n)
// where B is packed in blocks of 16 columns, k in groups of g:
//   B(k, n) = B[b0 + ((n / 16) * ceil(K / g) + k / g) * 16 * g + (n % 16) * g + k % g]
// (zero past N), which is dense_int8.x86's packing with bn = 16 and, per block,
// the "VNNI" layout the tile instructions want (K/g rows of 64 bytes).
//   AmxOp::DpbusdU8I8: A uint8, B int8, C int32, g = 4, exact (wrapping int32);
//   AmxOp::Dpbf16ps: A and B bfloat16, C float32, g = 2 (tdpbf16ps's order and
//     rounding: per pair, the even product is added first, then the odd one).
// K must be a multiple of g (tile rows are whole groups; the template pads).
// c, a, b: scalar Loads of C, A and B. Throws std::invalid_argument on types
// or sizes that do not fit (rows, N, K >= 1, lda >= K, ldc >= N).
enum class AmxOp : uint8_t { DpbusdU8I8 = 0, Dpbf16ps = 1 };
Expr amx_gemm(AmxOp op, Expr c, Expr a, Expr b, int64_t rows, int64_t n, int64_t k, int64_t lda,
              int64_t ldc);

// The value of an integer immediate (also a broadcast of one), or nullptr.
const int64_t* as_const_int(const Expr& e);
bool is_const_int(const Expr& e, int64_t value);
bool is_zero(const Expr& e);
bool is_one(const Expr& e);

// The largest / smallest finite value of t and the identity of a reduction.
Expr max_value(DataType t);
Expr min_value(DataType t);
Expr reduce_identity(ReduceOp op, DataType t);

}  // namespace kiln::ir
