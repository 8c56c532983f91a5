// The saved-tensor codecs: grid-stride loops over elements (or bytes of a mask) that evaluate
// ops/codec_math.h, so codes and masks are bit-identical to the CPU's. The per-channel maximum is an
// atomicMax on the float's bits: for non-negative floats the bit patterns order as the values, and
// a maximum does not depend on the order the threads arrive in.
#include "cuda/kernels/codec.h"

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/philox.cuh"
#include "ops/codec_math.h"

namespace graft::cuda {
namespace {

template <class T>
__device__ __forceinline__ float as_float(T v) {
  return static_cast<float>(v);
}

template <class T>
__device__ __forceinline__ bool sign_of(T v) {
  if constexpr (std::is_same_v<T, double>) return codec_math::sign_bit(v);
  else if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
    return codec_math::sign_bit(static_cast<float>(v));
  else return v > T(0);
}

template <class T>
__global__ void __launch_bounds__(kElemThreads) pack_sign_kernel(const T* x, int64_t n, uint8_t* out) {
  const int64_t bytes = (n + 7) / 8;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < bytes;
       j += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    uint8_t byte = 0;
    for (int k = 0; k < 8 && j * 8 + k < n; ++k) byte |= static_cast<uint8_t>(sign_of(x[j * 8 + k])) << k;
    out[j] = byte;
  }
}

template <class T>
__global__ void __launch_bounds__(kElemThreads) unpack_sign_kernel(const uint8_t* bits, int64_t n, T* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = (bits[i >> 3] >> (i & 7)) & 1 ? static_cast<T>(1) : static_cast<T>(0);
}

template <class T>
__global__ void __launch_bounds__(kElemThreads) amax_kernel(const T* x, int64_t n, int64_t C, int64_t inner,
                                                            unsigned int* amax_bits) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float a = fabsf(as_float(x[i]));
    if (a > 0.0f && a != INFINITY) atomicMax(amax_bits + (i / inner) % C, __float_as_uint(a));  // NaN fails a > 0
  }
}

__global__ void scale_kernel(float* scale, int64_t C) {
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < C;
       c += static_cast<int64_t>(gridDim.x) * blockDim.x)
    scale[c] = codec_math::int8_scale(scale[c]);
}

template <class T>
__global__ void __launch_bounds__(kElemThreads) quantize_kernel(const T* x, int64_t n, int64_t C, int64_t inner,
                                                                const float* scale, bool stochastic, uint64_t seed,
                                                                uint64_t offset, int8_t* codes) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float u = -1.0f;
    if (stochastic) u = unit_float(word(philox(seed, offset + static_cast<uint64_t>(i) / 4), static_cast<int>(i % 4)));
    codes[i] = codec_math::int8_code(as_float(x[i]), scale[(i / inner) % C], u);
  }
}

template <class T>
__global__ void __launch_bounds__(kElemThreads) dequantize_kernel(const int8_t* codes, const float* scale, int64_t n,
                                                                  int64_t C, int64_t inner, T* out) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = static_cast<T>(codec_math::int8_value(codes[i], scale[(i / inner) % C]));
}

}  // namespace

void launch_pack_sign_bits(DType dtype, const void* x, int64_t n, uint8_t* out, cudaStream_t stream) {
  if (n <= 0) return;
  visit_dtype(dtype, [&]<class T>() {
    pack_sign_kernel<T><<<grid_for((n + 7) / 8), kElemThreads, 0, stream>>>(static_cast<const T*>(x), n, out);
  });
  check_launch("_pack_sign_bits");
}

void launch_unpack_sign_bits(DType dtype, const uint8_t* bits, int64_t n, void* out, cudaStream_t stream) {
  if (n <= 0) return;
  visit_dtype(dtype, [&]<class T>() {
    unpack_sign_kernel<T><<<grid_for(n), kElemThreads, 0, stream>>>(bits, n, static_cast<T*>(out));
  });
  check_launch("_unpack_sign_bits");
}

void launch_quantize_int8(DType dtype, const void* x, int64_t outer, int64_t C, int64_t inner, int64_t seed,
                          int64_t offset, float* scale, int8_t* codes, cudaStream_t stream) {
  const int64_t n = outer * C * inner;
  if (n <= 0) return;
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
      const T* xp = static_cast<const T*>(x);
      amax_kernel<T><<<grid_for(n), kElemThreads, 0, stream>>>(xp, n, C, inner, reinterpret_cast<unsigned int*>(scale));
      scale_kernel<<<grid_for(C), kElemThreads, 0, stream>>>(scale, C);
      quantize_kernel<T><<<grid_for(n), kElemThreads, 0, stream>>>(xp, n, C, inner, scale, seed >= 0,
                                                                   static_cast<uint64_t>(seed),
                                                                   static_cast<uint64_t>(offset), codes);
    } else {
      elementwise_internal_error("launch_quantize_int8", dtype, 0);
    }
  });
  check_launch("_quantize_int8");
}

void launch_dequantize_int8(DType dtype, const int8_t* codes, const float* scale, int64_t outer, int64_t C,
                            int64_t inner, void* out, cudaStream_t stream) {
  const int64_t n = outer * C * inner;
  if (n <= 0) return;
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
      dequantize_kernel<T><<<grid_for(n), kElemThreads, 0, stream>>>(codes, scale, n, C, inner, static_cast<T*>(out));
    else
      elementwise_internal_error("launch_dequantize_int8", dtype, 0);
  });
  check_launch("_dequantize_int8");
}

}  // namespace graft::cuda
