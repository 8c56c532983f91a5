// Tensor::item and Tensor::to_vector: read values on the host (copying from a device first).
#include "ops/kernel_utils.h"
#include "ops/ops.h"

namespace graft {

template <class T>
std::vector<T> Tensor::to_vector() const {
  Tensor host = ops::contiguous(ops::to_dtype(ops::to_device(*this, kCPU), dtype_v<T>));
  const T* p = static_cast<const T*>(host.data_ptr());
  return std::vector<T>(p, p + host.numel());
}

template <class T>
T Tensor::item() const {
  GRAFT_CHECK(numel() == 1, "item: a Tensor with ", numel(), " elements cannot be converted to Scalar (shape ",
              shape_str(sizes()), ")");
  return to_vector<T>()[0];
}

// Every dtype's element type (dtype_v); to_vector<bool> is std::vector<bool>, filled element-wise.
#define GRAFT_INSTANTIATE_ACCESS(T)                       \
  template std::vector<T> Tensor::to_vector<T>() const; \
  template T Tensor::item<T>() const;
GRAFT_INSTANTIATE_ACCESS(float)
GRAFT_INSTANTIATE_ACCESS(double)
GRAFT_INSTANTIATE_ACCESS(int64_t)
GRAFT_INSTANTIATE_ACCESS(bool)
GRAFT_INSTANTIATE_ACCESS(BFloat16)
GRAFT_INSTANTIATE_ACCESS(Half)
GRAFT_INSTANTIATE_ACCESS(uint8_t)
GRAFT_INSTANTIATE_ACCESS(int32_t)
#undef GRAFT_INSTANTIATE_ACCESS

}  // namespace graft
