#pragma once
// Device side of the fused optimizer steps (_fused_adam_, _fused_sgd_): one thread per element
// over contiguous device arrays; the per-element math is ops/scalar_math.h's, shared with the CPU.
// Plain launch functions; they launch on `stream` and check the launch. dtype is float32 or float64.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/scalar_math.h"
#include "runtime/dtype.h"

namespace graft::cuda {

template <class T>
void launch_fused_adam(T* p, T* m, T* v, const T* g, int64_t n, const scalar_math::AdamScalars<T>& s,
                       cudaStream_t stream);
// buf may be null when !s.use_momentum.
template <class T>
void launch_fused_sgd(T* p, T* buf, const T* g, int64_t n, const scalar_math::SgdScalars<T>& s, cudaStream_t stream);

}  // namespace graft::cuda
