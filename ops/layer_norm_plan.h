#pragma once
// The device-independent half of layer_norm and layer_norm_backward: argument checks and the
// [M, N] geometry (M rows, the leading dims, of N normalised elements). ops/layer_norm.cpp (CPU)
// and cuda/layer_norm_cuda.cpp supply only the arithmetic.
#include <cstdint>

#include "runtime/tensor.h"

namespace graft::kernels {

struct NormLayout {
  int64_t M = 1, N = 1;
  Shape leading;  // shape of mean and rstd
};

// x's trailing dims must equal normalized_shape; weight and bias (optional) have that shape and
// x's dtype, or float32 when x is bfloat16/float16 (PyTorch's mixed layer_norm).
NormLayout plan_layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                           const char* op);
// Also: grad_output has x's shape; mean and rstd have M elements.
NormLayout plan_layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Shape& normalized_shape,
                                    const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bias,
                                    const char* op);

}  // namespace graft::kernels
