#include "ops/reduced_float.h"

#include <immintrin.h>

#include "runtime/cpu_isa.h"

namespace graft::kernels {
namespace {

// ---- float -> bfloat16 ----

// Lanes needing more than the fast conversion: NaN (canonicalised) and float32 subnormals (which
// vcvtneps2bf16 reads as zero). Both are rare in real data, so they are fixed under one branch and
// the common block costs a convert, two mask tests and a store.
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __mmask16 bf16_special_lanes(__m512 v, __m512i u) {
  return _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q) |
         (_mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000)) & _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7FFFFF)));
}
// Integer round-to-nearest-even of 16 lanes, NaN lanes replaced by sign | 0x7FC0 (the scalar rule).
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline __m256i bf16_by_integer(__m512 v, __m512i u) {
  const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7FFF), lsb)), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  if (nan != 0) {
    const __m512i sign_qnan = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x8000)),
                                              _mm512_set1_epi32(0x7FC0));
    r = _mm512_mask_blend_epi32(nan, r, sign_qnan);
  }
  return _mm512_cvtepi32_epi16(r);
}

__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16"))) int64_t float_to_bf16_avx512bf16(
    const float* s, BFloat16* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(s + i);
    __m256i r = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
    const __m512i u = _mm512_castps_si512(v);
    const __mmask16 special = bf16_special_lanes(v, u);
    // Subnormal lanes have subnormal (or min-normal) bf16 results and NaN lanes a canonical NaN:
    // the integer rounding gives both.
    if (special != 0) r = _mm256_mask_blend_epi16(special, r, bf16_by_integer(v, u));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), r);
  }
  return i;
}

// Integer rounding in 16 lanes: u + 0x7FFF + ((u >> 16) & 1), NaN lanes replaced.
__attribute__((target("avx512f,avx512bw,avx512vl"))) int64_t float_to_bf16_avx512(const float* s, BFloat16* d,
                                                                                 int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(s + i);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), bf16_by_integer(v, _mm512_castps_si512(v)));
  }
  return i;
}

__attribute__((target("avx2,fma,f16c"))) int64_t float_to_bf16_avx2(const float* s, BFloat16* d, int64_t n) {
  int64_t i = 0;
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7FFF);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), one);
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(bias, lsb)), 16);
    const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    const __m256i sign_qnan = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x8000)),
                                              _mm256_set1_epi32(0x7FC0));
    r = _mm256_blendv_epi8(r, sign_qnan, nan);
    // Pack 8 x 32-bit (values < 65536) to 8 x 16-bit: packus works per 128-bit lane, then fix the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0b11011000);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm256_castsi256_si128(packed));
  }
  return i;
}

// ---- bfloat16 -> float: a shift ----

__attribute__((target("avx512f,avx512bw,avx512vl"))) int64_t bf16_to_float_avx512(const BFloat16* s, float* d,
                                                                                 int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    _mm512_storeu_si512(d + i, _mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  return i;
}
__attribute__((target("avx2,fma,f16c"))) int64_t bf16_to_float_avx2(const BFloat16* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  return i;
}

// ---- float16: F16C (vcvtps2ph rounds to nearest even; NaN lanes canonicalised) ----

__attribute__((target("avx512f,avx512bw,avx512vl"))) int64_t float_to_f16_avx512(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(s + i);
    __m256i r = _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i sign_qnan = _mm512_or_si512(
        _mm512_and_si512(_mm512_srli_epi32(_mm512_castps_si512(v), 16), _mm512_set1_epi32(0x8000)),
        _mm512_set1_epi32(0x7E00));
    r = _mm256_mask_blend_epi16(nan, r, _mm512_cvtepi32_epi16(sign_qnan));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), r);
  }
  return i;
}
__attribute__((target("avx2,fma,f16c"))) int64_t float_to_f16_avx2(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(s + i);
    __m128i r = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    if (_mm256_movemask_ps(nan) != 0) {  // rare: fix the NaN lanes one by one
      alignas(16) uint16_t lanes[8];
      _mm_store_si128(reinterpret_cast<__m128i*>(lanes), r);
      for (int k = 0; k < 8; ++k)
        if (s[i + k] != s[i + k]) lanes[k] = half_bits::float_to_f16(s[i + k]);
      r = _mm_load_si128(reinterpret_cast<const __m128i*>(lanes));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), r);
  }
  return i;
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) int64_t f16_to_float_avx512(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i))));
  return i;
}
__attribute__((target("avx2,fma,f16c"))) int64_t f16_to_float_avx2(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i))));
  return i;
}

}  // namespace

void float_to_bf16(const float* s, BFloat16* d, int64_t n) {
  int64_t i = 0;
  switch (cpu_isa()) {
    case CpuIsa::Avx512CoreBf16: i = float_to_bf16_avx512bf16(s, d, n); break;
    case CpuIsa::Avx512Core: i = float_to_bf16_avx512(s, d, n); break;
    case CpuIsa::Avx2: i = float_to_bf16_avx2(s, d, n); break;
    case CpuIsa::Baseline: break;
  }
  for (; i < n; ++i) d[i] = BFloat16(s[i]);
}

void bf16_to_float(const BFloat16* s, float* d, int64_t n) {
  int64_t i = 0;
  switch (cpu_isa()) {
    case CpuIsa::Avx512CoreBf16:
    case CpuIsa::Avx512Core: i = bf16_to_float_avx512(s, d, n); break;
    case CpuIsa::Avx2: i = bf16_to_float_avx2(s, d, n); break;
    case CpuIsa::Baseline: break;
  }
  for (; i < n; ++i) d[i] = static_cast<float>(s[i]);
}

void float_to_f16(const float* s, Half* d, int64_t n) {
  int64_t i = 0;
  switch (cpu_isa()) {
    case CpuIsa::Avx512CoreBf16:
    case CpuIsa::Avx512Core: i = float_to_f16_avx512(s, d, n); break;
    case CpuIsa::Avx2: i = float_to_f16_avx2(s, d, n); break;
    case CpuIsa::Baseline: break;
  }
  for (; i < n; ++i) d[i] = Half(s[i]);
}

void f16_to_float(const Half* s, float* d, int64_t n) {
  int64_t i = 0;
  switch (cpu_isa()) {
    case CpuIsa::Avx512CoreBf16:
    case CpuIsa::Avx512Core: i = f16_to_float_avx512(s, d, n); break;
    case CpuIsa::Avx2: i = f16_to_float_avx2(s, d, n); break;
    case CpuIsa::Baseline: break;
  }
  for (; i < n; ++i) d[i] = static_cast<float>(s[i]);
}

}  // namespace graft::kernels
