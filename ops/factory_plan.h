#pragma once
// The device-independent half of the factories that compute their own size (ops/factory.cpp on
// the CPU, cuda/factory_cuda.cpp on CUDA).
#include <cstdint>

namespace graft::kernels {

// The checks of arange(start, end, step) and its length ceil((end - start) / step), as PyTorch.
int64_t plan_arange(double start, double end, double step);

}  // namespace graft::kernels
