#pragma once
// Bulk conversions between float32 and the 16-bit floats, the hot loop of every bfloat16/float16
// kernel that computes in float (load a row, compute, store a row) and of casts.
//
// Invariants:
// 1. Each function gives exactly the bits of half_types.h's scalar conversion for every input,
//    NaN included (the hardware converters keep a NaN's payload; these canonicalise it, so a
//    vector body and its scalar tail can never disagree).
// 2. The path is picked from cpu_isa() at each call (AVX512_BF16 vcvtneps2bf16, F16C vcvtps2ph,
//    AVX-512/AVX2 integer rounding, scalar), so GRAFT_MAX_CPU_ISA reaches every path.
// 3. No threads: callers split rows over threads; these are the per-row loops.
#include <cstdint>

#include "runtime/half_types.h"

namespace graft::kernels {

void float_to_bf16(const float* src, BFloat16* dst, int64_t n);
void bf16_to_float(const BFloat16* src, float* dst, int64_t n);
void float_to_f16(const float* src, Half* dst, int64_t n);
void f16_to_float(const Half* src, float* dst, int64_t n);

// Typed front ends for kernels templated on the storage type T (BFloat16 or Half).
inline void to_float(const BFloat16* s, float* d, int64_t n) { bf16_to_float(s, d, n); }
inline void to_float(const Half* s, float* d, int64_t n) { f16_to_float(s, d, n); }
inline void from_float(const float* s, BFloat16* d, int64_t n) { float_to_bf16(s, d, n); }
inline void from_float(const float* s, Half* d, int64_t n) { float_to_f16(s, d, n); }

}  // namespace graft::kernels
