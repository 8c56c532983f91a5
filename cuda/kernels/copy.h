#pragma once
// Launchers for copies, fills, arange and tril/triu on the device (raw pointers; see elementwise.h).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/elementwise.h"

namespace graft::cuda {

// dst = cast<dst_dtype>(src) over `g` (operand 0 dst, operand 1 src). Bool results are `src != 0`.
void launch_copy(DType dst_dtype, DType src_dtype, const ElementwiseGeometry& g, cudaStream_t stream);
// Every element of the one-operand geometry `g` set to `value` converted to `dtype`.
void launch_fill(DType dtype, const ElementwiseGeometry& g, ScalarArg value, cudaStream_t stream);
// out[i] = dtype(start + i * step) for i < n, out dense. Rounded exactly as the CPU loop (no fma).
void launch_arange(DType dtype, void* out, int64_t n, double start, double step, cudaStream_t stream);
// tril (lower) / triu over contiguous [batch, rows, cols] src and out of `dtype` (any: elements move
// as bits of their size): matrix row i keeps columns [0, i + diagonal + 1) (tril) or [i + diagonal, cols)
// (triu), clamped to [0, cols]; the other elements become zero bits. diagonal is already clamped
// to [-rows, cols] (kernels::plan_triangle).
void launch_triangle(DType dtype, const void* src, void* out, int64_t batch, int64_t rows, int64_t cols,
                     int64_t diagonal, bool lower, cudaStream_t stream);

}  // namespace graft::cuda
