// _fused_adam_ and _fused_sgd_ on CUDA: the checks and scalars of ops/fused_optim_plan.h, as on the
// CPU; kernels in cuda/kernels/fused_optim.cu. bfloat16/float16 parameters have float32 state and
// compute in float (native: no float fallback).
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/fused_optim.h"
#include "ops/fused_optim_plan.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {
// f.template operator()<P, T>() with P the parameter's storage type and T its compute/state type.
template <class F>
void dispatch_param(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float, float>();
    case DType::Float64: return f.template operator()<double, double>();
    case DType::BFloat16: return f.template operator()<BFloat16, float>();
    case DType::Float16: return f.template operator()<Half, float>();
    default: break;
  }
  GRAFT_ERROR(op, ": expected a floating point parameter (float32, float64, bfloat16 or float16), got ", t);
}
}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

void fused_adam_cuda(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                    const Tensor& grad, double lr, double beta1, double beta2, double weight_decay,
                                    double eps, double bc1, double bc2, bool decoupled) {
  auto args = kernels::plan_fused_adam(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, weight_decay, eps, bc1, bc2,
                                      decoupled);
  DeviceGuard guard(param.device().index);
  dispatch_param(param.dtype(), "_fused_adam_", [&]<class P, class T>() {
    launch_fused_adam<P, T>(param.data_ptr<P>(), exp_avg.data_ptr<T>(), exp_avg_sq.data_ptr<T>(), grad.data_ptr<P>(),
                            param.numel(), kernels::adam_scalars<T>(args), current_stream());
  });
}

void fused_sgd_cuda(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                                   double momentum, double dampening, double weight_decay, bool nesterov, bool first) {
  auto args = kernels::plan_fused_sgd(param, momentum_buffer, grad, lr, momentum, dampening, weight_decay, nesterov,
                                     first);
  DeviceGuard guard(param.device().index);
  dispatch_param(param.dtype(), "_fused_sgd_", [&]<class P, class T>() {
    launch_fused_sgd<P, T>(param.data_ptr<P>(), momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr,
                           grad.data_ptr<P>(), param.numel(), kernels::sgd_scalars<T>(args), current_stream());
  });
}

}  // namespace graft::cuda
