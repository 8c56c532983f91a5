#pragma once
// Device: where a storage's bytes live. CPU has one device (index 0); CUDA devices are numbered.
#include <cstdint>
#include <ostream>
#include <string>

namespace graft {

enum class DeviceType : uint8_t { CPU, CUDA };
inline constexpr int kNumDeviceTypes = 2;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}
  // Parses "cpu", "cuda", "cuda:1".
  Device(const std::string& spec);  // NOLINT: implicit like libtorch's Device("cuda:0")
  Device(const char* spec) : Device(std::string(spec)) {}  // NOLINT

  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  std::string str() const;  // "cpu", "cuda:0"
  friend bool operator==(const Device& a, const Device& b) { return a.type == b.type && a.index == b.index; }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }
};

inline const Device kCPU{DeviceType::CPU};
inline const Device kCUDA{DeviceType::CUDA};

std::ostream& operator<<(std::ostream& os, const Device& d);

}  // namespace graft
