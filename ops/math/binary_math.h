#pragma once
// The formula of every elementwise binary and ternary op, once for both devices (the functor
// protocol is unary_math.h's). Tensor-scalar forms (`add.Scalar`, `gt.Scalar`) are the same
// formula with the scalar bound as the second operand (ScalarForm).
#include "ops/math/device_math.h"
#include "ops/scalar_math.h"

namespace graft::math {

// NaN wins, as torch.maximum / torch.minimum.
template <class T> GRAFT_HOST_DEVICE inline T max_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? b : a;
}
template <class T> GRAFT_HOST_DEVICE inline T min_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b < a ? b : a;
}

// ---- arithmetic (computed in the promoted dtype) ----

template <class T> struct Add {  // a + alpha * b; bool: a || (alpha && b)
  T alpha;
  static GRAFT_HOST_DEVICE Add make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || (alpha && b);
    else return a + alpha * b;
  }
};
template <class T> struct Sub {  // a - alpha * b
  static constexpr int kTypes = kNumberTypes;
  T alpha;
  static GRAFT_HOST_DEVICE Sub make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a, T b) const { return a - alpha * b; }
};
template <class T> struct Mul {
  GRAFT_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else return a * b;
  }
};
template <class T> struct Div {  // true division: integers were promoted to float32 by the plan
  static constexpr int kTypes = kFloatingTypes;
  GRAFT_HOST_DEVICE T operator()(T a, T b) const { return a / b; }
};
template <class T> struct Pow {
  static constexpr int kTypes = kNumberTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T a, T b) const {
    if constexpr (std::is_floating_point_v<T>) return pow(a, b);
    else return scalar_math::int_pow_signed(a, b);
  }
};
template <class T> struct Maximum {
  GRAFT_HOST_DEVICE T operator()(T a, T b) const { return max_nan(a, b); }
};
template <class T> struct Minimum {
  GRAFT_HOST_DEVICE T operator()(T a, T b) const { return min_nan(a, b); }
};
// log(exp(a) + exp(b)) without overflow: max + log1p(exp(-|a - b|)); equal infinities give that
// infinity (not NaN), as torch.logaddexp.
template <class T> struct Logaddexp {
  static constexpr int kTypes = kFloatingTypes, kCost = 4;
  GRAFT_HOST_DEVICE T operator()(T a, T b) const {
    if (a == b && (a - a) != (a - a)) return a;  // both +inf or both -inf
    T m = a < b ? b : a;
    T d = a < b ? a - b : b - a;
    if (d != d) return d + m;  // a NaN operand
    return m + log1p(exp(d));
  }
};
// The reverse forms with a Scalar: s - a, s / a.
template <class T> struct Rsub {
  static constexpr int kTypes = kNumberTypes;
  T s;
  static GRAFT_HOST_DEVICE Rsub make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a) const { return s - a; }
};
template <class T> struct Rdiv {
  static constexpr int kTypes = kFloatingTypes;
  T s;
  static GRAFT_HOST_DEVICE Rdiv make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a) const { return s / a; }
};

// ---- comparisons and logical ops: bool results, compared in the promoted dtype ----

template <class T> struct Gt { GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a > b; } };
template <class T> struct Lt { GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a < b; } };
template <class T> struct Ge { GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a >= b; } };
template <class T> struct Le { GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a <= b; } };
template <class T> struct Eq { GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a == b; } };
template <class T> struct Ne { GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a != b; } };
template <class T> struct LogicalAnd {
  GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a != T(0) && b != T(0); }
};
template <class T> struct LogicalOr {
  GRAFT_HOST_DEVICE bool operator()(T a, T b) const { return a != T(0) || b != T(0); }
};

// ---- tensor-scalar forms: F(a, s) with s the op's Scalar, converted once to T ----
// The binary functors without arguments bound to a scalar second operand.
#define GRAFT_SCALAR_FORM(Name, F)                                                        \
  template <class T> struct Name {                                                        \
    static constexpr int kTypes = functor_types<F>();                                     \
    T s;                                                                                  \
    static GRAFT_HOST_DEVICE Name make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; } \
    GRAFT_HOST_DEVICE auto operator()(T a) const { return F<T>{}(a, s); }                 \
  };
