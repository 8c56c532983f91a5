#pragma once
// Device side of softmax/log_softmax (+ backward) and the losses (nll_loss (+ backward), the
// cross_entropy pieces, mse_loss). Plain launch functions over raw device pointers: they launch on
// `stream` and check the launch. Tensors are contiguous; dtype is float32 or float64, and for
// softmax, the class-index losses and nll_loss_backward also bfloat16 or float16 (loads exact,
// sums in double as for float32, each stored value rounded from float32's).
//
// Softmax works on x seen as [outer, D, inner] around the softmax dim, in the CPU kernel's
// precision: max and exp in T, sums in double. A 16-bit x is loaded once into float, computed
// as float32 would be, and each output rounded once (the CPU's float fallback gives the same).
// Loss sums (and nll_loss_backward's total weight) are reduced per block into `scratch` and then
// combined by one block in a fixed order, so they do not depend on timing; target validation is
// the glue's job (before the launch).
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/op_options.h"
#include "runtime/dtype.h"

namespace graft::cuda {

// softmax (log = false) or log_softmax of x into y.
void launch_softmax_forward(const void* x, void* y, DType dtype, bool log, int64_t outer, int64_t D, int64_t inner,
                            cudaStream_t stream);
// softmax:     gx = y * (g - sum_d(g * y))
// log_softmax: gx = g - exp(y) * sum_d(g)
void launch_softmax_backward(const void* g, const void* y, void* gx, DType dtype, bool log, int64_t outer, int64_t D,
                             int64_t inner, cudaStream_t stream);


// Doubles of device scratch every loss launcher below needs.
inline constexpr int kLossBlocks = 256;
inline constexpr int64_t kLossScratchDoubles = 2 * kLossBlocks + 2;

// log_probs [N, C, S] (element (n, c, s) at (n * C + c) * S + s), target [N * S] in [0, C) or
// ignore_index. loss_i = (1 - ls) * (-w[t] * lp[t]) + (ls / C) * (-sum_c w[c] * lp[c]).
// None: none_out[N * S] gets every loss_i (0 where ignored). Mean/Sum: out (a scalar) gets the
// sum, or the sum divided by the summed weights of the counted targets.
void launch_class_index_loss(const void* lp, const int64_t* target, const void* weight, DType dtype, int64_t M,
                             int64_t C, int64_t S, int64_t ignore_index, double label_smoothing, LossReduction red,
                             void* none_out, void* out, double* scratch, cudaStream_t stream);
// Probability targets y (lp's shape): loss_i = -sum_c w[c] * ((1 - ls) * y[c] + ls / C) * lp[c];
// Mean divides by N * S.
void launch_probability_loss(const void* lp, const void* y, const void* weight, DType dtype, int64_t M, int64_t C,
                             int64_t S, double label_smoothing, LossReduction red, void* none_out, void* out,
                             double* scratch, cudaStream_t stream);
// gx (zeroed by the caller, lp's shape) [n, t, s] = -w[t] * g(n, s) * scale, g = grad[i] (None) or
// grad[0]; scale = 1 / total weight for Mean, else 1. Ignored targets leave zeros.
void launch_nll_loss_backward(const void* grad, const int64_t* target, const void* weight, DType dtype, int64_t M,
                              int64_t C, int64_t S, int64_t ignore_index, LossReduction red, void* gx, double* scratch,
                              cudaStream_t stream);
// (a - b)^2: None writes none_out[n]; Mean/Sum write the scalar out (sum in double).
void launch_mse_loss(const void* a, const void* b, DType dtype, int64_t n, LossReduction red, void* none_out, void* out,
                     double* scratch, cudaStream_t stream);

}  // namespace graft::cuda
