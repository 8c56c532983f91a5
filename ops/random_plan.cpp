#include "ops/random_plan.h"

#include <algorithm>
#include <limits>

#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"
#include "runtime/generator.h"

namespace graft::kernels {
namespace {

// Takes the seed, then reserves `blocks` counters: the order matters (reserve advances the offset).
RandomFill reserve(const Tensor& self, uint64_t blocks) {
  Generator& g = default_generator(self.device());
  uint64_t seed = g.seed();
  return {seed, g.reserve(blocks)};
}

uint64_t numel_of(const Tensor& self) { return static_cast<uint64_t>(self.numel()); }

// Runs the in-place fill `fill` on a fresh tensor through the kernel of the tensor's device
// directly: no dispatch mode sees it (the factory call itself was dispatched), and the fresh
// tensor's version stays 0.
template <class... A>
Tensor fill_fresh(const Op& fill, const char* factory, const Shape& sizes, DType dtype, Device device,
                  const A&... args) {
  BoxedKernel k = fill.kernels[static_cast<int>(device.type)];
  GRAFT_CHECK(k != nullptr, factory, ": no kernel for device ", device, " (", fill.name(), " has none)");
  Tensor t = new_tensor(sizes, dtype, device);
  Stack s;
  s.reserve(1 + sizeof...(A));
  s.push_back(box(t));
  (s.push_back(box(args)), ...);
  k(s);
  return t;
}

}  // namespace

RandomFill plan_normal(const Tensor& self, double std) {
  check_floating(self, "normal_");
  GRAFT_CHECK(std >= 0, "normal_: expects std >= 0.0, but found std ", std);
  uint64_t n = numel_of(self);
  return reserve(self, self.dtype() != kFloat64 ? (n + 1) / 2 : n);  // 16-bit: float32's stream, rounded
}

RandomFill plan_uniform(const Tensor& self, double from, double to) {
  check_floating(self, "uniform_");
  GRAFT_CHECK(from <= to, "uniform_: expects from <= to, but found from=", from, " > to=", to);
  uint64_t n = numel_of(self);
  return reserve(self, self.dtype() != kFloat64 ? (n + 3) / 4 : (n + 1) / 2);
}

RandomFill plan_random(const Tensor& self, int64_t low, int64_t high) {
  GRAFT_CHECK(low < high, "random_: expects low < high, but got low=", low, ", high=", high);
  GRAFT_CHECK(self.dtype() != kBool || (low >= 0 && high <= 2), "random_: range [", low, ", ", high,
              ") does not fit a bool tensor");
  return reserve(self, (numel_of(self) + 1) / 2);
}

RandomFill plan_bernoulli(const Tensor& self, double p) {
  GRAFT_CHECK(p >= 0 && p <= 1, "bernoulli_: expects 0 <= p <= 1, but got p=", p);
  return reserve(self, (numel_of(self) + 3) / 4);
}

MultinomialPlan plan_multinomial(const Tensor& self, int64_t num_samples, bool replacement) {
  check_defined(self, "multinomial", "self");
  GRAFT_CHECK(self.dim() == 1 || self.dim() == 2, "multinomial: prob_dist must be 1 or 2 dim, got ", describe(self));
  GRAFT_CHECK(is_floating(self.dtype()), "multinomial: only supports floating-point dtypes for input, got ",
              describe(self));
  GRAFT_CHECK(num_samples > 0, "multinomial: cannot sample n_sample <= 0 samples (num_samples = ", num_samples, ")");
  MultinomialPlan p;
  p.categories = self.size(-1);
  p.rows = self.dim() == 2 ? self.size(0) : 1;
  p.num_samples = num_samples;
  GRAFT_CHECK(replacement || num_samples <= p.categories,
              "multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement (num_samples = ",
              num_samples, ", ", describe(self), ")");
  GRAFT_CHECK(p.categories <= (int64_t{1} << 24), "multinomial: number of categories cannot exceed 2^24, got ",
              p.categories);
  p.by_keys = !replacement || num_samples == 1;
  p.out_sizes = self.sizes();
  p.out_sizes.back() = num_samples;
  return p;
}

void check_multinomial_scan(const MultinomialPlan& p, const MultinomialScan& s) {
  if (p.by_keys) {
    GRAFT_CHECK(s.first_invalid < 0 && s.first_infinite < 0,
                "multinomial: probability tensor contains either `inf`, `nan` or element < 0");
    GRAFT_CHECK(s.first_zero_row < 0, "multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
    return;
  }
  // A left-to-right walk meets weight e at time 2e and the end of row r at 2 (r + 1) C - 1.
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
  auto at = [](int64_t pos) { return pos < 0 ? kNever : 2 * pos; };
  const int64_t invalid = at(s.first_invalid), infinite = at(s.first_infinite);
  const int64_t zero_row = s.first_zero_row < 0 ? kNever : 2 * (s.first_zero_row + 1) * p.categories - 1;
  const int64_t first = std::min({invalid, infinite, zero_row});
  if (first == kNever) return;
  if (first == invalid)
    GRAFT_ERROR("multinomial: invalid multinomial distribution (encountering probability entry < 0)");
  if (first == infinite)
    GRAFT_ERROR("multinomial: invalid multinomial distribution (encountering probability entry = infinity or NaN)");
  GRAFT_ERROR("multinomial: invalid multinomial distribution (sum of probabilities <= 0)");
}

RandomFill reserve_multinomial(const Tensor& self, const MultinomialPlan& p) {
  const int64_t per_row = p.by_keys ? p.categories : p.num_samples;
  const uint64_t draws = static_cast<uint64_t>(p.rows) * static_cast<uint64_t>(per_row);
  return reserve(self, (draws + 1) / 2);
}

Tensor randn_any(const Shape& sizes, DType dtype, Device device) {
  GRAFT_OP_HANDLE(fill, "normal_");
  return fill_fresh(fill, "randn", sizes, dtype, device, 0.0, 1.0);
}
Tensor rand_any(const Shape& sizes, DType dtype, Device device) {
  GRAFT_OP_HANDLE(fill, "uniform_");
  return fill_fresh(fill, "rand", sizes, dtype, device, 0.0, 1.0);
}
Tensor randint_any(int64_t low, int64_t high, const Shape& sizes, DType dtype, Device device) {
  GRAFT_OP_HANDLE(fill, "random_");
  return fill_fresh(fill, "randint", sizes, dtype, device, low, high);
}

}  // namespace graft::kernels
