#pragma once
// Launchers for the random fills on the device. Each writes a dense out[n] from Philox4x32-10
// blocks (seed, base + j), with exactly the element <-> counter mapping of the CPU fills
// (ops/random.cpp), so a seed gives the same numbers on either device.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

// float32: 4 elements per block; float64: 2. Floating dtypes only.
void launch_uniform(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, double from, double to,
                    cudaStream_t stream);
// float32: 2 elements per block; float64: 1 (Box-Muller, cos branch). Floating dtypes only.
void launch_normal(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, double mean, double std,
                   cudaStream_t stream);
// low + (64 random bits % range), 2 elements per block, any dtype.
void launch_random_int(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, int64_t low, uint64_t range,
                       cudaStream_t stream);
// unit float < p, 4 elements per block, any dtype.
void launch_bernoulli(DType dtype, void* out, int64_t n, uint64_t seed, uint64_t base, double p, cudaStream_t stream);

}  // namespace graft::cuda
