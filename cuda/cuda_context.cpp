#include "cuda/cuda_context.h"

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace graft::cuda {

const char* cublas_status_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS_STATUS_UNKNOWN";
  }
}

int current_device() {
  int d = 0;
  GRAFT_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int index) { GRAFT_CUDA_CHECK(cudaSetDevice(index)); }

DeviceGuard::DeviceGuard(int index) {
  if (index < 0) return;
  prev_ = current_device();
  if (prev_ != index) set_device(index);
}

DeviceGuard::~DeviceGuard() {
  if (prev_ >= 0) cudaSetDevice(prev_);
}

namespace {
// Indexed by device; grows on first use. nullptr is the legacy default stream.
thread_local std::vector<cudaStream_t> t_streams;

cudaStream_t& stream_slot(int device) {
  if (device < 0) device = current_device();
  if (static_cast<size_t>(device) >= t_streams.size()) t_streams.resize(static_cast<size_t>(device) + 1, nullptr);
  return t_streams[static_cast<size_t>(device)];
}
}  // namespace

cudaStream_t current_stream(int device) { return stream_slot(device); }
void set_current_stream(cudaStream_t stream, int device) { stream_slot(device) = stream; }

cudaStream_t create_stream() {
  cudaStream_t s = nullptr;
  GRAFT_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return s;
}

StreamGuard::StreamGuard(cudaStream_t stream, int device)
    : device_(device < 0 ? current_device() : device), prev_(current_stream(device_)) {
  set_current_stream(stream, device_);
}
StreamGuard::~StreamGuard() { set_current_stream(prev_, device_); }

Event::Event() { GRAFT_CUDA_CHECK(cudaEventCreate(&ev_)); }
Event::~Event() {
  if (ev_) cudaEventDestroy(ev_);
}
void Event::record(cudaStream_t stream) { GRAFT_CUDA_CHECK(cudaEventRecord(ev_, stream)); }
void Event::synchronize() const { GRAFT_CUDA_CHECK(cudaEventSynchronize(ev_)); }
float Event::elapsed_ms(const Event& end) const {
  float ms = 0;
  GRAFT_CUDA_CHECK(cudaEventElapsedTime(&ms, ev_, end.ev_));
  return ms;
}

namespace {
struct HandleTable {
  std::vector<cublasHandle_t> handles;
  ~HandleTable() {
    for (auto h : handles)
      if (h) cublasDestroy(h);
  }
};
thread_local HandleTable t_handles;

bool initial_tf32() {
  const char* e = std::getenv("GRAFT_ALLOW_TF32");
  return e != nullptr && std::string(e) == "1";
}
std::atomic<bool> g_allow_tf32{initial_tf32()};
}  // namespace

cublasHandle_t cublas_handle() {
  int d = current_device();
  if (static_cast<size_t>(d) >= t_handles.handles.size()) t_handles.handles.resize(static_cast<size_t>(d) + 1, nullptr);
  cublasHandle_t& h = t_handles.handles[static_cast<size_t>(d)];
  if (!h) GRAFT_CUBLAS_CHECK(cublasCreate(&h));
  GRAFT_CUBLAS_CHECK(cublasSetStream(h, current_stream(d)));
  // 16-bit GEMMs sum in float32 only: without the flag cuBLAS may reduce split-K partial sums in
  // bf16/fp16 (cuda/cublas_gemm.h). The flag changes nothing for float32 and float64.
  const int mode = (g_allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH) |
                   CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION;
  GRAFT_CUBLAS_CHECK(cublasSetMathMode(h, static_cast<cublasMath_t>(mode)));
  return h;
}

bool allow_tf32() { return g_allow_tf32; }
void set_allow_tf32(bool allow) { g_allow_tf32 = allow; }

void check_launch(const char* kernel_name) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) GRAFT_ERROR("CUDA kernel ", kernel_name, " failed to launch: ", cudaGetErrorString(e));
}

}  // namespace graft::cuda
