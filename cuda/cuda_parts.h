#pragma once
// What CUDA supplies to the kernels a family's plan shares across devices (ops/cpu_parts.h has
// the CPU's). The kernels are generated (codegen/ops/*.yaml, `shared:`) into
// cuda/cuda_registration.cpp, over these parts.
#include "ops/conv_pool_params.h"
#include "ops/matmul_plan.h"

namespace graft::cuda {

// cuda/linalg_cuda.cpp: cuBLAS (and the int64 loop) as the core of the matmul family.
extern const kernels::MatmulBackend kCudaMatmul;

// cuda/pool_cuda.cpp: the max-pool window kernel that run_max_pool2d drives.
void max_pool_fill_cuda(const kernels::PoolParams& p, const Tensor& x, const Tensor& out, const Tensor* ind);

}  // namespace graft::cuda
