// cat, stack and constant pad on CUDA: checks, dtype promotion and shapes from the shared plan
// (ops/join_plan.h), as on the CPU (split/split_with_sizes/chunk are views, registered for CUDA
// in ops/join.cpp).
//
// cat writes each input into its slot of the output: one 2-D cudaMemcpyAsync ([outer] rows of
// size_i * inner elements, pitched by the output row) when the input is contiguous in the output
// dtype, else the strided casting copy kernel into a view of the slot. pad fills the output when
// any side grows and copies the kept region with the same kernel.
#include <algorithm>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/reduce_helpers.h"
#include "ops/join_plan.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::new_tensor;
namespace rh = reduce_helpers;

// cudaMemcpy2D refuses pitches above the device's memPitch (2^31 - 1 bytes on current GPUs).
constexpr size_t kMaxPitch = 2147483647;

// ---- cat / stack ----

// ---- pad ----

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor cat_cuda(const std::vector<Tensor>& tensors, int64_t dim_arg) {
  kernels::CatPlan p = kernels::plan_cat(tensors, dim_arg);
  DType dtype = p.dtype;
  Device device = p.device;
  DeviceGuard guard(device.index);
  if (p.only_legacy_empty) return new_tensor(p.out_sizes, dtype, device);
  const Shape& out_sizes = p.out_sizes;
  int64_t dim = p.dim;
  Tensor out = new_tensor(out_sizes, dtype, device);
  if (out.numel() == 0) return out;
  int64_t outer = p.outer, inner = p.inner;
  int64_t out_row = out_sizes[dim] * inner;
  size_t es = element_size(dtype);
  cudaStream_t stream = current_stream();
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    if (kernels::is_legacy_empty(t)) continue;
    int64_t block = t.sizes()[dim] * inner;
    if (block == 0) continue;
    size_t pitch = static_cast<size_t>(out_row) * es, bytes = static_cast<size_t>(block) * es;
    char* dst = static_cast<char*>(out.data_ptr()) + static_cast<size_t>(start) * es;
    if (t.is_contiguous() && t.dtype() == dtype && outer == 1) {
      GRAFT_CUDA_CHECK(cudaMemcpyAsync(dst, t.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream));
    } else if (t.is_contiguous() && t.dtype() == dtype && pitch <= kMaxPitch) {
      GRAFT_CUDA_CHECK(cudaMemcpy2DAsync(dst, pitch, t.data_ptr(), bytes, bytes, static_cast<size_t>(outer),
                                         cudaMemcpyDeviceToDevice, stream));
    } else {
      rh::copy_strided(raw_view(out, t.sizes(), out.strides(), start), t);
    }
    start += block;
  }
  return out;
}

Tensor stack_cuda(const std::vector<Tensor>& tensors, int64_t dim) {
  std::vector<Tensor> views = kernels::stack_views(tensors, dim);
  return cat_cuda(views, dim);
}

// Constant padding: pads = (before_last, after_last, before_second_last, ...). Negative pads crop.
Tensor pad_cuda(const Tensor& self, const Shape& pads, double value) {
  kernels::PadPlan p = kernels::plan_pad(self, pads);
  DeviceGuard guard(self.device().index);
  Tensor out = new_tensor(p.out_sizes, self.dtype(), self.device());
  if (p.fill) rh::fill_dense(out, value);
  if (shape_numel(p.len) == 0) return out;
  rh::copy_strided(raw_view(out, p.len, out.strides(), p.out_offset), raw_view(self, p.len, self.strides(), p.in_offset));
  return out;
}

}  // namespace graft::cuda
