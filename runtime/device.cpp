#include "runtime/device.h"

#include "runtime/error.h"

namespace graft {

Device::Device(const std::string& spec) {
  std::string kind = spec;
  int idx = 0;
  if (auto colon = spec.find(':'); colon != std::string::npos) {
    kind = spec.substr(0, colon);
    std::string num = spec.substr(colon + 1);
    GRAFT_CHECK(!num.empty() && num.find_first_not_of("0123456789") == std::string::npos,
                "Device: invalid device string '", spec, "'");
    idx = std::stoi(num);
  }
  if (kind == "cpu") {
    GRAFT_CHECK(idx == 0, "Device: CPU device index must be 0, got '", spec, "'");
    type = DeviceType::CPU;
  } else if (kind == "cuda") {
    type = DeviceType::CUDA;
  } else {
    GRAFT_ERROR("Device: invalid device string '", spec, "' (expected cpu, cuda or cuda:N)");
  }
  index = idx;
}

std::string Device::str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace graft
