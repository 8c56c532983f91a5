#pragma once
// The CPU's Philox4x32-10 (runtime/generator.cpp) and its counter -> number helpers on the device
// (nvcc only), shared by every kernel that draws: the random fills (random.cu) and stochastic
// rounding (codec.cu). Element <-> counter mappings stay with each kernel's documentation.
#include <cuda_runtime.h>

#include <cstdint>

namespace graft::cuda {

// philox4x32 (runtime/generator.cpp) with subsequence 0.
__device__ __forceinline__ uint4 philox(uint64_t seed, uint64_t ctr) {
  constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57, kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;
  uint32_t c0 = static_cast<uint32_t>(ctr), c1 = static_cast<uint32_t>(ctr >> 32), c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0 = __umulhi(kM0, c0), lo0 = kM0 * c0;
    uint32_t hi1 = __umulhi(kM1, c2), lo1 = kM1 * c2;
    uint32_t n0 = hi1 ^ c1 ^ k0, n1 = lo1, n2 = hi0 ^ c3 ^ k1, n3 = lo0;
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kW0;
    k1 += kW1;
  }
  return make_uint4(c0, c1, c2, c3);
}

__device__ __forceinline__ uint32_t word(const uint4& w, int k) {
  return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}

// runtime/generator.h's uint_to_unit_float / uint_to_unit_double.
__device__ __forceinline__ float unit_float(uint32_t x) { return static_cast<float>(x >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double unit_double(uint32_t hi, uint32_t lo) {
  uint64_t v = (static_cast<uint64_t>(hi) << 32 | lo) >> 11;
  return static_cast<double>(v) * (1.0 / 9007199254740992.0);
}

}  // namespace graft::cuda
