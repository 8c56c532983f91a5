// Random fills on CUDA from the device's default generator (runtime/generator.h).
//
// A fill takes the generator's seed and reserves its Philox blocks exactly as the CPU fill of the
// same op does (ops/random.cpp: one counter per block of 4, 2 or 1 elements), then computes
// element i from counter base + i / per_block alone. So the numbers depend only on (seed, offset):
// the same seed gives the same numbers (on either device), and restoring a generator's state
// (checkpoint's RNG replay through get_state/set_state) replays them.
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/random.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"
#include "runtime/generator.h"

namespace graft::cuda {
namespace {

// Runs fill(dense_out, n, stream) into self, through a dense buffer when self is strided.
template <class Fill>
const Tensor& fill_dense(const Tensor& self, const Fill& fill) {
  if (self.numel() == 0) return self;
  DeviceGuard guard(self.device().index);
  Tensor dst = self.is_contiguous() ? self : kernels::new_tensor(self.sizes(), self.dtype(), self.device());
  fill(dst.data_ptr(), dst.numel(), current_stream());
  if (!dst.is_same(self)) copy_on_device(self, dst);
  return self;
}

Tensor normal_cuda(const Tensor& self, double mean, double std) {
  kernels::check_floating(self, "normal_");
  GRAFT_CHECK(std >= 0, "normal_: expects std >= 0.0, but found std ", std);
  auto n = static_cast<uint64_t>(self.numel());
  Generator& g = default_generator(self.device());
  uint64_t seed = g.seed();
  uint64_t base = g.reserve(self.dtype() == kFloat32 ? (n + 1) / 2 : n);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_normal(self.dtype(), out, count, seed, base, mean, std, s);
  });
}

Tensor uniform_cuda(const Tensor& self, double from, double to) {
  kernels::check_floating(self, "uniform_");
  GRAFT_CHECK(from <= to, "uniform_: expects from <= to, but found from=", from, " > to=", to);
  auto n = static_cast<uint64_t>(self.numel());
  Generator& g = default_generator(self.device());
  uint64_t seed = g.seed();
  uint64_t base = g.reserve(self.dtype() == kFloat32 ? (n + 3) / 4 : (n + 1) / 2);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_uniform(self.dtype(), out, count, seed, base, from, to, s);
  });
}

Tensor random_cuda(const Tensor& self, int64_t low, int64_t high) {
  GRAFT_CHECK(low < high, "random_: expects low < high, but got low=", low, ", high=", high);
  GRAFT_CHECK(self.dtype() != kBool || (low >= 0 && high <= 2), "random_: range [", low, ", ", high,
              ") does not fit a bool tensor");
  auto n = static_cast<uint64_t>(self.numel());
  Generator& g = default_generator(self.device());
  uint64_t seed = g.seed();
  uint64_t base = g.reserve((n + 1) / 2);
  auto range = static_cast<uint64_t>(high - low);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_random_int(self.dtype(), out, count, seed, base, low, range, s);
  });
}

Tensor bernoulli_cuda(const Tensor& self, double p) {
  GRAFT_CHECK(p >= 0 && p <= 1, "bernoulli_: expects 0 <= p <= 1, but got p=", p);
  auto n = static_cast<uint64_t>(self.numel());
  Generator& g = default_generator(self.device());
  uint64_t seed = g.seed();
  uint64_t base = g.reserve((n + 3) / 4);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_bernoulli(self.dtype(), out, count, seed, base, p, s);
  });
}

Tensor new_on(const Shape& sizes, DType dtype, Device device) {
  DeviceGuard guard(device.index);
  return kernels::new_tensor(sizes, dtype, device);
}

Tensor randn_cuda(const Shape& sizes, DType dtype, Device device) {
  return normal_cuda(new_on(sizes, dtype, device), 0, 1);
}
Tensor rand_cuda(const Shape& sizes, DType dtype, Device device) {
  return uniform_cuda(new_on(sizes, dtype, device), 0, 1);
}
Tensor randint_cuda(int64_t low, int64_t high, const Shape& sizes, DType dtype, Device device) {
  return random_cuda(new_on(sizes, dtype, device), low, high);
}

}  // namespace

GRAFT_KERNEL("randn", CUDA, randn_cuda);
GRAFT_KERNEL("rand", CUDA, rand_cuda);
GRAFT_KERNEL("randint", CUDA, randint_cuda);
GRAFT_KERNEL("normal_", CUDA, normal_cuda);
GRAFT_KERNEL("uniform_", CUDA, uniform_cuda);
GRAFT_KERNEL("random_", CUDA, random_cuda);
GRAFT_KERNEL("bernoulli_", CUDA, bernoulli_cuda);

}  // namespace graft::cuda
