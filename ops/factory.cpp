// Factories: empty/full/arange on CPU. The public zeros/ones/... build on these.
#include <cmath>

#include "ops/cpu_kernels.h"
#include "ops/factory_plan.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor empty_cpu(const Shape& sizes, DType dtype, Device device, bool pinned) {
  return new_tensor(sizes, dtype, device, pinned);
}

Tensor empty_strided_cpu(const Shape& sizes, const Shape& strides, DType dtype, Device device) {
  return new_strided(sizes, strides, dtype, device);
}

Tensor full_cpu(const Shape& sizes, Scalar value, DType dtype, Device device) {
  Tensor t = new_tensor(sizes, dtype, device);
  fill_cpu(t, value);
  return t;
}

Tensor arange_cpu(double start, double end, double step, DType dtype, Device device) {
  int64_t n = plan_arange(start, end, step);
  Tensor t = new_tensor({n}, dtype, device);
  dispatch_all_dtypes(dtype, "arange", [&]<class T>() {
    T* d = static_cast<T*>(t.data_ptr());
    for (int64_t i = 0; i < n; ++i) {
      const double v = start + static_cast<double>(i) * step;
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) d[i] = T(static_cast<float>(v));
      else d[i] = static_cast<T>(v);
    }
  });
  return t;
}

}  // namespace kernels

namespace ops {

Tensor zeros(const Shape& sizes, DType dtype, Device device) { return full(sizes, 0, dtype, device); }
Tensor ones(const Shape& sizes, DType dtype, Device device) { return full(sizes, 1, dtype, device); }
Tensor empty_like(const Tensor& t) { return empty(t.sizes(), t.dtype(), t.device()); }
Tensor zeros_like(const Tensor& t) { return zeros(t.sizes(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.sizes(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, Scalar value) { return full(t.sizes(), value, t.dtype(), t.device()); }

}  // namespace ops
}  // namespace graft
