#pragma once
// The formula of every elementwise unary op, and of the activation derivatives backward uses, once
// for both devices (ops/math/device_math.h). The declarations (codegen/ops/unary.yaml) name a
// functor with `elementwise: Name`; the generated kernels run `Name<T>` in the dtype T the op's
// plan chose, on the CPU's iterator loops and on CUDA's elementwise kernels alike.
//
// A functor is `template <class T> struct Name` with a GRAFT_HOST_DEVICE operator() over element
// values; its parameter and result types say how the iterator reads and writes (elementwise_plan.h).
// Optional members:
//   kTypes                       the dtypes it is instantiated for (default: all four)
//   kCost                        relative cost of an element (4: transcendental; the CPU splits sooner)
//   static Name make(const ScalarArg* p)   builds it from the op's non-tensor arguments, in order
#include "ops/math/device_math.h"
#include "ops/scalar_math.h"
#include "runtime/op_options.h"

namespace graft::math {

// ---- floating unary ops (integer and bool inputs compute in float32) ----

template <class T> struct Exp {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return exp(v); }
};
template <class T> struct Log {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return log(v); }
};
template <class T> struct Sin {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return sin(v); }
};
template <class T> struct Cos {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return cos(v); }
};
template <class T> struct Tanh {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const {
#if !defined(__CUDACC__)
    // The CPU's float tanh goes through one double exp: glibc's tanhf costs ~25 ns an element, exp
    // ~4 ns, and this rounds to the same float as tanh computed in double over the whole range
    // (checked on a 1e-5 grid over [-12, 12] and down to 1e-12). Near 0 the exp form would cancel,
    // so a cubic Taylor term takes over (its next term is below 2^-40 relative there); past 9.1 the
    // result rounds to +-1 anyway. NaN stays NaN through the exp branch.
    if constexpr (std::is_same_v<T, float>) {
      double a = std::fabs(static_cast<double>(v)), r;
      if (a < 1e-4) r = a - a * a * a / 3.0;
      else if (a > 9.1) r = 1.0;
      else r = 1.0 - 2.0 / (std::exp(2.0 * a) + 1.0);
      return static_cast<float>(std::copysign(r, static_cast<double>(v)));
    }
#endif
    return tanh(v);
  }
};
template <class T> struct Sigmoid {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return T(1) / (T(1) + exp(-v)); }
};
template <class T> struct Sqrt {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return sqrt(v); }
};
template <class T> struct Rsqrt {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return T(1) / sqrt(v); }
};
template <class T> struct Log1p {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return log1p(v); }
};
template <class T> struct Expm1 {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return expm1(v); }
};
template <class T> struct Erf {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return erf(v); }
};
template <class T> struct Reciprocal {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return T(1) / v; }
};
// x * sigmoid(x); exp(-x) overflowing to inf gives -0, the limit.
template <class T> struct Silu {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T v) const { return v / (T(1) + exp(-v)); }
};

template <class T> struct Hardswish {  // x * relu6(x + 3) / 6
  static constexpr int kTypes = kFloatingTypes;
  GRAFT_HOST_DEVICE T operator()(T v) const {
    T r = v + T(3);
    r = r < T(0) ? T(0) : (r > T(6) ? T(6) : r);
    return v * r / T(6);
  }
};

// ---- ops that keep the dtype ----

template <class T> struct Neg {  // bool is refused by the plan
  static constexpr int kTypes = kNumberTypes;
  GRAFT_HOST_DEVICE T operator()(T v) const { return -v; }
};
template <class T> struct Relu {  // NaN stays NaN, as torch.relu
  static constexpr int kTypes = kNumberTypes;
  GRAFT_HOST_DEVICE T operator()(T v) const { return v < T(0) ? T(0) : v; }
};
template <class T> struct Abs {
  GRAFT_HOST_DEVICE T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>) return v;
    else return v < T(0) ? -v : v;
  }
};
template <class T> struct Sign {
  GRAFT_HOST_DEVICE T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>) return v;
    else return static_cast<T>((T(0) < v) - (v < T(0)));
  }
};
template <class T> struct LogicalNot {
  GRAFT_HOST_DEVICE bool operator()(T v) const { return v == T(0); }
};

