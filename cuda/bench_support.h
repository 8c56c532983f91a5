#pragma once
// What `graft bench --device cuda` and the CPU-vs-CUDA harness need from the CUDA backend beyond
// graft's public API, without including CUDA headers: the TF32 switch, and a raw cudaMalloc/cudaFree
// replay of an allocation sequence (the baseline of the caching allocator's churn benchmark).
// Compiled into libgraft only with the CUDA backend; callers guard their use with GRAFT_HAVE_CUDA
// from graft_config.h.
#include <cstdint>
#include <vector>

namespace graft::cuda::bench {

// TF32 tensor cores for float32 matmul/conv (cuda_context.h's switch; off by default).
void set_allow_tf32(bool allow);
bool allow_tf32();

// One step of an allocation sequence over numbered slots: bytes > 0 allocates into an empty slot,
// bytes == 0 frees the slot's memory.
struct ChurnStep {
  int32_t slot;
  int64_t bytes;
};

// Replays `steps` with cudaMalloc/cudaFree on `device`, frees whatever is left, and returns the
// wall time in milliseconds after synchronising the device. Throws graft::Error if a call fails.
double raw_churn_ms(const std::vector<ChurnStep>& steps, int slots, int device = 0);

}  // namespace graft::cuda::bench
