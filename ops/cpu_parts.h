#pragma once
// What the CPU supplies to the kernels a family's plan shares across devices. The kernels
// themselves are generated (codegen/ops/*.yaml, `shared:`) into ops/cpu_registration.cpp, over
// these parts; cuda/cuda_parts.h holds the CUDA ones, with the same names and _cuda.
#include "ops/conv_pool_params.h"
#include "ops/matmul_plan.h"

namespace graft::kernels {

// ops/linalg.cpp: oneDNN's matmul as the core of mm, bmm, matmul, linear and mm_accumulate_.
extern const MatmulBackend kCpuMatmul;

// ops/pool.cpp: the max-pool window loop (NCHW and NHWC) that run_max_pool2d drives.
void max_pool_fill_cpu(const PoolParams& p, const Tensor& x, const Tensor& out, const Tensor* ind);

}  // namespace graft::kernels
