#pragma once
// The device-independent half of the fused optimizer ops (_fused_adam_, _fused_sgd_): argument
// checks and the per-step scalars, shared by the CPU kernel (ops/fused_optim.cpp) and the CUDA one
// (cuda/fused_optim_cuda.cpp). The per-element math is ops/scalar_math.h's.
#include <cmath>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/scalar_math.h"

namespace graft::kernels {

// Every tensor of one update: defined, same shape, dtype and device as the parameter (the first),
// floating, contiguous, and no two sharing memory. Throws graft::Error naming the op and tensor.
void check_fused_update(const char* op, const std::vector<std::pair<const char*, const Tensor*>>& tensors);

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

// The argument lists of the two ops, unboxed.
inline ops::FusedAdamArgs adam_args(double lr, double beta1, double beta2, double weight_decay, double eps,
                                    double bc1, double bc2, bool decoupled) {
  return {lr, beta1, beta2, weight_decay, eps, bc1, bc2, decoupled};
}
inline ops::FusedSgdArgs sgd_args(double lr, double momentum, double dampening, double weight_decay, bool nesterov,
                                  bool first) {
  return {lr, momentum, dampening, weight_decay, nesterov, first};
}

}  // namespace graft::kernels
