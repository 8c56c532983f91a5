#pragma once
// What every formula both devices evaluate is written in: GRAFT_HOST_DEVICE, the math functions by
// overload (float math in float, as PyTorch on CUDA; double in double), the normal CDF, and
// ScalarArg, the non-tensor argument of an elementwise op as plain data.
//
// Invariants:
// 1. g++ compiles this for the CPU kernels and nvcc for the CUDA ones, from this one text: a device
//    cannot get another formula by compiling another copy (there is none).
// 2. Where the devices evaluate a function differently (the CPU's vectorisable float erfc, CUDA's
//    libdevice erfcf), it is the same function to within its documented error, chosen here under
//    __CUDA_ARCH__ and nowhere else.
// 3. No graft type but the plain 16-bit floats (runtime/half_types.h, device-safe) and no
//    allocation: device code may call anything in this file.
// 4. Functors are instantiated for compute types only (float, double, int64_t, bool). A 16-bit
//    float tensor runs F<float> and an int32/uint8 one F<int64_t> (opmath_t): the loop converts
//    each element once on load and once on store, so a formula of several steps rounds once, as
//    PyTorch's opmath, and integer results wrap to the storage type as in two's complement.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "runtime/half_types.h"

#if defined(__CUDACC__)
#define GRAFT_HOST_DEVICE __host__ __device__
// Formulas the CPU also evaluates on 16-lane vectors: always inlined, because a vector argument
// passed to an out-of-line copy compiled for generic x86-64 from an AVX-512 clone of a loop
// (target_clones) would cross two calling conventions.
#define GRAFT_LANE_INLINE __host__ __device__ __forceinline__
#else
#define GRAFT_HOST_DEVICE
#define GRAFT_LANE_INLINE [[gnu::always_inline]] inline
#include "ops/vec_math.h"
#endif

