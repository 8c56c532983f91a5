// Factories on CUDA: empty, empty_strided, full, arange. Memory comes from the device's allocator
// (kernels::new_tensor -> get_allocator), under a DeviceGuard so "cuda:1" allocates on GPU 1.
#include <cmath>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/copy.h"
#include "ops/factory_plan.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor empty_cuda(const Shape& sizes, DType dtype, Device device, bool pinned) {
  GRAFT_CHECK(!pinned, "empty: only CPU tensors can be pinned (asked for ", device, ")");
  DeviceGuard guard(device.index);
  return kernels::new_tensor(sizes, dtype, device);
}

Tensor empty_strided_cuda(const Shape& sizes, const Shape& strides, DType dtype, Device device) {
  DeviceGuard guard(device.index);
  return kernels::new_strided(sizes, strides, dtype, device);
}

Tensor full_cuda(const Shape& sizes, Scalar value, DType dtype, Device device) {
  DeviceGuard guard(device.index);
  Tensor t = kernels::new_tensor(sizes, dtype, device);
  if (t.numel() == 0) return t;
  kernels::TensorIterator it("full");
  it.add_output(t).build();
  launch_fill(dtype, geometry_of(it), to_scalar_arg(value), current_stream());
  return t;
}

Tensor arange_cuda(double start, double end, double step, DType dtype, Device device) {
  int64_t n = kernels::plan_arange(start, end, step);
  DeviceGuard guard(device.index);
  Tensor t = kernels::new_tensor({n}, dtype, device);
  launch_arange(dtype, t.data_ptr(), n, start, step, current_stream());
  return t;
}

}  // namespace graft::cuda
