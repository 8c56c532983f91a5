#pragma once
// TensorOptions: the dtype/device/requires_grad/pinned choice of a factory call, as a builder.
#include <optional>

#include "runtime/device.h"
#include "runtime/dtype.h"

namespace graft {

struct TensorOptions {
  std::optional<DType> dtype_;  // unset: the factory decides (float32, or int64 for randint/integral arange)
  Device device_ = Device(DeviceType::CPU);
  bool device_set_ = false;  // *_like factories keep the source's device unless one is given
  bool requires_grad_ = false;
  bool pinned_memory_ = false;

  TensorOptions dtype(DType d) const { auto o = *this; o.dtype_ = d; return o; }
  TensorOptions device(Device d) const { auto o = *this; o.device_ = d; o.device_set_ = true; return o; }
  TensorOptions requires_grad(bool r = true) const { auto o = *this; o.requires_grad_ = r; return o; }
  TensorOptions pinned_memory(bool p = true) const { auto o = *this; o.pinned_memory_ = p; return o; }

  DType get_dtype(DType fallback = DType::Float32) const { return dtype_.value_or(fallback); }
  bool has_dtype() const { return dtype_.has_value(); }
  bool has_device() const { return device_set_; }
  Device get_device() const { return device_; }
  bool get_requires_grad() const { return requires_grad_; }
  bool get_pinned_memory() const { return pinned_memory_; }
};

inline TensorOptions dtype(DType d) { return TensorOptions{}.dtype(d); }
inline TensorOptions device(Device d) { return TensorOptions{}.device(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions{}.requires_grad(r); }

}  // namespace graft
