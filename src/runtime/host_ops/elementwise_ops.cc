// Elementwise host operators, for the arithmetic that follows a run-time
// shaped value (box offsets after NonMaxSuppression, a mask over NonZero's
// coordinates): ONNX broadcasting over this run's shapes.
#include <algorithm>
#include <cmath>

#include "runtime/host_op.h"

namespace kiln::runtime {
namespace {

using Shape = std::vector<int64_t>;

Shape broadcast_all(const HostOpContext& ctx) {
  Shape out;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Shape& s = ctx.required(i).shape;
    Shape merged(std::max(out.size(), s.size()));
    for (size_t d = 0; d < merged.size(); ++d) {
      int64_t a = d < merged.size() - out.size() ? 1 : out[d - (merged.size() - out.size())];
      int64_t b = d < merged.size() - s.size() ? 1 : s[d - (merged.size() - s.size())];
      if (a != b && a != 1 && b != 1)
        ctx.fail("input shapes " + host_shape_str(out) + " and " + host_shape_str(s) +
                 " do not broadcast");
      merged[d] = a == 1 ? b : a;
    }
    out = merged;
  }
  return out;
}

// Element offsets of input `v` for each output index, walked in row-major order.
class BroadcastWalk {
 public:
  BroadcastWalk(const Shape& in, const Shape& out) : out_(out), index_(out.size(), 0) {
    Shape dense = host_strides(in);
    strides_.assign(out.size(), 0);
    size_t lead = out.size() - in.size();
    for (size_t d = 0; d < in.size(); ++d) strides_[lead + d] = in[d] == 1 ? 0 : dense[d];
  }
  int64_t offset() const { return offset_; }
  void next() {
    for (size_t d = out_.size(); d-- > 0;) {
      offset_ += strides_[d];
      if (++index_[d] < out_[d]) return;
      offset_ -= strides_[d] * out_[d];
      index_[d] = 0;
    }
  }

 private:
  const Shape& out_;
  Shape strides_, index_;
  int64_t offset_ = 0;
};

// out = f(a, b) over the broadcast shape, with inputs and output of type T
// (or bool output when Compare).
template <typename R, typename F>
void binary(HostOpContext& ctx, F f) {
  const HostValue &a = ctx.required(0), &b = ctx.required(1);
  if (a.dtype != b.dtype)
    ctx.fail("inputs differ in type: " + a.dtype.str() + ", " + b.dtype.str());
  Shape out = broadcast_all(ctx);
  const int64_t n = host_numel(out);
  dispatch_dtype(ctx, a.dtype, [&](auto t) {
    using T = decltype(t);
    using Out = std::conditional_t<std::is_same_v<R, void>, T, R>;
    Out* dst = ctx.allocate_as<Out>(0, out);
    BroadcastWalk wa(a.shape, out), wb(b.shape, out);
    for (int64_t i = 0; i < n; ++i, wa.next(), wb.next())
      dst[i] = static_cast<Out>(f(a.as<T>()[wa.offset()], b.as<T>()[wb.offset()]));
  });
}

template <typename F>
void unary(HostOpContext& ctx, F f) {
  const HostValue& a = ctx.required(0);
  dispatch_dtype(ctx, a.dtype, [&](auto t) {
    using T = decltype(t);
    T* dst = ctx.allocate_as<T>(0, a.shape);
    const int64_t n = a.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(f(a.as<T>()[i]));
  });
}

void where(HostOpContext& ctx) {
  const HostValue &c = ctx.required(0), &x = ctx.required(1), &y = ctx.required(2);
  if (x.dtype != y.dtype) ctx.fail("X and Y differ in type");
  Shape out = broadcast_all(ctx);
  const int64_t n = host_numel(out), elem = x.dtype.bytes();
  char* dst = static_cast<char*>(ctx.allocate(0, out));
  BroadcastWalk wc(c.shape, out), wx(x.shape, out), wy(y.shape, out);
  for (int64_t i = 0; i < n; ++i, wc.next(), wx.next(), wy.next()) {
    const char* src = c.as<uint8_t>()[wc.offset()] ? x.as<char>() + wx.offset() * elem
                                                   : y.as<char>() + wy.offset() * elem;
    std::copy(src, src + elem, dst + i * elem);
  }
}

// ONNX's Mod: C's fmod where `fmod` (the sign of a), else the sign of b
// (integers only); x mod 0 is 0 like Div's x / 0.
template <typename T>
T modulo(T a, T b, bool fmod) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(std::fmod(a, b));
  } else {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>) {
      if (b == T(-1)) return 0;
      T r = static_cast<T>(a % b);
      if (!fmod && r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    } else {
      return static_cast<T>(a % b);
    }
  }
}

