#pragma once
// Branch-free float math for the CPU kernels' hot loops (attention's softmax tiles, GELU), written
// once over a type V that is either float or a 16-lane GCC vector (f32x16), so a loop runs the
// same arithmetic on whole vectors and on its scalar tail. The compilers do not vectorise std::exp
// or std::erf (library calls), nor these functions' selects under the default -ftrapping-math; the
// vector type makes the SIMD explicit. On float: exp within 2 ulp; normal_cdf within a few ulp,
// and within about 1e-6 relative in the far left tail (x < -4). float64 callers get std:: (exact,
// used by tests and gradcheck).
//
// No std::fma: on a generic x86-64 build it is a library call. Where an exact product matters the
// operands are split so that plain products are exact instead.
//
// GRAFT_VECTOR_CLONES marks a float loop for function multiversioning: the build targets generic
// x86-64, and the loader picks the AVX-512 or AVX2 copy on CPUs that have them.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

// Off under ASan and TSan: the clones' ifunc resolvers run during the loader's relocation, before
// the sanitizer runtime is set up, and crash the program at load.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define GRAFT_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define GRAFT_VECTOR_CLONES
#endif
// Every helper is forced inline: an out-of-line copy would be compiled for generic x86-64 and
// take its 64-byte vectors by another calling convention than an AVX-512 clone passes them.
#define GRAFT_VEC_INLINE [[gnu::always_inline]] inline

// Passing 64-byte vectors between inline functions of a generic build is what these helpers do;
// GCC's note that the AVX-512 calling convention differs concerns only non-inlined calls.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace graft::vec_math {

typedef float f32x16 __attribute__((vector_size(64)));
typedef int32_t i32x16 __attribute__((vector_size(64)));
typedef uint32_t u32x16 __attribute__((vector_size(64)));
inline constexpr int kLanes = 16;

