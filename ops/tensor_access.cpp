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

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<bool> Tensor::to_vector<bool>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;

}  // namespace graft
