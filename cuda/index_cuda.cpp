// Indexing ops on CUDA: embedding (+ backward), index_select, index_add, gather, scatter_add,
// one_hot. Same checks, messages and shapes as ops/index.cpp; kernels in cuda/kernels/index.cu.
//
// Every index tensor is validated on the device before any kernel that uses it runs: a small
// kernel finds the first out-of-range position, which is copied back (the host waits for it), so
// a bad index is a graft::Error naming the same value as the CPU's message, never a device assert
// or a wild access. Scatters accumulate with atomicAdd (see index.cu for what that means for
// float rounding).
#include <cstring>

#include "cuda/cuda_context.h"
#include "cuda/kernels/index.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::check_dim;
using kernels::check_floating;
using kernels::check_index_dtype;
using kernels::check_same_dtype;
using kernels::new_tensor;
namespace rh = reduce_helpers;

// Scalars index like 1-element vectors (PyTorch treats a 0-d tensor as size 1 along dim 0).
Shape sizes_or_1(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.sizes(); }
Shape strides_or_1(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

// Throws unless every value of the contiguous int64 `idx` lies in [0, size).
void check_indices(const Tensor& idx, int64_t size, int64_t dim, const char* op) {
  std::optional<int64_t> bad = rh::first_bad_index(idx, 0, size);
  GRAFT_CHECK(!bad, op, ": index ", *bad, " is out of bounds for dimension ", dim, " with size ", size);
}

int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

const int64_t* index_ptr(const Tensor& idx) { return static_cast<const int64_t*>(idx.data_ptr()); }

// ---- embedding ----

// weight [V, D], indices [*] (int64) -> [*, D]. padding_idx only affects the backward.
Tensor embedding_cuda(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_defined(weight, "embedding", "weight");
  check_defined(indices, "embedding", "indices");
  check_dim(weight, 2, "embedding", "weight");
  check_index_dtype(indices, "embedding");
  int64_t V = weight.sizes()[0], D = weight.sizes()[1];
  GRAFT_CHECK(padding_idx >= -1 && padding_idx < V, "embedding: padding_idx ", padding_idx,
              " is out of range for a weight with ", V, " rows (use -1 for none)");
  DeviceGuard guard(weight.device().index);
  Tensor idx = rh::contiguous_as(indices);
  int64_t n = idx.numel();
  check_indices(idx, V, 0, "embedding");
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(D);
  Tensor out = new_tensor(out_sizes, weight.dtype(), weight.device());
  Tensor w = rh::contiguous_as(weight);
  launch_index_select(w.data_ptr(), out.data_ptr(), static_cast<int>(weight.element_size()), index_ptr(idx), n, 1, V,
                      D, current_stream());
  return out;
}

// grad [*, D], indices [*] -> grad_weight [V, D]; repeated indices accumulate, padding_idx rows stay 0.
Tensor embedding_backward_cuda(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  check_defined(grad, "embedding_backward", "grad");
  check_defined(indices, "embedding_backward", "indices");
  check_floating(grad, "embedding_backward");
  check_index_dtype(indices, "embedding_backward");
  GRAFT_CHECK(num_weights >= 0, "embedding_backward: num_weights must be non-negative, got ", num_weights);
  GRAFT_CHECK(padding_idx >= -1 && padding_idx < num_weights, "embedding_backward: padding_idx ", padding_idx,
              " is out of range for ", num_weights, " rows (use -1 for none)");
  Shape want = indices.sizes();
  GRAFT_CHECK(grad.dim() == indices.dim() + 1 && Shape(grad.sizes().begin(), grad.sizes().end() - 1) == want,
              "embedding_backward: grad of shape ", shape_str(grad.sizes()),
              " does not match indices of shape ", shape_str(want), " followed by the embedding dim");
  int64_t D = grad.sizes().back();
  DeviceGuard guard(grad.device().index);
  Tensor idx = rh::contiguous_as(indices);
  int64_t n = idx.numel();
  check_indices(idx, num_weights, 0, "embedding_backward");
  Tensor g = rh::contiguous_as(grad);
  Tensor out = new_tensor({num_weights, D}, grad.dtype(), grad.device());
  rh::zero_dense(out);
  launch_embedding_backward(g.data_ptr(), grad.dtype(), index_ptr(idx), n, D, padding_idx, out.data_ptr(),
                            current_stream());
  return out;
}

// ---- index_select / index_add ----

// x [..., n_x, ...], index [n] -> [..., n, ...]
Tensor index_select_cuda(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "index_select", "self");
  check_defined(index, "index_select", "index");
  check_index_dtype(index, "index_select");
  GRAFT_CHECK(index.dim() <= 1, "index_select: index must be 0-D or 1-D, got ", describe(index));
  dim = wrap_dim(dim, x.dim(), "index_select");
  Shape xs = sizes_or_1(x);
  DeviceGuard guard(x.device().index);
  Tensor idx = rh::contiguous_as(index);
  int64_t n = idx.numel();
  check_indices(idx, xs[dim], dim, "index_select");
  Shape out_sizes = xs;
  out_sizes[dim] = n;
  if (x.dim() == 0) {
    GRAFT_CHECK(n == 1, "index_select: index for a 0-d tensor must have one element, got ", describe(index));
    out_sizes = {};
  }
  Tensor out = new_tensor(out_sizes, x.dtype(), x.device());
  Tensor xc = rh::contiguous_as(x);
  launch_index_select(xc.data_ptr(), out.data_ptr(), static_cast<int>(x.element_size()), index_ptr(idx), n,
                      prod(xs, 0, dim), xs[dim], prod(xs, dim + 1, xs.size()), current_stream());
  return out;
}