// Integer division truncates toward zero as kiln's kernels do; x / 0 is 0
// and INT_MIN / -1 wraps (README, "integer division").
template <typename T>
T divide(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    if (b == 0) return 0;
    if constexpr (std::is_signed_v<T>)
      if (b == T(-1)) return static_cast<T>(-static_cast<std::make_unsigned_t<T>>(a));
  }
  return static_cast<T>(a / b);
}

}  // namespace

void register_elementwise_host_ops(std::map<std::string, HostOpFn>& t) {
  t["Add"] = [](HostOpContext& c) { binary<void>(c, [](auto a, auto b) { return a + b; }); };
  t["Sub"] = [](HostOpContext& c) { binary<void>(c, [](auto a, auto b) { return a - b; }); };
  t["Mul"] = [](HostOpContext& c) { binary<void>(c, [](auto a, auto b) { return a * b; }); };
  t["Div"] = [](HostOpContext& c) { binary<void>(c, [](auto a, auto b) { return divide(a, b); }); };
  t["Mod"] = [](HostOpContext& c) {
    const bool fmod = c.attr_int("fmod", 0) != 0;
    binary<void>(c, [fmod](auto a, auto b) { return modulo(a, b, fmod); });
  };
  t["Pow"] = [](HostOpContext& c) {
    binary<void>(c, [](auto a, auto b) {
      return static_cast<decltype(a)>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    });
  };
  t["Max"] = [](HostOpContext& c) {
    binary<void>(c, [](auto a, auto b) { return a < b ? b : a; });
  };
  t["Min"] = [](HostOpContext& c) {
    binary<void>(c, [](auto a, auto b) { return b < a ? b : a; });
  };
  t["Equal"] = [](HostOpContext& c) { binary<uint8_t>(c, [](auto a, auto b) { return a == b; }); };
  t["Less"] = [](HostOpContext& c) { binary<uint8_t>(c, [](auto a, auto b) { return a < b; }); };
  t["Greater"] = [](HostOpContext& c) { binary<uint8_t>(c, [](auto a, auto b) { return b < a; }); };
  t["LessOrEqual"] = [](HostOpContext& c) {
    binary<uint8_t>(c, [](auto a, auto b) { return a <= b; });
  };
  t["GreaterOrEqual"] = [](HostOpContext& c) {
    binary<uint8_t>(c, [](auto a, auto b) { return a >= b; });
  };
  t["And"] = [](HostOpContext& c) { binary<uint8_t>(c, [](auto a, auto b) { return a && b; }); };
  t["Or"] = [](HostOpContext& c) { binary<uint8_t>(c, [](auto a, auto b) { return a || b; }); };
  t["Xor"] = [](HostOpContext& c) {
    binary<uint8_t>(c, [](auto a, auto b) { return bool(a) != bool(b); });
  };
  t["Where"] = where;
  t["Neg"] = [](HostOpContext& c) { unary(c, [](auto a) { return -a; }); };
  t["Abs"] = [](HostOpContext& c) { unary(c, [](auto a) { return a < 0 ? -a : a; }); };
  t["Not"] = [](HostOpContext& c) { unary(c, [](auto a) { return !a; }); };
  t["Relu"] = [](HostOpContext& c) { unary(c, [](auto a) { return a < 0 ? decltype(a)(0) : a; }); };
  t["Sigmoid"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return 1.0 / (1.0 + std::exp(-static_cast<double>(a))); });
  };
  t["Exp"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::exp(static_cast<double>(a)); });
  };
  t["Sqrt"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::sqrt(static_cast<double>(a)); });
  };
  t["Sin"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::sin(static_cast<double>(a)); });
  };
  t["Cos"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::cos(static_cast<double>(a)); });
  };
  t["Tanh"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::tanh(static_cast<double>(a)); });
  };
  t["Log"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::log(static_cast<double>(a)); });
  };
  t["Reciprocal"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return 1.0 / static_cast<double>(a); });
  };
  t["Floor"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::floor(static_cast<double>(a)); });
  };
  t["Ceil"] = [](HostOpContext& c) {
    unary(c, [](auto a) { return std::ceil(static_cast<double>(a)); });
  };
}

}  // namespace kiln::runtime
