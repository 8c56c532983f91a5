// Joining and splitting: cat, stack, split / split_with_sizes / chunk (views), constant pad.
#include <algorithm>
#include <cstring>

#include "ops/cpu_kernels.h"
#include "ops/join_plan.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

Tensor make_view(const Tensor& self, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(self.impl()->storage(), self.dtype(), std::move(sizes),
                                             std::move(strides), offset));
}

// dst = cast(src) for two strided tensors of one shape. strided_copy walks elements serially, so
// big copies are cut along the first dim into sub-views, one piece per thread.
void parallel_copy(const Tensor& dst, const Tensor& src) {
  int64_t n = dst.numel();
  if (n == 0) return;
  if (dst.dim() == 0 || n <= kGrainSize || dst.sizes()[0] == 1 ||
      (dst.is_contiguous() && src.is_contiguous())) {  // strided_copy already parallelises this case
    strided_copy(dst, src, src.strides());
    return;
  }
  int64_t rows = dst.sizes()[0], per_row = n / rows;
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / per_row), [&](int64_t b, int64_t e) {
    Shape sz = dst.sizes();
    sz[0] = e - b;
    Tensor d = make_view(dst, sz, dst.strides(), dst.storage_offset() + b * dst.strides()[0]);
    Tensor s = make_view(src, sz, src.strides(), src.storage_offset() + b * src.strides()[0]);
    strided_copy(d, s, s.strides());
  });
}

// ---- split / chunk: views of self along dim ----

std::vector<Tensor> split_views(const Tensor& self, const Shape& sizes, int64_t dim) {
  std::vector<Tensor> out;
  out.reserve(sizes.size());
  int64_t start = 0;
  for (int64_t len : sizes) {
    Shape sz = self.sizes();
    sz[dim] = len;
    out.push_back(make_view(self, sz, self.strides(), self.storage_offset() + start * self.strides()[dim]));
    start += len;
  }
  return out;
}

}  // namespace

// Splits are views (metadata only): one kernel serves every device (codegen/ops/join.yaml).
std::vector<Tensor> split_with_sizes_k(const Tensor& self, const Shape& split_sizes, int64_t dim) {
  check_defined(self, "split_with_sizes", "self");
  GRAFT_CHECK(self.dim() > 0, "split_with_sizes: expected at least a 1-dimensional tensor, got ", describe(self));
  dim = wrap_dim(dim, self.dim(), "split_with_sizes");
  int64_t n = self.sizes()[dim], total = 0;
  for (int64_t s : split_sizes) {
    GRAFT_CHECK(s >= 0, "split_with_sizes: split sizes must be non-negative, got ", shape_str(split_sizes));
    total += s;
  }
  GRAFT_CHECK(total == n, "split_with_sizes: split sizes ", shape_str(split_sizes), " sum to ", total,
              " but dimension ", dim, " of the input ", describe(self), " has size ", n);
  return split_views(self, split_sizes, dim);
}

std::vector<Tensor> split_k(const Tensor& self, int64_t split_size, int64_t dim) {
  check_defined(self, "split", "self");
  GRAFT_CHECK(self.dim() > 0, "split: expected at least a 1-dimensional tensor, got ", describe(self));
  dim = wrap_dim(dim, self.dim(), "split");
  int64_t n = self.sizes()[dim];
  GRAFT_CHECK(split_size > 0 || (split_size == 0 && n == 0), "split: split_size must be positive, got ", split_size,
              " for dimension ", dim, " of size ", n);
  // As PyTorch: ceil(n / split_size) pieces, the last one smaller; an empty dim still gives one piece.
  int64_t pieces = split_size == 0 ? 1 : std::max<int64_t>(1, (n + split_size - 1) / split_size);
  Shape sizes(pieces, split_size);
  sizes.back() = n - split_size * (pieces - 1);
  return split_views(self, sizes, dim);
}

std::vector<Tensor> chunk_k(const Tensor& self, int64_t chunks, int64_t dim) {
  check_defined(self, "chunk", "self");
  GRAFT_CHECK(self.dim() > 0, "chunk: expected at least a 1-dimensional tensor, got ", describe(self));
  GRAFT_CHECK(chunks > 0, "chunk: number of chunks must be greater than 0, got ", chunks);
  dim = wrap_dim(dim, self.dim(), "chunk");
  int64_t n = self.sizes()[dim];
  if (n == 0) return split_views(self, Shape(chunks, 0), dim);  // PyTorch gives `chunks` empty pieces
  return split_k(self, (n + chunks - 1) / chunks, dim);
}



// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor cat_cpu(const std::vector<Tensor>& tensors, int64_t dim_arg) {
  CatPlan p = plan_cat(tensors, dim_arg);
  DType dtype = p.dtype;
  if (p.only_legacy_empty) return new_tensor(p.out_sizes, dtype, p.device);
  int64_t dim = p.dim;
  const Shape& out_sizes = p.out_sizes;
  Tensor out = new_tensor(out_sizes, dtype, p.device);
  if (out.numel() == 0) return out;
  int64_t outer = p.outer, inner = p.inner;
  int64_t out_row = out_sizes[dim] * inner;
  size_t es = element_size(dtype);
  int64_t start = 0;
  for (const Tensor& t : tensors) {
    if (is_legacy_empty(t)) continue;
    int64_t block = t.sizes()[dim] * inner;
    if (block == 0) continue;
    if (t.is_contiguous() && t.dtype() == dtype) {
      const char* src = static_cast<const char*>(t.data_ptr());
      char* dst = static_cast<char*>(out.data_ptr()) + static_cast<size_t>(start) * es;
      size_t bytes = static_cast<size_t>(block) * es;
      parallel_for(0, outer, std::max<int64_t>(1, kGrainSize / block), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          std::memcpy(dst + static_cast<size_t>(o * out_row) * es, src + static_cast<size_t>(o) * bytes, bytes);
      });
    } else {
      Shape st = out.strides();
      Tensor slot = make_view(out, t.sizes(), st, start);
      parallel_copy(slot, t);
    }
    start += block;
  }
  return out;
}

Tensor stack_cpu(const std::vector<Tensor>& tensors, int64_t dim) {
  std::vector<Tensor> views = stack_views(tensors, dim);
  return cat_cpu(views, dim);
}

// Constant padding: pads = (before_last, after_last, before_second_last, ...). Negative pads crop.
Tensor pad_cpu(const Tensor& self, const Shape& pads, double value) {
  PadPlan p = plan_pad(self, pads);
  Tensor out = new_tensor(p.out_sizes, self.dtype(), self.device());
  if (p.fill) fill_cpu(out, Scalar(value));
  if (shape_numel(p.len) == 0) return out;
  parallel_copy(make_view(out, p.len, out.strides(), p.out_offset), make_view(self, p.len, self.strides(), p.in_offset));
  return out;
}

}  // namespace kernels

}  // namespace graft
