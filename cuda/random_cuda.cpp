// Random fills on CUDA from the device's default generator (runtime/generator.h).
//
// A fill takes the generator's seed and its Philox blocks from the shared plan (ops/random_plan.h:
// the same reservation as the CPU fill of the same op), then computes element i from counter
// base + i / per_block alone. So the numbers depend only on (seed, offset):
// the same seed gives the same numbers (on either device), and restoring a generator's state
// (checkpoint's RNG replay through get_state/set_state) replays them.
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/random.h"
#include "ops/kernel_utils.h"
#include "ops/random_plan.h"
#include "runtime/dispatcher.h"

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

}  // namespace

// The factories are device-independent (allocate, then this device's fill kernel).

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor normal_cuda(const Tensor& self, double mean, double std) {
  const kernels::RandomFill f = kernels::plan_normal(self, std);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_normal(self.dtype(), out, count, f.seed, f.base, mean, std, s);
  });
}

Tensor uniform_cuda(const Tensor& self, double from, double to) {
  const kernels::RandomFill f = kernels::plan_uniform(self, from, to);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_uniform(self.dtype(), out, count, f.seed, f.base, from, to, s);
  });
}

Tensor random_cuda(const Tensor& self, int64_t low, int64_t high) {
  const kernels::RandomFill f = kernels::plan_random(self, low, high);
  auto range = static_cast<uint64_t>(high - low);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_random_int(self.dtype(), out, count, f.seed, f.base, low, range, s);
  });
}

Tensor bernoulli_cuda(const Tensor& self, double p) {
  const kernels::RandomFill f = kernels::plan_bernoulli(self, p);
  return fill_dense(self, [&](void* out, int64_t count, cudaStream_t s) {
    launch_bernoulli(self.dtype(), out, count, f.seed, f.base, p, s);
  });
}

}  // namespace graft::cuda