// ---- GELU ----
// none: x * Phi(x), Phi the standard normal CDF.
// tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
inline constexpr double kGeluCubic = 0.044715;
inline constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
inline constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2 pi)

// x * Phi(x) and its derivative, for a value or (the CPU's vectorised loops) a 16-lane vector.
template <class V> GRAFT_LANE_INLINE V gelu_erf(V x) { return x * normal_cdf(x); }
template <class V> GRAFT_LANE_INLINE V gelu_erf_derivative(V x) {
  using E = Elem<V>;
  return normal_cdf(x) + x * (exp_fast(E(-0.5) * x * x) * E(kInvSqrt2Pi));
}

template <class T> struct Gelu {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  bool tanh_approx = false;
  static GRAFT_HOST_DEVICE Gelu make(const ScalarArg* p) { return {p[0].i == int64_t(GeluApproximate::Tanh)}; }
  GRAFT_HOST_DEVICE T operator()(T x) const {
    if (tanh_approx) {
      T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      return T(0.5) * x * (T(1) + tanh(inner));
    }
    return gelu_erf(x);
  }
};
// grad * d gelu(x) / dx
template <class T> struct GeluBackward {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  bool tanh_approx = false;
  static GRAFT_HOST_DEVICE GeluBackward make(const ScalarArg* p) {
    return {p[0].i == int64_t(GeluApproximate::Tanh)};
  }
  GRAFT_HOST_DEVICE T operator()(T g, T x) const {
    if (tanh_approx) {
      T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
      T t = tanh(inner);
      T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
      return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);
    }
    return g * gelu_erf_derivative(x);
  }
};

// ---- pow(x, exponent) for a Scalar exponent ----
// The common exponents avoid pow: exact and several times faster. The choice is made once, when the
// functor is built, so every element takes the same branch. Integers: int_pow (the plan refuses
// negative integer exponents).
template <class T> struct PowScalar {
  static constexpr int kTypes = kNumberTypes, kCost = 4;
  enum Form : int8_t { General, Identity, One, Square, Cube, Root, Inverse, InverseRoot };
  T e;
  int64_t ie;
  Form form;
  static GRAFT_HOST_DEVICE PowScalar make(const ScalarArg* p) {
    double e = p[0].f;
    Form f = e == 1 ? Identity : e == 0 ? One : e == 2 ? Square : e == 3 ? Cube : e == 0.5 ? Root
             : e == -1 ? Inverse : e == -0.5 ? InverseRoot : General;
    return {scalar_as<T>(p[0]), p[0].i, f};
  }
  GRAFT_HOST_DEVICE T operator()(T v) const {
    if constexpr (!std::is_floating_point_v<T>) {
      return scalar_math::int_pow(v, ie);
    } else {
      switch (form) {
        case Identity: return v;
        case One: return T(1);
        case Square: return v * v;
        case Cube: return v * v * v;
        case Root: return sqrt(v);
        case Inverse: return T(1) / v;
        case InverseRoot: return T(1) / sqrt(v);
        default: return pow(v, e);
      }
    }
  }
};

// ---- the other activation derivatives (first order; rules use them when no graph is built) ----

template <class T> struct ThresholdBackward {  // grad where x > threshold (relu's backward)
  T threshold;
  static GRAFT_HOST_DEVICE ThresholdBackward make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T g, T x) const { return x <= threshold ? T(0) : g; }
};
template <class T> struct SigmoidBackward {  // grad * y (1 - y)
  static constexpr int kTypes = kFloatingTypes;
  GRAFT_HOST_DEVICE T operator()(T g, T y) const { return g * (T(1) - y) * y; }
};
template <class T> struct TanhBackward {  // grad * (1 - y^2)
  static constexpr int kTypes = kFloatingTypes;
  GRAFT_HOST_DEVICE T operator()(T g, T y) const { return g * (T(1) - y * y); }
};

}  // namespace graft::math
