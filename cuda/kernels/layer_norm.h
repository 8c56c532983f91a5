#pragma once
// Device side of layer_norm over x seen as [M, N] (M rows of N normalised elements).
//   forward:  mean = sum(x) / N, rstd = 1 / sqrt(sum((x - mean)^2) / N + eps)
//             y = (x - mean) * rstd * w + b       (in T, as the CPU kernel; stats in double)
//   backward: g = dy * w, xhat = (x - mean) * rstd
//             dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//             dw = sum over rows of dy * xhat, db = sum over rows of dy
// dw/db are summed per fixed piece of rows into scratch and the pieces added in order, so the
// result is deterministic (no atomics). Plain launch functions over raw, contiguous device
// pointers; they launch on `stream` and check the launch. dtype is float32, float64, bfloat16 or
// float16. A 16-bit layer norm computes as float32 does (loads exact, y in float, statistics and
// gradients in double) and rounds each stored value once from float32's result, as the CPU's float
// fallback does: mean and rstd are stored in x's dtype, and the backward reads those rounded values.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

// w, b may be null. mean, rstd: [M].
void launch_layer_norm_forward(const void* x, const void* w, const void* b, void* y, void* mean, void* rstd,
                               DType dtype, int64_t M, int64_t N, double eps, cudaStream_t stream);

// Bytes of device scratch launch_layer_norm_backward needs when dw or db is wanted.
int64_t layer_norm_backward_scratch_bytes(int64_t M, int64_t N);
// w may be null; dw, db may be null (not wanted).
void launch_layer_norm_backward(const void* dy, const void* x, const void* mean, const void* rstd, const void* w,
                                void* dx, void* dw, void* db, DType dtype, int64_t M, int64_t N, void* scratch,
                                cudaStream_t stream);

}  // namespace graft::cuda
