#pragma once
// Device side of GradScaler's ops (cuda/amp_scale_cuda.cpp): raw-pointer launchers on `stream`.
// inv_scale, found_inf, scale and growth_tracker are device pointers: the host reads none of
// them, so unscaling and the scale update queue behind the backward pass without a sync.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/half_types.h"

namespace graft::cuda {

// x[0, n) *= *inv_scale (in float; double for P = double) unless *inv_scale is exactly 1;
// *found_inf = 1 if any element was inf or NaN. P: float, double, BFloat16, Half.
template <class P>
void launch_amp_unscale(P* x, int64_t n, float* found_inf, const float* inv_scale, cudaStream_t stream);
// One thread runs kernels::amp_update_scale (ops/amp_scale_plan.h) on the device.
void launch_amp_update_scale(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                             double backoff_factor, int64_t growth_interval, cudaStream_t stream);

}  // namespace graft::cuda
