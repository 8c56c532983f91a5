// The CUDA face of the shared TensorIterator (see elementwise_cuda.h): its geometry in elements,
// and the device copy it converts and separates operands with.
#include "cuda/elementwise_cuda.h"

#include "cuda/cuda_context.h"
#include "cuda/kernels/copy.h"
#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"

namespace graft::cuda {

void elementwise_internal_error(const char* launcher, DType dtype, int op) {
  GRAFT_ERROR(launcher, ": internal error: no CUDA kernel for dtype ", dtype, " and op code ", op);
}

ElementwiseGeometry geometry_of(const kernels::TensorIterator& it) {
  ElementwiseGeometry g;
  g.nops = it.noperands();
  g.ndim = it.ndim();
  g.numel = it.numel();
  for (int k = 0; k < g.nops; ++k) {
    const Tensor& t = k == 0 ? it.output() : it.input(k - 1);
    g.data[k] = it.data(k);
    auto es = static_cast<int64_t>(t.element_size());
    for (int d = 0; d < g.ndim; ++d) g.strides[d][k] = it.stride(d, k) / es;
  }
  for (int d = 0; d < g.ndim; ++d) g.sizes[d] = it.shape(d);
  bool flat = g.ndim == 1;
  for (int k = 0; k < g.nops && flat; ++k) flat = g.strides[0][k] == 1;
  g.contiguous = flat;
  return g;
}

ScalarArg to_scalar_arg(const Scalar& s) {
  ScalarArg a;
  a.f = s.to<double>();
  a.i = s.to<int64_t>();
  a.b = s.to<bool>();
  return a;
}

Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), t.dtype(), sizes, strides, offset));
}

Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides) {
  return raw_view(t, sizes, strides, t.storage_offset());
}

void copy_on_device(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  cudaStream_t stream = current_stream(dst.device().index);
  bool disjoint = !dst.is_alias_of(src) || !kernels::ranges_overlap(dst, src);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes() &&
      (disjoint || dst.data_ptr() == src.data_ptr())) {
    if (dst.data_ptr() != src.data_ptr())
      GRAFT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  Tensor s = src.sizes() == dst.sizes() ? src : raw_view(src, dst.sizes(), kernels::broadcast_strides(src, dst.sizes()));
  kernels::TensorIterator it("copy_");
  it.add_output(dst).add_input(s).build();
  launch_copy(dst.dtype(), it.input(0).dtype(), geometry_of(it), stream);
}

// The shared iterator's conversion and overlap copies, and kernels::contiguous_as, on CUDA.
[[maybe_unused]] const bool kDeviceCopyRegistered = [] {
  kernels::set_device_copy(DeviceType::CUDA, &copy_on_device);
  return true;
}();

}  // namespace graft::cuda
