// Fused optimizer kernels (see fused_optim.h): grid-stride loops, one element per thread step.
#include "cuda/cuda_context.h"
#include "cuda/kernels/fused_optim.h"

namespace graft::cuda {
namespace {

template <class T>
__global__ void fused_adam_kernel(T* __restrict__ p, T* __restrict__ m, T* __restrict__ v, const T* __restrict__ g,
                                  int64_t n, scalar_math::AdamScalars<T> s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x)
    scalar_math::adam_element(p[i], m[i], v[i], g[i], s);
}

template <class T>
__global__ void fused_sgd_kernel(T* __restrict__ p, T* __restrict__ buf, const T* __restrict__ g, int64_t n,
                                 scalar_math::SgdScalars<T> s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T unused{};
    scalar_math::sgd_element(p[i], buf ? buf[i] : unused, g[i], s);
  }
}

}  // namespace

template <class T>
void launch_fused_adam(T* p, T* m, T* v, const T* g, int64_t n, const scalar_math::AdamScalars<T>& s,
                       cudaStream_t stream) {
  if (n == 0) return;
  fused_adam_kernel<T><<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(p, m, v, g, n, s);
  check_launch("fused_adam_kernel");
}

template <class T>
void launch_fused_sgd(T* p, T* buf, const T* g, int64_t n, const scalar_math::SgdScalars<T>& s, cudaStream_t stream) {
  if (n == 0) return;
  fused_sgd_kernel<T><<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(p, buf, g, n, s);
  check_launch("fused_sgd_kernel");
}

template void launch_fused_adam<float>(float*, float*, float*, const float*, int64_t,
                                       const scalar_math::AdamScalars<float>&, cudaStream_t);
template void launch_fused_adam<double>(double*, double*, double*, const double*, int64_t,
                                        const scalar_math::AdamScalars<double>&, cudaStream_t);
template void launch_fused_sgd<float>(float*, float*, const float*, int64_t, const scalar_math::SgdScalars<float>&,
                                      cudaStream_t);
template void launch_fused_sgd<double>(double*, double*, const double*, int64_t,
                                       const scalar_math::SgdScalars<double>&, cudaStream_t);

}  // namespace graft::cuda
