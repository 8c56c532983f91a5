// See bench_support.h.
#include <cuda_runtime.h>

#include <chrono>

#include "cuda/bench_support.h"
#include "cuda/cuda_context.h"

namespace graft::cuda::bench {

void set_allow_tf32(bool allow) { graft::cuda::set_allow_tf32(allow); }
bool allow_tf32() { return graft::cuda::allow_tf32(); }

double raw_churn_ms(const std::vector<ChurnStep>& steps, int slots, int device) {
  DeviceGuard guard(device);
  std::vector<void*> held(static_cast<size_t>(slots), nullptr);
  GRAFT_CUDA_CHECK(cudaDeviceSynchronize());
  auto t0 = std::chrono::steady_clock::now();
  for (const auto& s : steps) {
    void*& p = held[static_cast<size_t>(s.slot)];
    if (s.bytes > 0) {
      GRAFT_CHECK(p == nullptr, "raw_churn_ms: slot ", s.slot, " is already allocated");
      GRAFT_CUDA_CHECK(cudaMalloc(&p, static_cast<size_t>(s.bytes)));
    } else if (p != nullptr) {
      GRAFT_CUDA_CHECK(cudaFree(p));
      p = nullptr;
    }
  }
  for (void*& p : held)
    if (p != nullptr) {
      GRAFT_CUDA_CHECK(cudaFree(p));
      p = nullptr;
    }
  GRAFT_CUDA_CHECK(cudaDeviceSynchronize());
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace graft::cuda::bench
