#pragma once
// Device helpers for the CUDA matrix products that cuBLAS does not cover: an int64 GEMM (cuBLAS
// has no integer GEMM with 64-bit accumulation) and the bias broadcast that seeds a GEMM output
// before a beta = 1 GEMM adds the product (linear, conv2d).
// Plain launch functions over raw device pointers; they launch on `stream` and check the launch.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/half_types.h"

namespace graft::cuda {

// Strides (in elements) of one batched row-major-indexed matrix operand: element (b, i, j) of
// the batch lives at ptr[b * batch + i * row + j * col]. Any stride may be 0 (broadcast).
struct IntMatStrides {
  int64_t batch, row, col;
};

// c[b] (contiguous [batch, n, m]) = a[b] [n, k] @ b[b] [k, m], or c[b] += ... when `accumulate`.
// Integer arithmetic wraps modulo 2^64, as on the CPU. k may be 0 (c = 0, or c unchanged).
void launch_matmul_int64(const int64_t* a, IntMatStrides sa, const int64_t* b, IntMatStrides sb, int64_t* c,
                         int64_t batch, int64_t n, int64_t k, int64_t m, bool accumulate, cudaStream_t stream);

// out (contiguous [outer, channels, inner]) [o, c, i] = bias[c * bias_stride].
// T is float, double, int64_t, BFloat16 or Half (a copy: the bias already has out's dtype).
template <class T>
void launch_fill_bias(T* out, const T* bias, int64_t bias_stride, int64_t outer, int64_t channels, int64_t inner,
                      cudaStream_t stream);

}  // namespace graft::cuda
