#pragma once
// The device-independent half of the random fills (ops/random.cpp on the CPU,
// cuda/random_cuda.cpp on CUDA): argument checks, and the reservation of the generator's Philox
// counters. The reservation is part of the numbers' contract: element i of a fill is computed from
// (seed, base + i / per_block) alone, so both devices must reserve exactly the same blocks for the
// same fill, and a generator state restored by checkpoint's RNG replay must reserve them again.
//
//   fill           dtype     elements per Philox block
//   normal_        float32   2      (one Box-Muller pair from 4 words)
//   normal_        float64   1
//   uniform_       float32   4
//   uniform_       float64   2
//   random_        any       2      (64 bits per element)
//   bernoulli_     any       4
//
// The factories randn, rand and randint are the same on every device (allocate, then run that
// device's in-place fill kernel on the fresh tensor), so they are defined here once and each
// device registers them.
#include <cstdint>

#include "runtime/tensor.h"

namespace graft::kernels {

struct RandomFill {
  uint64_t seed;  // the generator's seed
  uint64_t base;  // first reserved Philox counter
};

RandomFill plan_normal(const Tensor& self, double std);
RandomFill plan_uniform(const Tensor& self, double from, double to);
RandomFill plan_random(const Tensor& self, int64_t low, int64_t high);
RandomFill plan_bernoulli(const Tensor& self, double p);

// Kernels of randn/rand/randint for any device with normal_/uniform_/random_ kernels.
Tensor randn_any(const Shape& sizes, DType dtype, Device device);
Tensor rand_any(const Shape& sizes, DType dtype, Device device);
Tensor randint_any(int64_t low, int64_t high, const Shape& sizes, DType dtype, Device device);

}  // namespace graft::kernels
