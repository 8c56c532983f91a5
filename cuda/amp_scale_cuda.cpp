// GradScaler's ops on CUDA: the checks of ops/amp_scale_plan.h, as on the CPU, then kernels in
// cuda/kernels/amp_scale.cu that read the scale and write found_inf on the device (no host sync:
// GradScaler::step reads found_inf once, to decide whether to skip).
#include "cuda/cuda_context.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/amp_scale.h"
#include "ops/amp_scale_plan.h"
#include "ops/kernel_utils.h"

namespace graft::cuda {

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

void amp_non_finite_check_and_unscale_cuda(const Tensor& self, const Tensor& found_inf, const Tensor& inv_scale) {
  kernels::check_amp_unscale(self, found_inf, inv_scale);
  DeviceGuard guard(self.device().index);
  // A strided gradient goes through a contiguous copy, written back (as on the CPU).
  Tensor x = self.is_contiguous() ? self : ops::contiguous(self);
  auto run = [&]<class P>() {
    launch_amp_unscale<P>(x.data_ptr<P>(), x.numel(), found_inf.data_ptr<float>(), inv_scale.data_ptr<float>(),
                          current_stream());
  };
  if (self.dtype() == DType::Float64)
    run.template operator()<double>();
  else
    kernels::dispatch_float_or_reduced(self.dtype(), "_amp_non_finite_check_and_unscale_", run);
  if (!x.is_same(self)) ops::copy_(const_cast<Tensor&>(self), x);
}

Tensor amp_update_scale_cuda(const Tensor& self, const Tensor& growth_tracker, const Tensor& found_inf,
                             double scale_growth_factor, double scale_backoff_factor, int64_t growth_interval) {
  kernels::check_amp_update_scale(self, growth_tracker, found_inf, growth_interval);
  DeviceGuard guard(self.device().index);
  launch_amp_update_scale(self.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), found_inf.data_ptr<float>(),
                          scale_growth_factor, scale_backoff_factor, growth_interval, current_stream());
  return self;
}

}  // namespace graft::cuda
