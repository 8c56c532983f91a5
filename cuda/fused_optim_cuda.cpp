// _fused_adam_ and _fused_sgd_ on CUDA: the checks and scalars of ops/fused_optim_plan.h, as on the
// CPU; kernels in cuda/kernels/fused_optim.cu.
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/fused_optim.h"
#include "ops/fused_optim_plan.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

void fused_adam_cuda(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                    const Tensor& grad, double lr, double beta1, double beta2, double weight_decay,
                                    double eps, double bc1, double bc2, bool decoupled) {
  auto args = kernels::plan_fused_adam(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, weight_decay, eps, bc1, bc2,
                                      decoupled);
  DeviceGuard guard(param.device().index);
  kernels::dispatch_floating(param.dtype(), "_fused_adam_", [&]<class T>() {
    launch_fused_adam<T>(param.data_ptr<T>(), exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(), grad.data_ptr<T>(),
                         param.numel(), kernels::adam_scalars<T>(args), current_stream());
  });
}

void fused_sgd_cuda(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                                   double momentum, double dampening, double weight_decay, bool nesterov, bool first) {
  auto args = kernels::plan_fused_sgd(param, momentum_buffer, grad, lr, momentum, dampening, weight_decay, nesterov,
                                     first);
  DeviceGuard guard(param.device().index);
  kernels::dispatch_floating(param.dtype(), "_fused_sgd_", [&]<class T>() {
    launch_fused_sgd<T>(param.data_ptr<T>(), momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr,
                        grad.data_ptr<T>(), param.numel(), kernels::sgd_scalars<T>(args), current_stream());
  });
}

}  // namespace graft::cuda
