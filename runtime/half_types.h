#pragma once
// BFloat16 and Half: graft's 16-bit floating element types, as bits plus conversions.
//
// Invariants:
// 1. float -> 16 bits rounds to nearest, ties to even, once. NaN stays NaN (bf16: the canonical
//    quiet NaN 0x7FC0 with its sign, as c10; fp16: the quiet NaN 0x7E00 with its sign), infinities
//    stay infinities, and values past the largest finite value round to infinity exactly where
//    IEEE rounding says (fp16: |x| >= 65520). tests/runtime/test_half_types.cpp checks every class
//    against PyTorch (tests/runtime/data/rounding.json).
// 2. 16 bits -> float is exact (both types are subsets of float32), so arithmetic on these types
//    is arithmetic in float: `BFloat16 c = a * b` rounds once, after the float multiply. Kernels
//    that chain operations convert once at load and once at store (math::opmath_t), never per step.
// 3. No graft type, no allocation, no library call: the same text compiles for CUDA device code
//    (GRAFT_HOST_DEVICE), so a device cannot round differently from the host.
// 4. The bit layouts are IEEE binary16 and the upper half of binary32: a tensor's bytes are what
//    PyTorch, safetensors, oneDNN and cuBLAS read.
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define GRAFT_HALF_HD __host__ __device__
#else
#define GRAFT_HALF_HD
#endif

namespace graft {

namespace half_bits {
GRAFT_HALF_HD inline uint32_t float_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}
GRAFT_HALF_HD inline float bits_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}

// float32 -> bfloat16 bits: add 0x7FFF plus the kept part's lowest bit, then truncate. The carry
// rounds up exactly when the dropped half is above one half, or equal to it with an odd kept part.
GRAFT_HALF_HD inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x7FC0u) & 0xFFC0u;
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
GRAFT_HALF_HD inline float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// float32 -> binary16 bits, round to nearest even, by integer arithmetic (no F16C needed; the
// vectorised conversions in ops/ use F16C where the CPU has it and give the same bits).
GRAFT_HALF_HD inline uint16_t float_to_f16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;             // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;            // >= 65520 (or inf): infinity
  if (a < 0x38800000u) {                                  // below 2^-14: a subnormal half (or 0)
    if (a < 0x33000000u) return sign;                     // <= 2^-25: rounds to zero (tie -> even 0)
    const uint32_t exp = a >> 23;                         // 102..112
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;    // with the implicit bit
    const uint32_t shift = 126 - exp;                     // 14..24: mant >> shift is the half mantissa
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return sign | static_cast<uint16_t>(h);
  }
  // Normal: rebias the exponent (127 -> 15) and round the 13 dropped mantissa bits.
  uint32_t h = ((a >> 13) - (112u << 10));
  const uint32_t rem = a & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry may reach the exponent: right
  return sign | static_cast<uint16_t>(h);
}
GRAFT_HALF_HD inline float f16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  // inf; NaN keeps its payload and comes out quiet, as F16C's vcvtph2ps (ops/reduced_float.cpp).
  if (exp == 0x1F) return bits_float(sign | 0x7F800000u | (mant != 0 ? 0x400000u : 0u) | (mant << 13));
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_float(sign);
  // Subnormal: normalise.
  uint32_t e = 113;
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  return bits_float(sign | (e << 23) | ((mant & 0x3FFu) << 13));
}
}  // namespace half_bits

struct BFloat16 {
  uint16_t x = 0;
  struct from_bits_t {};
  BFloat16() = default;
  GRAFT_HALF_HD constexpr BFloat16(uint16_t bits, from_bits_t) : x(bits) {}
  GRAFT_HALF_HD BFloat16(float f) : x(half_bits::float_to_bf16(f)) {}  // NOLINT: rounds, as c10
  GRAFT_HALF_HD operator float() const { return half_bits::bf16_to_float(x); }  // NOLINT: exact
  static constexpr BFloat16 from_bits(uint16_t b) { return BFloat16(b, from_bits_t{}); }
};

struct Half {
  uint16_t x = 0;
  struct from_bits_t {};
  Half() = default;
  GRAFT_HALF_HD constexpr Half(uint16_t bits, from_bits_t) : x(bits) {}
  GRAFT_HALF_HD Half(float f) : x(half_bits::float_to_f16(f)) {}  // NOLINT: rounds, as c10
  GRAFT_HALF_HD operator float() const { return half_bits::f16_to_float(x); }  // NOLINT: exact
  static constexpr Half from_bits(uint16_t b) { return Half(b, from_bits_t{}); }
};

static_assert(sizeof(BFloat16) == 2 && sizeof(Half) == 2);

}  // namespace graft
