#pragma once
// Launchers for copies, fills and arange on the device (raw pointers; see elementwise.h).
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

}  // namespace graft::cuda