// Out-of-place index_add: out = x; out[..., index[j], ...] += src[..., j, ...]
Tensor index_add_cuda(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined(x, "index_add", "self");
  check_defined(index, "index_add", "index");
  check_defined(src, "index_add", "source");
  check_index_dtype(index, "index_add");
  check_same_dtype(x, src, "index_add");
  GRAFT_CHECK(index.dim() <= 1, "index_add: index must be 0-D or 1-D, got ", describe(index));
  dim = wrap_dim(dim, x.dim(), "index_add");
  Shape xs = sizes_or_1(x), ss = sizes_or_1(src);
  int64_t n = index.numel();
  Shape want = xs;
  want[dim] = n;
  GRAFT_CHECK(ss == want, "index_add: source of shape ", shape_str(src.sizes()), " does not match self of shape ",
              shape_str(x.sizes()), " with dimension ", dim, " replaced by the index length ", n, " (expected ",
              shape_str(want), ")");
  DeviceGuard guard(x.device().index);
  Tensor idx = rh::contiguous_as(index);
  check_indices(idx, xs[dim], dim, "index_add");
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  rh::copy_strided(out, x);
  Tensor s = rh::contiguous_as(src);
  launch_index_add(s.data_ptr(), x.dtype(), index_ptr(idx), n, prod(xs, 0, dim), xs[dim],
                   prod(xs, dim + 1, xs.size()), out.data_ptr(), current_stream());
  return out;
}

// ---- gather / scatter_add ----

// Shape rules shared by gather and scatter_add (PyTorch's): same ndim, index no larger than
// `self` outside `dim` (and no larger than `src` anywhere, for scatter).
void check_gather_shapes(const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  GRAFT_CHECK(index.dim() == x.dim(), op, ": index ", describe(index), " must have as many dimensions as self ",
              describe(x));
  if (src) {
    GRAFT_CHECK(src->dim() == x.dim(), op, ": src ", describe(*src), " must have as many dimensions as self ",
                describe(x));
  }
  for (int64_t d = 0; d < index.dim(); ++d) {
    GRAFT_CHECK(d == dim || index.sizes()[d] <= x.sizes()[d], op, ": index of shape ", shape_str(index.sizes()),
                " is larger than self of shape ", shape_str(x.sizes()), " at dimension ", d, " (",
                index.sizes()[d], " > ", x.sizes()[d], ")");
    if (src)
      GRAFT_CHECK(index.sizes()[d] <= src->sizes()[d], op, ": index of shape ", shape_str(index.sizes()),
                  " is larger than src of shape ", shape_str(src->sizes()), " at dimension ", d, " (",
                  index.sizes()[d], " > ", src->sizes()[d], ")");
  }
}

