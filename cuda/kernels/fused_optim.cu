// Fused optimizer kernels (see fused_optim.h): grid-stride loops, one element per thread step.
#include "cuda/cuda_context.h"
#include "cuda/kernels/fused_optim.h"

namespace graft::cuda {
namespace {

template <class P, class T>
__global__ void fused_adam_kernel(P* __restrict__ p, T* __restrict__ m, T* __restrict__ v, const P* __restrict__ g,
                                  int64_t n, scalar_math::AdamScalars<T> s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T pi = static_cast<T>(p[i]);
    scalar_math::adam_element(pi, m[i], v[i], static_cast<T>(g[i]), s);
    p[i] = static_cast<P>(pi);
  }
}

template <class P, class T>
__global__ void fused_sgd_kernel(P* __restrict__ p, T* __restrict__ buf, const P* __restrict__ g, int64_t n,
                                 scalar_math::SgdScalars<T> s) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    T unused{};
    T pi = static_cast<T>(p[i]);
    scalar_math::sgd_element(pi, buf ? buf[i] : unused, static_cast<T>(g[i]), s);
    p[i] = static_cast<P>(pi);
  }
}

}  // namespace

template <class P, class T>
void launch_fused_adam(P* p, T* m, T* v, const P* g, int64_t n, const scalar_math::AdamScalars<T>& s,
                       cudaStream_t stream) {
  if (n == 0) return;
  fused_adam_kernel<P, T><<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(p, m, v, g, n, s);
  check_launch("fused_adam_kernel");
}

template <class P, class T>
void launch_fused_sgd(P* p, T* buf, const P* g, int64_t n, const scalar_math::SgdScalars<T>& s, cudaStream_t stream) {
  if (n == 0) return;
  fused_sgd_kernel<P, T><<<blocks_for(n), kThreadsPerBlock, 0, stream>>>(p, buf, g, n, s);
  check_launch("fused_sgd_kernel");
}

#define GRAFT_FUSED_OPTIM_INSTANTIATE(P, T)                                                                      \
  template void launch_fused_adam<P, T>(P*, T*, T*, const P*, int64_t, const scalar_math::AdamScalars<T>&,      \
                                        cudaStream_t);                                                          \
  template void launch_fused_sgd<P, T>(P*, T*, const P*, int64_t, const scalar_math::SgdScalars<T>&, cudaStream_t);
GRAFT_FUSED_OPTIM_INSTANTIATE(float, float)
GRAFT_FUSED_OPTIM_INSTANTIATE(double, double)
GRAFT_FUSED_OPTIM_INSTANTIATE(BFloat16, float)
GRAFT_FUSED_OPTIM_INSTANTIATE(Half, float)
#undef GRAFT_FUSED_OPTIM_INSTANTIATE

}  // namespace graft::cuda
