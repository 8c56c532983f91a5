// cat, stack and constant pad on CUDA: same checks, messages, dtype promotion and shapes as
// ops/join.cpp (split/split_with_sizes/chunk are views, registered for CUDA there).
//
// cat writes each input into its slot of the output: one 2-D cudaMemcpyAsync ([outer] rows of
// size_i * inner elements, pitched by the output row) when the input is contiguous in the output
// dtype, else the strided casting copy kernel into a view of the slot. pad fills the output when
// any side grows and copies the kept region with the same kernel.
#include <algorithm>

#include "cuda/cuda_context.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::new_tensor;
namespace rh = reduce_helpers;

// cudaMemcpy2D refuses pitches above the device's memPitch (2^31 - 1 bytes on current GPUs).
constexpr size_t kMaxPitch = 2147483647;

// PyTorch keeps accepting 1-D empty tensors in cat whatever the other inputs' shapes are.
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

// ---- cat / stack ----

Tensor cat_cuda(const std::vector<Tensor>& tensors, int64_t dim) {
  GRAFT_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor* ref = nullptr;
  DType dtype = kBool;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    GRAFT_CHECK(t.defined(), "cat: tensor number ", i, " in the list is undefined");
    GRAFT_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (tensor number ", i, " in the list) cannot be concatenated");
    dtype = i == 0 ? t.dtype() : promote_types(dtype, t.dtype());
    if (!ref && !is_legacy_empty(t)) ref = &t;
  }
  Device device = tensors[0].device();
  DeviceGuard guard(device.index);
  if (!ref) return new_tensor({0}, dtype, device);  // every input is a legacy empty tensor
  int64_t nd = ref->dim();
  dim = wrap_dim(dim, nd, "cat");
  Shape out_sizes = ref->sizes();
  out_sizes[dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_legacy_empty(t)) continue;
    GRAFT_CHECK(t.dim() == nd, "cat: tensors must have the same number of dimensions: got ", nd, " (shape ",
                shape_str(ref->sizes()), ") and ", t.dim(), " (shape ", shape_str(t.sizes()), ") for tensor number ",
                i, " in the list");
    for (int64_t d = 0; d < nd; ++d) {
      GRAFT_CHECK(d == dim || t.sizes()[d] == ref->sizes()[d], "cat: sizes of tensors must match except in dimension ",
                  dim, ". Expected size ", ref->sizes()[d], " but got size ", t.sizes()[d], " for tensor number ", i,
                  " in the list (shapes ", shape_str(ref->sizes()), " and ", shape_str(t.sizes()), ")");
    }
    out_sizes[dim] += t.sizes()[dim];
  }
  Tensor out = new_tensor(out_sizes, dtype, device);
  if (out.numel() == 0) return out;
  // out viewed as [outer, out_sizes[dim] * inner]; input i fills columns [start, start + size_i * inner).
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out_sizes[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= out_sizes[d];
  int64_t out_row = out_sizes[dim] * inner;
  size_t es = element_size(dtype);
  cudaStream_t stream = current_stream();
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t)) continue;
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
      rh::copy_strided(rh::make_view(out, t.sizes(), out.strides(), start), t);
    }
    start += block;
  }
  return out;
}

Tensor stack_cuda(const std::vector<Tensor>& tensors, int64_t dim) {
  GRAFT_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    GRAFT_CHECK(tensors[i].defined(), "stack: tensor number ", i, " in the list is undefined");
    GRAFT_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  }
  int64_t nd = tensors[0].dim();
  dim = wrap_dim(dim, nd + 1, "stack");
  // Unsqueezed views of the inputs, concatenated along the new dim.
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    Shape sz = t.sizes(), st = t.strides();
    sz.insert(sz.begin() + dim, 1);
    st.insert(st.begin() + dim, dim < nd ? sz[dim + 1] * st[dim] : 1);
    views.push_back(rh::make_view(t, sz, st, t.storage_offset()));
  }
  return cat_cuda(views, dim);
}

// ---- pad ----

// Constant padding: pads = (before_last, after_last, before_second_last, ...). Negative pads crop.
Tensor pad_cuda(const Tensor& self, const Shape& pads, double value) {
  check_defined(self, "pad", "self");
  int64_t nd = self.dim(), npairs = static_cast<int64_t>(pads.size()) / 2;
  GRAFT_CHECK(pads.size() % 2 == 0, "pad: padding length must be even (pairs of before/after), got ",
              shape_str(pads));
  GRAFT_CHECK(npairs <= nd, "pad: padding ", shape_str(pads), " has ", npairs, " pairs but the input ",
              describe(self), " has only ", nd, " dimensions");
  Shape out_sizes = self.sizes();
  // Region of the input kept, and where it lands in the output.
  Shape in_start(nd, 0), out_start(nd, 0), len = self.sizes();
  bool any_positive = false;
  for (int64_t p = 0; p < npairs; ++p) {
    int64_t d = nd - 1 - p, before = pads[2 * p], after = pads[2 * p + 1];
    int64_t size = self.sizes()[d] + before + after;
    GRAFT_CHECK(size >= 0, "pad: padding (", before, ", ", after, ") of dimension ", d, " with size ",
                self.sizes()[d], " gives a negative output size ", size);
    out_sizes[d] = size;
    in_start[d] = std::max<int64_t>(0, -before);
    out_start[d] = std::max<int64_t>(0, before);
    len[d] = std::max<int64_t>(0, self.sizes()[d] - in_start[d] - std::max<int64_t>(0, -after));
    len[d] = std::min(len[d], size);
    any_positive = any_positive || before > 0 || after > 0;
  }
  DeviceGuard guard(self.device().index);
  Tensor out = new_tensor(out_sizes, self.dtype(), self.device());
  if (any_positive) rh::fill_dense(out, value);
  if (shape_numel(len) == 0) return out;
  int64_t in_off = self.storage_offset(), out_off = 0;
  for (int64_t d = 0; d < nd; ++d) {
    in_off += in_start[d] * self.strides()[d];
    out_off += out_start[d] * out.strides()[d];
  }
  rh::copy_strided(rh::make_view(out, len, out.strides(), out_off), rh::make_view(self, len, self.strides(), in_off));
  return out;
}

}  // namespace

GRAFT_KERNEL("cat", CUDA, cat_cuda);
GRAFT_KERNEL("stack", CUDA, stack_cuda);
GRAFT_KERNEL("pad", CUDA, pad_cuda);

}  // namespace graft::cuda
