// GradScaler's kernels (see amp_scale.h): a grid-stride unscale that raises found_inf, and the
// one-thread scale update over the formula the CPU runs (ops/amp_scale_plan.h).
#include <type_traits>

#include "cuda/cuda_context.h"
#include "cuda/kernels/amp_scale.h"
#include "ops/amp_scale_plan.h"

namespace graft::cuda {
namespace {

template <class P>
__global__ void amp_unscale_kernel(P* __restrict__ x, int64_t n, float* found_inf, const float* inv_scale) {
  using T = std::conditional_t<std::is_same_v<P, double>, double, float>;
  const T inv = static_cast<T>(*inv_scale);
  bool bad = false;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const T v = static_cast<T>(x[i]);
    bad |= !isfinite(v);
    if (inv != T(1)) x[i] = static_cast<P>(v * inv);
  }
  // Every writer stores the same 1.0f, so plain stores need no atomics.
  if (bad) *found_inf = 1.0f;
}

__global__ void amp_update_scale_kernel(float* scale, int32_t* growth_tracker, const float* found_inf,
                                        double growth_factor, double backoff_factor, int64_t growth_interval) {
  kernels::amp_update_scale(scale, growth_tracker, *found_inf, growth_factor, backoff_factor, growth_interval);
}

}  // namespace

template <class P>
void launch_amp_unscale(P* x, int64_t n, float* found_inf, const float* inv_scale, cudaStream_t stream) {
  if (n == 0) return;
  amp_unscale_kernel<P><<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(x, n, found_inf, inv_scale);
  check_launch("amp_unscale_kernel");
}

void launch_amp_update_scale(float* scale, int32_t* growth_tracker, const float* found_inf, double growth_factor,
                             double backoff_factor, int64_t growth_interval, cudaStream_t stream) {
  amp_update_scale_kernel<<<1, 1, 0, stream>>>(scale, growth_tracker, found_inf, growth_factor, backoff_factor,
                                               growth_interval);
  check_launch("amp_update_scale_kernel");
}

template void launch_amp_unscale<float>(float*, int64_t, float*, const float*, cudaStream_t);
template void launch_amp_unscale<double>(double*, int64_t, float*, const float*, cudaStream_t);
template void launch_amp_unscale<BFloat16>(BFloat16*, int64_t, float*, const float*, cudaStream_t);
template void launch_amp_unscale<Half>(Half*, int64_t, float*, const float*, cudaStream_t);

}  // namespace graft::cuda
