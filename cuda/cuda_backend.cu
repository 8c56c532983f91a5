// Device discovery for the CUDA backend. cudaGetDeviceCount failing (no driver, no GPU) simply
// means "not available": the backend stays silent so CPU-only machines see no error spam.
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_backend.h"
#include "runtime/backend_hooks.h"

namespace graft::cuda {
namespace {

class CudaHooks final : public DeviceBackendHooks {
 public:
  bool is_available() const override { return device_count() > 0; }
  int device_count() const override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky error so later calls are not confused by it
      return 0;
    }
    return n;
  }
  std::string runtime_version() const override {
    int v = 0;
    cudaRuntimeGetVersion(&v);
    return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
  }
  std::string device_name(int index) const override {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, index) != cudaSuccess) return "";
    return p.name;
  }
  void synchronize(int index) const override {
    cudaSetDevice(index);
    cudaDeviceSynchronize();
  }
};

CudaHooks g_hooks;
struct Register {
  Register() { set_cuda_hooks(&g_hooks); }
} g_register;

}  // namespace

}  // namespace graft::cuda
