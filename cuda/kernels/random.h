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

// multinomial (the rules: ops/random_plan.h), over w: contiguous float64 weights [rows, C].
// The scan, one thread per row, left to right: found[0] = min flat position of a weight that is
// not >= 0, found[1] = min flat position of a +inf, found[2] = min row whose sum is 0 (each preset
// to ~0ull by the caller, left there when nothing is found); cum (when not null) gets each row's
// inclusive cumulative sums, added left to right as on the CPU.
void launch_multinomial_scan(const double* w, int64_t rows, int64_t C, double* cum, unsigned long long* found,
                             cudaStream_t stream);
// keys[e] = scalar_math::multinomial_key(w[e], the uniform of element e) for e < n.
void launch_multinomial_keys(const double* w, double* keys, int64_t n, uint64_t seed, uint64_t base,
                             cudaStream_t stream);
// out[r * num_samples + s] = scalar_math::multinomial_pick(cum row r, the uniform of that element).
void launch_multinomial_draw(const double* cum, int64_t rows, int64_t C, int64_t num_samples, uint64_t seed,
                             uint64_t base, int64_t* out, cudaStream_t stream);

}  // namespace graft::cuda