GRAFT_VEC_INLINE f32x16 load(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
GRAFT_VEC_INLINE void store(float* p, f32x16 v) { std::memcpy(p, &v, sizeof v); }

// The sum of the 16 lanes as a fixed tree (halves, then quarters): a short dependency chain, and
// the same order, so the same bits, in every clone.
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
GRAFT_VEC_INLINE float lane_sum(f32x16 v) {
  f32x8 h = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
            __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  f32x4 q = __builtin_shufflevector(h, h, 0, 1, 2, 3) + __builtin_shufflevector(h, h, 4, 5, 6, 7);
  return (q[0] + q[2]) + (q[1] + q[3]);
}

// The largest of the 16 lanes, by the same halving tree.
GRAFT_VEC_INLINE float lane_max(f32x16 v) {
  f32x8 h0 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  f32x8 h1 = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  f32x8 h = h0 > h1 ? h0 : h1;
  f32x4 q0 = __builtin_shufflevector(h, h, 0, 1, 2, 3), q1 = __builtin_shufflevector(h, h, 4, 5, 6, 7);
  f32x4 q = q0 > q1 ? q0 : q1;
  return std::max(std::max(q[0], q[1]), std::max(q[2], q[3]));
}

// What differs between the scalar and the vector type: conversions and bit casts.
GRAFT_VEC_INLINE int32_t to_int(float x) { return static_cast<int32_t>(x); }
GRAFT_VEC_INLINE i32x16 to_int(f32x16 x) { return __builtin_convertvector(x, i32x16); }
GRAFT_VEC_INLINE float to_float(int32_t i) { return static_cast<float>(i); }
GRAFT_VEC_INLINE f32x16 to_float(i32x16 i) { return __builtin_convertvector(i, f32x16); }
GRAFT_VEC_INLINE float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
GRAFT_VEC_INLINE f32x16 from_bits(u32x16 u) { return (f32x16)u; }  // GCC vector casts reinterpret the bits
GRAFT_VEC_INLINE uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
GRAFT_VEC_INLINE u32x16 bits(f32x16 f) { return (u32x16)f; }
template <class V> using UnsignedOf = decltype(bits(V{}));
// A constant in every lane.
template <class V> GRAFT_VEC_INLINE V splat(float c) {
  if constexpr (std::is_same_v<V, float>) return c;
  else return V{} + c;
}

// Cody and Waite's split of ln 2 (kLn2Hi has 9 significant bits, so k * kLn2Hi is exact for |k| < 2^15).
inline constexpr float kLog2e = 1.44269504f, kLn2Hi = 0.693359375f, kLn2Lo = -2.12194440e-4f;

// k = round(t), half away from 0, as an integer vector or int.
template <class V>
GRAFT_VEC_INLINE auto round_to_int(V t) {
  return to_int(t + (t >= 0.0f ? splat<V>(0.5f) : splat<V>(-0.5f)));
}

// 2^k exp(r) for |r| <= ln 2 / 2 and -126 <= k <= 127: a degree-6 polynomial fitted for relative
// error (3.6e-9 before rounding), scaled through the exponent bits.
template <class V, class I>
GRAFT_VEC_INLINE V exp_scaled(V r, I ki) {
  V p = splat<V>(0.00137514079f);
  p = p * r + 0.00836891588f;
  p = p * r + 0.0416695331f;
  p = p * r + 0.166665185f;
  p = p * r + 0.499999881f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  return p * from_bits((UnsignedOf<V>)((ki + 127) << 23));
}

// exp(x) = 2^k exp(r), k = round(x / ln 2), |r| <= ln 2 / 2 (k * kLn2Hi is exact). Below -87 the
// result is 0 (no denormals), above 88 it is inf, NaN stays NaN.
template <class V>
GRAFT_VEC_INLINE V exp(V x) {
  V xc = x < -87.0f ? splat<V>(-87.0f) : x;
  xc = xc > 88.0f ? splat<V>(88.0f) : xc;
  xc = x != x ? splat<V>(0.0f) : xc;  // NaN never reaches the integer conversion
  auto ki = round_to_int(xc * kLog2e);
  V k = to_float(ki);
  V y = exp_scaled((xc - k * kLn2Hi) - k * kLn2Lo, ki);
  y = x < -87.0f ? splat<V>(0.0f) : y;
  y = x > 88.0f ? splat<V>(std::numeric_limits<float>::infinity()) : y;
  return x != x ? x : y;
}
GRAFT_VEC_INLINE double exp(double x) { return std::exp(x); }

// erfc(z) for z >= 0 as u exp(-z^2 + S(u)), u = 1 / (1 + z / 2), S a degree-9 polynomial fitted by
// least squares to log(erfc(z) / u) + z^2 (8e-8 relative before rounding). z^2 is split into an
// exact head hi (z's top 12 bits squared) and a small tail, so the argument's rounding (an ulp of
// z^2, up to 2^-17 near z = 10) does not become the result's relative error: exp's range reduction
// takes k from the rounded argument but subtracts k ln 2 from the exact head first (for z >= 1,
// -hi - k * kLn2Hi is exact: both are multiples of 2^-22 and the difference is small), then adds
// the small parts. One exponential; results below exp(-87) flush to 0.
template <class V>
GRAFT_VEC_INLINE V erfc_nonneg(V z) {
  V u = 1.0f / (0.5f * z + 1.0f);
  V s = splat<V>(0.176494703f);
  s = s * u - 0.848774758f;
  s = s * u + 1.54150808f;
  s = s * u - 1.19272237f;
  s = s * u + 0.315776606f;
  s = s * u - 0.200456294f;
  s = s * u + 0.0999075162f;
  s = s * u + 0.373740877f;
  s = s * u + 1.00003783f;
  s = s * u - 1.26551211f;
  V zh = from_bits(bits(z) & 0xFFFFF000u), zl = z - zh;
  V hi = zh * zh, lo = (2.0f * zh + zl) * zl;
  V small = s - lo;    // in [-1.3, 0.1]
  V arg = small - hi;  // rounded: picks k and tests for underflow only
  auto ki = round_to_int((arg < -87.0f ? splat<V>(-87.0f) : arg) * kLog2e);
  V k = to_float(ki);
  V e = exp_scaled(((-hi - k * kLn2Hi) - k * kLn2Lo) + small, ki);
  return u * (arg < -87.0f ? splat<V>(0.0f) : e);  // a NaN z stays NaN through u
}

// Phi(x) = P(N(0, 1) <= x) = erfc(-x / sqrt 2) / 2, from the side where erfc is small so neither
// tail loses relative accuracy.
template <class V>
GRAFT_VEC_INLINE V normal_cdf(V x) {
  V z = (x < 0.0f ? -x : x) * 0.707106781f;
  V zc = z > 10.0f ? splat<V>(10.0f) : z;
  V half_tail = 0.5f * erfc_nonneg(zc);
  half_tail = z > 10.0f ? splat<V>(0.0f) : half_tail;
  return x < 0.0f ? half_tail : 1.0f - half_tail;
}
GRAFT_VEC_INLINE double normal_cdf(double x) { return 0.5 * std::erfc(-x * 0.70710678118654752440); }

}  // namespace graft::vec_math
