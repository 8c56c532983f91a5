// Joining and splitting: cat, stack, split / split_with_sizes / chunk (views), constant pad.
#include <algorithm>
#include <cstring>

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

// PyTorch keeps accepting 1-D empty tensors in cat whatever the other inputs' shapes are.
bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

// ---- cat / stack ----

Tensor cat_cpu(const std::vector<Tensor>& tensors, int64_t dim) {
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
    views.push_back(make_view(t, sz, st, t.storage_offset()));
  }
  return cat_cpu(views, dim);
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

// ---- pad ----

// Constant padding: pads = (before_last, after_last, before_second_last, ...). Negative pads crop.
Tensor pad_cpu(const Tensor& self, const Shape& pads, double value) {
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
  Tensor out = new_tensor(out_sizes, self.dtype(), self.device());
  if (any_positive) fill_cpu(out, Scalar(value));
  if (shape_numel(len) == 0) return out;
  int64_t in_off = self.storage_offset(), out_off = 0;
  for (int64_t d = 0; d < nd; ++d) {
    in_off += in_start[d] * self.strides()[d];
    out_off += out_start[d] * out.strides()[d];
  }
  parallel_copy(make_view(out, len, out.strides(), out_off), make_view(self, len, self.strides(), in_off));
  return out;
}

}  // namespace

GRAFT_DEFINE_OP("cat(Tensor[] tensors, int dim) -> Tensor");
GRAFT_DEFINE_OP("stack(Tensor[] tensors, int dim) -> Tensor");
GRAFT_DEFINE_OP("split(Tensor(a) self, int split_size, int dim) -> Tensor(a)[]");
GRAFT_DEFINE_OP("split_with_sizes(Tensor(a) self, int[] split_sizes, int dim) -> Tensor(a)[]");
GRAFT_DEFINE_OP("chunk(Tensor(a) self, int chunks, int dim) -> Tensor(a)[]");
GRAFT_DEFINE_OP("pad(Tensor self, int[] pad, float value) -> Tensor");
GRAFT_KERNEL("cat", CPU, cat_cpu);
GRAFT_KERNEL("stack", CPU, stack_cpu);
// Splits are metadata-only views, so one kernel serves every device.
GRAFT_KERNEL("split", CPU, split_k);
GRAFT_KERNEL("split", CUDA, split_k);
GRAFT_KERNEL("split_with_sizes", CPU, split_with_sizes_k);
GRAFT_KERNEL("split_with_sizes", CUDA, split_with_sizes_k);
GRAFT_KERNEL("chunk", CPU, chunk_k);
GRAFT_KERNEL("chunk", CUDA, chunk_k);
GRAFT_KERNEL("pad", CPU, pad_cpu);

}  // namespace kernels

namespace ops {

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  GRAFT_OP_HANDLE(op, "cat");
  return call_op(op, tensors, dim)[0];
}
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  GRAFT_OP_HANDLE(op, "stack");
  return call_op(op, tensors, dim)[0];
}
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  GRAFT_OP_HANDLE(op, "split");
  return call_op(op, x, split_size, dim);
}
std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim) {
  GRAFT_OP_HANDLE(op, "split_with_sizes");
  return call_op(op, x, sizes, dim);
}
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  GRAFT_OP_HANDLE(op, "chunk");
  return call_op(op, x, chunks, dim);
}
Tensor pad(const Tensor& x, const Shape& pads, double value) {
  GRAFT_OP_HANDLE(op, "pad");
  return call_op(op, x, pads, value)[0];
}

}  // namespace ops
}  // namespace graft