namespace graft::math {

// Math functions by overload: exp(float) is expf on the device and std::exp(float) on the host.
#if defined(__CUDA_ARCH__)
#define GRAFT_MATH_FN(name)                                                      \
  GRAFT_HOST_DEVICE inline float name(float x) { return ::name##f(x); }          \
  GRAFT_HOST_DEVICE inline double name(double x) { return ::name(x); }
#else
#define GRAFT_MATH_FN(name)                                                      \
  GRAFT_HOST_DEVICE inline float name(float x) { return std::name(x); }          \
  GRAFT_HOST_DEVICE inline double name(double x) { return std::name(x); }
#endif
GRAFT_MATH_FN(exp)
GRAFT_MATH_FN(log)
GRAFT_MATH_FN(sin)
GRAFT_MATH_FN(cos)
GRAFT_MATH_FN(tanh)
GRAFT_MATH_FN(sqrt)
GRAFT_MATH_FN(log1p)
GRAFT_MATH_FN(expm1)
GRAFT_MATH_FN(erf)
GRAFT_MATH_FN(erfc)
#undef GRAFT_MATH_FN
#if defined(__CUDA_ARCH__)
GRAFT_HOST_DEVICE inline float pow(float x, float e) { return ::powf(x, e); }
GRAFT_HOST_DEVICE inline double pow(double x, double e) { return ::pow(x, e); }
#else
GRAFT_HOST_DEVICE inline float pow(float x, float e) { return std::pow(x, e); }
GRAFT_HOST_DEVICE inline double pow(double x, double e) { return std::pow(x, e); }
#endif

// The element type of a value or of a GCC lane vector (the CPU's vectorised loops evaluate some
// formulas on 16-lane vectors with the very templates below).
template <class V>
constexpr auto element_of() {
  if constexpr (std::is_arithmetic_v<V>) return V{};
  else return V{}[0];
}
template <class V> using Elem = decltype(element_of<V>());

// exp where a few ulp are fine and speed matters (GELU's derivative): on the CPU vec_math's
// branch-free exp for float values and lanes, so a vectorised loop and its scalar tail agree.
template <class V>
GRAFT_LANE_INLINE V exp_fast(V x) {
#if defined(__CUDACC__)
  return exp(x);
#else
  if constexpr (std::is_same_v<V, double>) return std::exp(x);
  else return vec_math::exp(x);
#endif
}

// Phi(x) = P(N(0, 1) <= x) = erfc(-x / sqrt 2) / 2, from the side where erfc is small, so neither
// tail loses relative accuracy. The CPU evaluates float through vec_math's branch-free erfc (a few
// ulp; the same arithmetic as its 16-lane loops, so a vectorised loop and its tail agree bit for bit).
template <class V>
GRAFT_LANE_INLINE V normal_cdf(V x) {
#if defined(__CUDACC__)
  return V(0.5) * erfc(-x * V(0.70710678118654752440));
#else
  return vec_math::normal_cdf(x);
#endif
}

// Which dtypes a functor is instantiated for (the plan's dtype rule guarantees the rest never
// reach it). A bit set over graft's DType order: Float32, Float64, Int64, Bool.
inline constexpr int kFloatingTypes = 0b0011, kIntTypes = 0b0100, kBoolType = 0b1000;
inline constexpr int kAllTypes = kFloatingTypes | kIntTypes | kBoolType;
inline constexpr int kNumberTypes = kFloatingTypes | kIntTypes;

template <class T> struct OpMathOf { using type = T; };
template <> struct OpMathOf<BFloat16> { using type = float; };
template <> struct OpMathOf<Half> { using type = float; };
template <> struct OpMathOf<uint8_t> { using type = int64_t; };
template <> struct OpMathOf<int32_t> { using type = int64_t; };
// The type a functor computes in for storage type T (invariant 4).
template <class T> using opmath_t = typename OpMathOf<T>::type;
// How a functor's argument or result type A (instantiated for M = opmath_t<T>) is stored: A itself,
// unless it is the compute type, which is stored as T.
template <class A, class M, class T> using stored_t = std::conditional_t<std::is_same_v<A, M>, T, A>;

template <class T>
inline constexpr int type_bit_of_compute = std::is_same_v<T, float> ? 0b0001 : std::is_same_v<T, double> ? 0b0010
                                           : std::is_same_v<T, bool> ? kBoolType : kIntTypes;
// Whether F may run for storage type T: its compute type is among F's types.
template <class T> inline constexpr int type_bit = type_bit_of_compute<opmath_t<T>>;

// An elementwise op's non-tensor argument as plain data, converted the ways Scalar::to<T>()
// converts (so device code never needs graft::Scalar). `present` is false for an absent optional.
struct ScalarArg {
  double f = 0;    // to<float/double>()
  int64_t i = 0;   // to<int64_t>(), and an option enum's value
  bool b = false;  // to<bool>()
  bool present = true;
};

template <class T>
GRAFT_HOST_DEVICE inline T scalar_as(const ScalarArg& s) {
  if constexpr (std::is_floating_point_v<T>) return static_cast<T>(s.f);
  else if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) return T(static_cast<float>(s.f));
  else if constexpr (std::is_same_v<T, bool>) return s.b;
  else return static_cast<T>(s.i);
}

// Relative cost of one element of F (transcendental functions: 4), so the CPU splits work sooner.
template <template <class> class F>
constexpr int functor_cost() {
  if constexpr (requires { F<float>::kCost; }) return F<float>::kCost;
  else return 1;
}

// The functor F<T> for params p (F<T>::make(p) when F takes arguments, else F<T>{}).
template <template <class> class F, class T>
GRAFT_HOST_DEVICE inline F<T> make_functor(const ScalarArg* p) {
  if constexpr (requires { F<T>::make(p); }) return F<T>::make(p);
  else return F<T>{};
}

// The dtypes F is instantiated for: F<float>::kTypes, or every dtype.
template <template <class> class F>
constexpr int functor_types() {
  if constexpr (requires { F<float>::kTypes; }) return F<float>::kTypes;
  else return kAllTypes;
}

// The call signature of F<T>: its output and input element types.
template <class... A> struct TypeList {};
template <class M> struct CallTraits;
template <class C, class R, class... A> struct CallTraits<R (C::*)(A...) const> {
  using Out = R;
  using Inputs = TypeList<std::decay_t<A>...>;
  static constexpr int arity = sizeof...(A);
};
template <template <class> class F, class T>
using Call = CallTraits<decltype(&F<T>::operator())>;

}  // namespace graft::math
