#pragma once
// Device helpers shared by the reduce area's kernels (reduce, softmax/losses, layer norm, index,
// join): launch geometry, dtype dispatch for launchers, NaN tests and a block-wide tree reduction.
// Kernels that take the 16-bit floats (with_floating_or_reduced) are templated on the storage
// type T and compute in M = math::opmath_t<T> (float for BFloat16 and Half): each element is
// converted once on load and rounded once on store (runtime/half_types.h, RNE as on the CPU).
// Included by .cu files only; nested in rdetail so nothing collides with the elementwise
// helpers of the same names in graft::cuda.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/join.h"
#include "ops/math/device_math.h"
#include "runtime/dtype.h"
#include "runtime/half_types.h"

namespace graft::cuda::rdetail {

inline constexpr int kBlock = 256;

__device__ __forceinline__ int64_t global_thread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t global_stride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// Blocks for one thread per item; grid-stride loops cover anything beyond the cap.
inline unsigned int grid_for(int64_t items, int threads = kBlock) {
  int64_t b = (items + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return static_cast<unsigned int>(b);
}

// Calls f(T{}) with T the C++ type of `t`.
template <class F>
void with_dtype(DType t, const char* launcher, F&& f) {
  switch (t) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    case DType::Int64: f(int64_t{}); return;
    case DType::Bool: f(bool{}); return;
  }
  reduce_area_internal_error(launcher, t);
}
template <class F>
void with_floating(DType t, const char* launcher, F&& f) {
  switch (t) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    default: break;
  }
  reduce_area_internal_error(launcher, t);
}

// with_dtype's types and the 16-bit floats: for data movement (copies, fills) and sums.
template <class F>
void with_dtype_or_reduced(DType t, const char* launcher, F&& f) {
  switch (t) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    case DType::Int64: f(int64_t{}); return;
    case DType::Bool: f(bool{}); return;
    case DType::BFloat16: f(BFloat16{}); return;
    case DType::Float16: f(Half{}); return;
    default: break;
  }
  reduce_area_internal_error(launcher, t);
}

// float32, float64 and the 16-bit floats (storage types; kernels compute in math::opmath_t<T>).
template <class F>
void with_floating_or_reduced(DType t, const char* launcher, F&& f) {
  switch (t) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    case DType::BFloat16: f(BFloat16{}); return;
    case DType::Float16: f(Half{}); return;
    default: break;
  }
  reduce_area_internal_error(launcher, t);
}

template <class T>
__device__ __forceinline__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// Reduces `v` over each group of G consecutive threads of the block (G a power of two dividing
// blockDim.x) with combine(a, b), a being the lower-numbered half; every member of a group gets
// the group's result. Every thread of the block must call it (it synchronises). `buf` holds
// blockDim.x values of V.
template <int G, class V, class Combine>
__device__ V group_reduce(V v, V* buf, Combine combine) {
  int tid = threadIdx.x, lane = tid % G;
  buf[tid] = v;
  __syncthreads();
  for (int s = G / 2; s > 0; s >>= 1) {
    if (lane < s) {
      V a = buf[tid];
      combine(a, buf[tid + s]);
      buf[tid] = a;
    }
    __syncthreads();
  }
  V r = buf[tid - lane];
  __syncthreads();  // buf is reused by the next call
  return r;
}

// Shared memory for group_reduce over values of V (V must be trivially constructible: CUDA does
// not run constructors for __shared__ variables).
template <class V>
__device__ V* shared_buffer() {
  __shared__ __align__(16) unsigned char raw[kBlock * 32];
  static_assert(sizeof(V) <= 32, "shared_buffer: value type too large");
  return reinterpret_cast<V*>(raw);
}

}  // namespace graft::cuda::rdetail
