#pragma once
// The device-independent half of the fused optimizer ops (_fused_adam_, _fused_sgd_): argument
// checks and the per-step scalars, shared by the CPU kernel (ops/fused_optim.cpp) and the CUDA one
// (cuda/fused_optim_cuda.cpp). The per-element math is ops/scalar_math.h's, in float for float32,
// bfloat16 and float16 parameters and in double for float64 ones.
#include <cmath>

#include "ops/ops.h"
#include "ops/scalar_math.h"

namespace graft::kernels {

// The dtype of an optimizer's state for a parameter of dtype `param`: float32 for bfloat16 and
// float16 (the kernels load the parameter to float, update in float and round it once), else the
// parameter's own.
constexpr DType fused_state_dtype(DType param) { return is_reduced_floating(param) ? DType::Float32 : param; }

// The kernels' common first half: checks every operand (defined, same shape and device as the
// parameter, the gradient of its dtype and the state of fused_state_dtype's, floating, contiguous,
// no two sharing memory; graft::Error naming the op and the tensor otherwise) and gathers the op's
// scalar arguments. momentum_buffer is checked only when momentum != 0.
ops::FusedAdamArgs plan_fused_adam(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                   const Tensor& grad, double lr, double beta1, double beta2, double weight_decay,
                                   double eps, double bias_correction1, double bias_correction2, bool decoupled);
ops::FusedSgdArgs plan_fused_sgd(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                                 double momentum, double dampening, double weight_decay, bool nesterov, bool first);

template <class T>
scalar_math::AdamScalars<T> adam_scalars(const ops::FusedAdamArgs& a) {
  return {static_cast<T>(1 - a.lr * a.weight_decay), static_cast<T>(a.weight_decay), static_cast<T>(1 - a.beta1),
          static_cast<T>(a.beta2), static_cast<T>(1 - a.beta2), static_cast<T>(std::sqrt(a.bias_correction2)),
          static_cast<T>(a.eps), static_cast<T>(-a.lr / a.bias_correction1),
          a.weight_decay != 0 && a.decoupled, a.weight_decay != 0 && !a.decoupled,
          std::abs(static_cast<T>(1 - a.beta1)) < T(0.5)};
}

template <class T>
scalar_math::SgdScalars<T> sgd_scalars(const ops::FusedSgdArgs& a) {
  return {static_cast<T>(a.weight_decay), static_cast<T>(a.momentum), static_cast<T>(1 - a.dampening),
          static_cast<T>(-a.lr), a.weight_decay != 0, a.momentum != 0, a.nesterov, a.first};
}

}  // namespace graft::kernels
