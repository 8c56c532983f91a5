#pragma once
// Device side of the fused optimizer steps (_fused_adam_, _fused_sgd_): one thread per element
// over contiguous device arrays; the per-element math is ops/scalar_math.h's, shared with the CPU.
// Plain launch functions; they launch on `stream` and check the launch. P is the parameter's (and
// gradient's) storage type, T the compute and state type: (float, float), (double, double), and
// (BFloat16, float) / (Half, float), where each element is loaded to float, updated and rounded
// once (float32 state for 16-bit parameters, ops/fused_optim_plan.h).
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/scalar_math.h"
#include "runtime/dtype.h"

namespace graft::cuda {

template <class P, class T>
void launch_fused_adam(P* p, T* m, T* v, const P* g, int64_t n, const scalar_math::AdamScalars<T>& s,
                       cudaStream_t stream);
// buf may be null when !s.use_momentum.
template <class P, class T>
void launch_fused_sgd(P* p, T* buf, const P* g, int64_t n, const scalar_math::SgdScalars<T>& s, cudaStream_t stream);

}  // namespace graft::cuda