// The walk over the index's elements: a_strides for the tensor addressed through the index,
// b_strides for the other operand.
GatherGeometry gather_geometry(const Shape& index_sizes, int64_t dim, const Shape& a_strides, const Shape& b_strides,
                               const char* op) {
  GatherGeometry g;
  GRAFT_CHECK(static_cast<int64_t>(index_sizes.size()) <= kIndexMaxDims, op, ": tensors with more than ",
              kIndexMaxDims, " dims are not supported on CUDA (got ", index_sizes.size(), ")");
  g.ndim = static_cast<int>(index_sizes.size());
  g.dim = static_cast<int>(dim);
  g.numel = shape_numel(index_sizes);
  for (int d = 0; d < g.ndim; ++d) {
    g.sizes[d] = index_sizes[d];
    g.a_strides[d] = a_strides[d];
    g.b_strides[d] = b_strides[d];
  }
  return g;
}

// out[p] = x[p with p[dim] replaced by index[p]]; out has index's shape.
Tensor gather_cuda(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "gather", "self");
  check_defined(index, "gather", "index");
  check_index_dtype(index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  check_gather_shapes(x, dim, index, nullptr, "gather");
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(index.sizes(), x.dtype(), x.device());
  Tensor idx = rh::contiguous_as(index);
  int64_t n = idx.numel();
  Shape xs = sizes_or_1(x);
  check_indices(idx, xs[dim], dim, "gather");
  if (n == 0) return out;
  Shape is = sizes_or_1(idx);
  GatherGeometry g = gather_geometry(is, dim, strides_or_1(x), contiguous_strides(is), "gather");
  launch_gather(x.data_ptr(), static_cast<int>(x.element_size()), index_ptr(idx), out.data_ptr(), g,
                current_stream());
  return out;
}

// Out-of-place scatter_add: out = x; out[p with p[dim] replaced by index[p]] += src[p].
Tensor scatter_add_cuda(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined(x, "scatter_add", "self");
  check_defined(index, "scatter_add", "index");
  check_defined(src, "scatter_add", "src");
  check_index_dtype(index, "scatter_add");
  check_same_dtype(x, src, "scatter_add");
  dim = wrap_dim(dim, x.dim(), "scatter_add");
  check_gather_shapes(x, dim, index, &src, "scatter_add");
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  rh::copy_strided(out, x);
  Tensor idx = rh::contiguous_as(index);
  int64_t n = idx.numel();
  Shape xs = sizes_or_1(x);
  check_indices(idx, xs[dim], dim, "scatter_add");
  if (n == 0) return out;
  GatherGeometry g = gather_geometry(sizes_or_1(idx), dim, strides_or_1(out), strides_or_1(src), "scatter_add");
  launch_scatter_add(src.data_ptr(), x.dtype(), index_ptr(idx), out.data_ptr(), g, current_stream());
  return out;
}

// ---- one_hot ----

// indices [*] (int64) -> [*, num_classes] int64; num_classes = -1 infers max + 1.
Tensor one_hot_cuda(const Tensor& indices, int64_t num_classes) {
  check_defined(indices, "one_hot", "self");
  GRAFT_CHECK(indices.dtype() == kInt64, "one_hot: expected an int64 tensor of class indices, got ",
              describe(indices));
  GRAFT_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or non-negative, got ", num_classes);
  DeviceGuard guard(indices.device().index);
  Tensor idx = rh::contiguous_as(indices);
  int64_t n = idx.numel();
  std::optional<int64_t> negative = rh::first_negative(idx);
  GRAFT_CHECK(!negative, "one_hot: class values must be non-negative, got index ", *negative);
  if (num_classes == -1) {
    GRAFT_CHECK(n > 0, "one_hot: cannot infer num_classes from an empty tensor ", describe(indices));
    num_classes = rh::max_index(idx) + 1;
  }
  int64_t cls_dim = indices.dim();
  check_indices(idx, num_classes, cls_dim, "one_hot");
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(num_classes);
  Tensor out = new_tensor(out_sizes, kInt64, indices.device());
  rh::zero_dense(out);
  launch_one_hot(index_ptr(idx), n, num_classes, static_cast<int64_t*>(out.data_ptr()), current_stream());
  return out;
}

}  // namespace

GRAFT_KERNEL("embedding", CUDA, embedding_cuda);
GRAFT_KERNEL("embedding_backward", CUDA, embedding_backward_cuda);
GRAFT_KERNEL("index_select", CUDA, index_select_cuda);
GRAFT_KERNEL("index_add", CUDA, index_add_cuda);
GRAFT_KERNEL("gather", CUDA, gather_cuda);
GRAFT_KERNEL("scatter_add", CUDA, scatter_add_cuda);
GRAFT_KERNEL("one_hot", CUDA, one_hot_cuda);

}  // namespace graft::cuda
