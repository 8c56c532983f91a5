#include "runtime/backend_hooks.h"

#include <atomic>

namespace graft {

namespace {
DeviceBackendHooks g_default;
std::atomic<DeviceBackendHooks*> g_cuda{nullptr};
}  // namespace

const DeviceBackendHooks& cuda_hooks() {
  DeviceBackendHooks* h = g_cuda.load(std::memory_order_acquire);
  return h ? *h : g_default;
}
void set_cuda_hooks(DeviceBackendHooks* hooks) { g_cuda.store(hooks, std::memory_order_release); }

bool cuda_is_available() { return cuda_hooks().is_available(); }
int cuda_device_count() { return cuda_hooks().device_count(); }

}  // namespace graft
