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

// Weights as contiguous float64 on the device, the scan (copied back: the host waits, as PyTorch
// does for its checks), then the rules of ops/random_plan.h; the keys' selection is this device's
// topk kernel.
Tensor multinomial_cuda(const Tensor& self, int64_t num_samples, bool replacement) {
  const kernels::MultinomialPlan p = kernels::plan_multinomial(self, num_samples, replacement);
  if (p.rows == 0) return kernels::new_tensor(p.out_sizes, kInt64, self.device());
  DeviceGuard guard(self.device().index);
  cudaStream_t stream = current_stream();
  Tensor w = kernels::contiguous_as(self, kFloat64);
  const auto* wd = static_cast<const double*>(w.data_ptr());
  Tensor cum = p.by_keys ? Tensor() : kernels::new_tensor(w.sizes(), kFloat64, self.device());
  Tensor found = kernels::new_tensor({3}, kInt64, self.device());
  auto* fd = static_cast<unsigned long long*>(found.data_ptr());
  GRAFT_CUDA_CHECK(cudaMemsetAsync(fd, 0xff, 3 * sizeof(unsigned long long), stream));
  launch_multinomial_scan(wd, p.rows, p.categories, cum.defined() ? static_cast<double*>(cum.data_ptr()) : nullptr,
                          fd, stream);
  unsigned long long host[3] = {};
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(host, fd, sizeof(host), cudaMemcpyDeviceToHost, stream));
  GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  auto pos = [](unsigned long long v) { return v == ~0ull ? int64_t{-1} : static_cast<int64_t>(v); };
  kernels::check_multinomial_scan(p, {pos(host[0]), pos(host[1]), pos(host[2])});
  const kernels::RandomFill f = kernels::reserve_multinomial(self, p);
  if (p.by_keys) {
    Tensor keys = kernels::new_tensor(w.sizes(), kFloat64, self.device());
    launch_multinomial_keys(wd, static_cast<double*>(keys.data_ptr()), keys.numel(), f.seed, f.base, stream);
    return topk_cuda(keys, num_samples, -1, true, true)[1];
  }
  Tensor out = kernels::new_tensor(p.out_sizes, kInt64, self.device());
  launch_multinomial_draw(static_cast<const double*>(cum.data_ptr()), p.rows, p.categories, num_samples, f.seed,
                          f.base, static_cast<int64_t*>(out.data_ptr()), stream);
  return out;
}

}  // namespace graft::cuda
