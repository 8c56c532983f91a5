#pragma once
// CUDA device state shared by the backend's kernels: error checks, the current device, per-thread
// current streams, events for timing, the per-thread cuBLAS handle and launch helpers.
//
// Invariants:
// - Every CUDA runtime or cuBLAS call in the backend goes through GRAFT_CUDA_CHECK /
//   GRAFT_CUBLAS_CHECK, so a failure becomes a graft::Error naming the call (never an abort), and
//   the sticky "last error" is cleared so the next op does not report a stale failure.
// - The current stream is thread-local per device, like PyTorch's: kernels launch on
//   current_stream(), the caching allocator tags blocks with it, and a StreamGuard changes it only
//   for its scope. The default is the legacy default stream (nullptr), which orders against all
//   blocking streams, so code that never touches streams is sequential as on the CPU.
// - cublas_handle() is created once per (thread, device) and re-bound to the current stream on
//   every call, so a StreamGuard applies to cuBLAS too.
// Compiled only with the CUDA backend; nothing above cuda/ includes this header.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/error.h"

#define GRAFT_CUDA_CHECK(expr)                                                                         \
  do {                                                                                                 \
    cudaError_t graft_cuda_err_ = (expr);                                                              \
    if (graft_cuda_err_ != cudaSuccess) {                                                              \
      cudaGetLastError();                                                                              \
      GRAFT_ERROR("CUDA error: ", cudaGetErrorString(graft_cuda_err_), " (", #expr, " at ", __FILE__, \
                  ":", __LINE__, ")");                                                                 \
    }                                                                                                  \
  } while (0)

#define GRAFT_CUBLAS_CHECK(expr)                                                                                   \
  do {                                                                                                             \
    cublasStatus_t graft_cublas_st_ = (expr);                                                                      \
    if (graft_cublas_st_ != CUBLAS_STATUS_SUCCESS)                                                                 \
      GRAFT_ERROR("cuBLAS error: ", ::graft::cuda::cublas_status_name(graft_cublas_st_), " (", #expr, " at ",      \
                  __FILE__, ":", __LINE__, ")");                                                                   \
  } while (0)

namespace graft::cuda {

const char* cublas_status_name(cublasStatus_t s);

int current_device();
void set_device(int index);

// Makes `index` the current device for the guard's lifetime (a no-op for index < 0).
class DeviceGuard {
 public:
  explicit DeviceGuard(int index);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

// The calling thread's current stream on `device` (-1: the current device).
cudaStream_t current_stream(int device = -1);
void set_current_stream(cudaStream_t stream, int device = -1);
// A new non-blocking stream (the caller destroys it with cudaStreamDestroy).
cudaStream_t create_stream();

class StreamGuard {
 public:
  StreamGuard(cudaStream_t stream, int device = -1);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t prev_;
};

// A timing event: record on a stream, then elapsed_ms between two recorded events.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream = current_stream());
  void synchronize() const;
  float elapsed_ms(const Event& end) const;  // this -> end
  cudaEvent_t get() const { return ev_; }

 private:
  cudaEvent_t ev_ = nullptr;
};

// Per-thread, per-device cuBLAS handle bound to the current stream. Its math mode disallows
// reduced-precision reductions, so 16-bit GEMMs accumulate in float32 throughout.
cublasHandle_t cublas_handle();
// TF32 tensor cores for float32 matmul/conv: off by default (exact float32, as PyTorch's default
// for matmul), on through set_allow_tf32(true) or GRAFT_ALLOW_TF32=1 in the environment.
bool allow_tf32();
void set_allow_tf32(bool allow);

// Launch geometry for one thread per element, grid-stride loops covering the rest.
constexpr int kThreadsPerBlock = 256;
inline unsigned int blocks_for(int64_t n, int threads = kThreadsPerBlock) {
  int64_t b = (n + threads - 1) / threads;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;  // grid-stride loops cover the rest
  return static_cast<unsigned int>(b);
}
// After a kernel launch: turns a launch failure into a graft::Error naming the kernel.
void check_launch(const char* kernel_name);

}  // namespace graft::cuda
