#pragma once
// DeviceBackendHooks: what runtime/ needs to ask of a device backend without including its headers.
// The CUDA backend registers its hooks at load; without it the defaults answer "no such device".
#include <string>

namespace graft {

class DeviceBackendHooks {
 public:
  virtual ~DeviceBackendHooks() = default;
  virtual bool is_available() const { return false; }
  virtual int device_count() const { return 0; }
  virtual std::string runtime_version() const { return "not built"; }
  virtual std::string device_name(int index) const { return ""; }
  virtual void synchronize(int index) const {}
};

const DeviceBackendHooks& cuda_hooks();
void set_cuda_hooks(DeviceBackendHooks* hooks);

bool cuda_is_available();
int cuda_device_count();

}  // namespace graft