GRAFT_SCALAR_FORM(MulScalar, Mul)
GRAFT_SCALAR_FORM(DivScalar, Div)
GRAFT_SCALAR_FORM(GtScalar, Gt)
GRAFT_SCALAR_FORM(LtScalar, Lt)
GRAFT_SCALAR_FORM(GeScalar, Ge)
GRAFT_SCALAR_FORM(LeScalar, Le)
GRAFT_SCALAR_FORM(EqScalar, Eq)
GRAFT_SCALAR_FORM(NeScalar, Ne)
#undef GRAFT_SCALAR_FORM
// a + s and a - s (alpha is 1 in the Scalar forms).
template <class T> struct AddScalar {
  T s;
  static GRAFT_HOST_DEVICE AddScalar make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a) const {
    if constexpr (std::is_same_v<T, bool>) return a || s;
    else return a + s;
  }
};
template <class T> struct SubScalar {
  static constexpr int kTypes = kNumberTypes;
  T s;
  static GRAFT_HOST_DEVICE SubScalar make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a) const { return a - s; }
};

// ---- clamp: min(max(x, lo), hi); NaN stays NaN, and lo > hi gives hi everywhere ----
template <class T> struct Clamp {
  static constexpr int kTypes = kNumberTypes;
  T lo, hi;
  bool has_lo, has_hi;
  static GRAFT_HOST_DEVICE Clamp make(const ScalarArg* p) {
    return {scalar_as<T>(p[0]), scalar_as<T>(p[1]), p[0].present, p[1].present};
  }
  GRAFT_HOST_DEVICE T operator()(T v) const {
    T m = has_lo && v < lo ? lo : v;
    return has_hi && m > hi ? hi : m;
  }
};

// ---- selection ----
template <class T> struct Where {
  GRAFT_HOST_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};
// dropout's product: (a * keep) * scale, in that order, so keep = 1 gives a * scale exactly (the
// old a * (keep * scale) with keep * scale rounded in the dtype is the same number).
template <class T> struct MaskedScale {
  static constexpr int kTypes = kFloatingTypes;
  T scale;
  static GRAFT_HOST_DEVICE MaskedScale make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a, T keep) const { return a * keep * scale; }
};
// relu's backward from a bool mask: g where keep, else 0 (threshold_backward(g, x, 0) with keep = x > 0).
template <class T> struct KeepWhere {
  static constexpr int kTypes = kFloatingTypes;
  GRAFT_HOST_DEVICE T operator()(T g, bool keep) const { return keep ? g : T(0); }
};
template <class T> struct MaskedFill {
  T value;
  static GRAFT_HOST_DEVICE MaskedFill make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T a, bool m) const { return m ? value : a; }
};

// ---- the optimizers' in-place updates ----
template <class T> struct Addcmul {  // self + value * t1 * t2
  static constexpr int kTypes = kNumberTypes;
  T value;
  static GRAFT_HOST_DEVICE Addcmul make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T s, T a, T b) const { return s + value * a * b; }
};
template <class T> struct Addcdiv {  // self + value * t1 / t2
  static constexpr int kTypes = kFloatingTypes;
  T value;
  static GRAFT_HOST_DEVICE Addcdiv make(const ScalarArg* p) { return {scalar_as<T>(p[0])}; }
  GRAFT_HOST_DEVICE T operator()(T s, T a, T b) const { return s + value * a / b; }
};
// self + w (end - self), interpolating from the nearer end so lerp is exact at w = 0 and w = 1.
template <class T> struct Lerp {
  static constexpr int kTypes = kFloatingTypes;
  T w;
  bool near;
  static GRAFT_HOST_DEVICE Lerp make(const ScalarArg* p) {
    T w = scalar_as<T>(p[0]);
    return {w, (w < T(0) ? -w : w) < T(0.5)};
  }
  GRAFT_HOST_DEVICE T operator()(T s, T e) const { return near ? s + w * (e - s) : e - (e - s) * (T(1) - w); }
};

}  // namespace graft::math
