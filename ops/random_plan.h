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
//   multinomial    any       2      (one float64 uniform per weight when ranking keys,
//                                    per sample when inverting the cumulative sum)
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

// multinomial: self [C] or [N, C] weights -> [num_samples] or [N, num_samples] int64.
// by_keys (without replacement, or one sample, as PyTorch): weight w of row r, category c (flat
// element e = r * C + c) gets the key w / E, E = -log1p(-u) ~ Exp(1) with u the float64 uniform of
// block base + e / 2, words 2 (e % 2) and 2 (e % 2) + 1 (key 0 where w = 0); the samples are
// topk(keys, num_samples) of each row, which draws without replacement in proportion to the
// weights. Otherwise sample s of row r (e = r * num_samples + s) takes the uniform of block base +
// e / 2 the same way and returns the first category whose inclusive cumulative sum (float64, left
// to right) exceeds u * (the row's sum), or the last category of positive weight if none does.
struct MultinomialPlan {
  int64_t rows = 1, categories = 0, num_samples = 0;
  bool by_keys = true;
  Shape out_sizes;
};
// Checks what needs no values: self defined, floating, 1-D or 2-D; num_samples > 0, and at most C
// without replacement; C <= 2^24. Messages are PyTorch's, after "multinomial: ".
MultinomialPlan plan_multinomial(const Tensor& self, int64_t num_samples, bool replacement);
// What each device's scan of the weights (as float64, row-major) finds; -1 when nothing.
struct MultinomialScan {
  int64_t first_invalid = -1;   // flat position of the first weight that is not >= 0 (negative, NaN)
  int64_t first_infinite = -1;  // flat position of the first +inf
  int64_t first_zero_row = -1;  // the first row whose weights sum to 0
};
// Throws PyTorch's error for what the scan found: by_keys, any bad weight, then any zero row;
// otherwise whichever a left-to-right walk meets first (a row's sum is checked after its weights).
void check_multinomial_scan(const MultinomialPlan& p, const MultinomialScan& s);
// The generator's reservation, taken once the weights were accepted (a refused call leaves the
// generator as it was).
RandomFill reserve_multinomial(const Tensor& self, const MultinomialPlan& p);

// Kernels of randn/rand/randint for any device with normal_/uniform_/random_ kernels.
Tensor randn_any(const Shape& sizes, DType dtype, Device device);
Tensor rand_any(const Shape& sizes, DType dtype, Device device);
Tensor randint_any(int64_t low, int64_t high, const Shape& sizes, DType dtype, Device device);

}  // namespace graft::kernels
