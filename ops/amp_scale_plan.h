#pragma once
// The device-independent half of GradScaler's ops (_amp_non_finite_check_and_unscale_,
// _amp_update_scale_): their argument checks, shared by the CPU kernels (ops/amp_scale.cpp) and the
// CUDA ones (cuda/amp_scale_cuda.cpp), and the scale update itself, a scalar formula both devices
// run (the CUDA kernel runs it on the device, so the scale never visits the host).
#include <cmath>
#include <cstdint>

#include "ops/math/device_math.h"

#ifndef __CUDACC__
#include "runtime/tensor.h"
#endif

namespace graft::kernels {

GRAFT_HOST_DEVICE inline bool amp_is_finite(float x) {
#if defined(__CUDA_ARCH__)
  return ::isfinite(x);
#else
  return std::isfinite(x);
#endif
}

// PyTorch's _amp_update_scale_: on a step with an inf/NaN gradient the scale backs off and the
// tracker restarts; after growth_interval clean steps in a row it grows, unless the grown scale
// would not be finite in float32 (then it stays), and the tracker restarts either way. The grown
// and backed-off scales are computed in double from the float32 scale and rounded once to float32.
GRAFT_HOST_DEVICE inline void amp_update_scale(float* scale, int32_t* growth_tracker, float found_inf,
                                               double growth_factor, double backoff_factor,
                                               int64_t growth_interval) {
  if (found_inf != 0.0f) {
    *scale = static_cast<float>(static_cast<double>(*scale) * backoff_factor);
    *growth_tracker = 0;
    return;
  }
  const int64_t successful = static_cast<int64_t>(*growth_tracker) + 1;
  if (successful == growth_interval) {
    const float grown = static_cast<float>(static_cast<double>(*scale) * growth_factor);
    if (amp_is_finite(grown)) *scale = grown;
    *growth_tracker = 0;
  } else {
    *growth_tracker = static_cast<int32_t>(successful);
  }
}

#ifndef __CUDACC__
// self: a floating gradient; found_inf and inv_scale: one-element float32 tensors on self's
// device. graft::Error naming the op and the offending tensor otherwise.
void check_amp_unscale(const Tensor& self, const Tensor& found_inf, const Tensor& inv_scale);
// scale: one-element float32; growth_tracker: one-element int32; found_inf: one-element float32;
// all on one device; growth_interval >= 1.
void check_amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                            int64_t growth_interval);
#endif

}  // namespace graft::kernels
