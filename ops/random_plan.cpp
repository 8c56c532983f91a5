#include "ops/random_plan.h"

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
