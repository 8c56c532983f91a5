// Random fills on CPU from the counter-based generator (runtime/generator.h).
//
// Element i of a fill depends only on (seed, first reserved counter, i): the mapping below is the
// contract the CUDA kernels reproduce, so the same seed gives the same numbers on either device.
// bfloat16 and float16 take float32's numbers, rounded once.
//   uniform f32:  block base + i/4, word i%4
//   uniform f64:  block base + i/2, words 2(i%2), 2(i%2)+1
//   normal f32:   block base + i/2, words 2(i%2), 2(i%2)+1 -> Box-Muller (cos branch)
//   normal f64:   block base + i,   words (0,1) and (2,3)  -> Box-Muller (cos branch)
//   random int:   block base + i/2, words 2(i%2), 2(i%2)+1 as 64 bits, modulo the range
//   multinomial:  block base + i/2, words 2(i%2), 2(i%2)+1 as a float64 uniform (ops/random_plan.h)
#include <cmath>
#include <limits>
#include <numbers>
#include <vector>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/random_plan.h"
#include "ops/scalar_math.h"
#include "runtime/dispatcher.h"
#include "runtime/generator.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

// Fills a contiguous tensor through f(i) -> value, then copies into `self` if it is strided.
template <class T, class F>
void fill_elements(const Tensor& self, F&& f) {
  Tensor dst = self.is_contiguous() ? self : new_tensor(self.sizes(), self.dtype(), self.device());
  T* d = static_cast<T*>(dst.data_ptr());
  parallel_for(0, dst.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) d[i] = f(i);
  });
  if (!dst.is_same(self)) strided_copy(self, dst, dst.strides());
}

inline double box_muller(double u1, double u2) {
  return std::sqrt(-2.0 * std::log1p(-u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor normal_cpu(const Tensor& self, double mean, double std) {
  const RandomFill f = plan_normal(self, std);
  const uint64_t seed = f.seed, base = f.base;
  if (self.dtype() != kFloat64) {
    dispatch_float_or_reduced(self.dtype(), "normal_", [&]<class T>() {
      fill_elements<T>(self, [&](int64_t i) {
        auto w = philox4x32(seed, base + static_cast<uint64_t>(i) / 2);
        int k = 2 * static_cast<int>(i % 2);
        double z = box_muller(uint_to_unit_float(w[k]), uint_to_unit_float(w[k + 1]));
        return T(static_cast<float>(mean + std * z));
      });
    });
  } else {
    fill_elements<double>(self, [&](int64_t i) {
      auto w = philox4x32(seed, base + static_cast<uint64_t>(i));
      return mean + std * box_muller(uint_to_unit_double(w[0], w[1]), uint_to_unit_double(w[2], w[3]));
    });
  }
  return self;
}

Tensor uniform_cpu(const Tensor& self, double from, double to) {
  const RandomFill f = plan_uniform(self, from, to);
  const uint64_t seed = f.seed, base = f.base;
  if (self.dtype() != kFloat64) {
    dispatch_float_or_reduced(self.dtype(), "uniform_", [&]<class T>() {
      fill_elements<T>(self, [&](int64_t i) {
        auto w = philox4x32(seed, base + static_cast<uint64_t>(i) / 4);
        return T(static_cast<float>(from + (to - from) * uint_to_unit_float(w[i % 4])));
      });
    });
  } else {
    fill_elements<double>(self, [&](int64_t i) {
      auto w = philox4x32(seed, base + static_cast<uint64_t>(i) / 2);
      int k = 2 * static_cast<int>(i % 2);
      return from + (to - from) * uint_to_unit_double(w[k], w[k + 1]);
    });
  }
  return self;
}

Tensor random_cpu(const Tensor& self, int64_t low, int64_t high) {
  const RandomFill f = plan_random(self, low, high);
  const uint64_t seed = f.seed, base = f.base;
  auto range = static_cast<uint64_t>(high - low);
  dispatch_all_dtypes(self.dtype(), "random_", [&]<class T>() {
    fill_elements<T>(self, [&](int64_t i) {
      auto w = philox4x32(seed, base + static_cast<uint64_t>(i) / 2);
      int k = 2 * static_cast<int>(i % 2);
      uint64_t v = (static_cast<uint64_t>(w[k]) << 32) | w[k + 1];
      const int64_t r = low + static_cast<int64_t>(v % range);
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) return T(static_cast<float>(r));
      else return static_cast<T>(r);
    });
  });
  return self;
}

Tensor bernoulli_cpu(const Tensor& self, double p) {
  const RandomFill f = plan_bernoulli(self, p);
  const uint64_t seed = f.seed, base = f.base;
  dispatch_all_dtypes(self.dtype(), "bernoulli_", [&]<class T>() {
    fill_elements<T>(self, [&](int64_t i) {
      auto w = philox4x32(seed, base + static_cast<uint64_t>(i) / 4);
      const bool hit = uint_to_unit_float(w[i % 4]) < p;
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) return T(hit ? 1.0f : 0.0f);
      else return static_cast<T>(hit ? 1 : 0);
    });
  });
  return self;
}

// Weights read as float64 (16-bit ones exactly), then the rules of ops/random_plan.h. The keys'
// selection is this device's topk kernel, so ties (only zero weights, in practice) come out in
// its order.
Tensor multinomial_cpu(const Tensor& self, int64_t num_samples, bool replacement) {
  const MultinomialPlan p = plan_multinomial(self, num_samples, replacement);
  const int64_t C = p.categories;
  Tensor w = contiguous_cpu(self, kFloat64);
  const double* wd = static_cast<const double*>(w.data_ptr());
  // The scan (row-major, as check_multinomial_scan reads it), keeping each row's cumulative sums
  // when the samples invert them.
  std::vector<double> cum(p.by_keys ? 0 : static_cast<size_t>(p.rows * C));
  MultinomialScan scan;
  for (int64_t r = 0; r < p.rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < C; ++c) {
      const int64_t e = r * C + c;
      const double v = wd[e];
      if (!(v >= 0) && scan.first_invalid < 0) scan.first_invalid = e;
      if (v == std::numeric_limits<double>::infinity() && scan.first_infinite < 0) scan.first_infinite = e;
      sum += v;
      if (!p.by_keys) cum[e] = sum;
    }
    if (sum == 0 && scan.first_zero_row < 0) scan.first_zero_row = r;
  }
  check_multinomial_scan(p, scan);
  const RandomFill f = reserve_multinomial(self, p);
  const uint64_t seed = f.seed, base = f.base;
  auto uniform = [&](int64_t e) {
    auto b = philox4x32(seed, base + static_cast<uint64_t>(e) / 2);
    const int k = 2 * static_cast<int>(e % 2);
    return uint_to_unit_double(b[k], b[k + 1]);
  };
  if (p.by_keys) {
    Tensor keys = new_tensor(w.sizes(), kFloat64, self.device());
    double* kd = static_cast<double*>(keys.data_ptr());
    parallel_for(0, keys.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) kd[i] = scalar_math::multinomial_key(wd[i], uniform(i));
    });
    return topk_cpu(keys, num_samples, -1, true, true)[1];
  }
  Tensor out = new_tensor(p.out_sizes, kInt64, self.device());
  int64_t* od = static_cast<int64_t*>(out.data_ptr());
  parallel_for(0, p.rows * num_samples, kGrainSize / 16, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      od[i] = scalar_math::multinomial_pick(cum.data() + (i / num_samples) * C, C, uniform(i));
  });
  return out;
}

}  // namespace kernels

}  // namespace graft
