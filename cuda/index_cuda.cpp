// Indexing ops on CUDA: embedding (+ backward), index_select, index_add, gather, scatter_add,
// one_hot. Checks, messages and shapes from the shared plan (ops/index_plan.h), as on the CPU;
// kernels in cuda/kernels/index.cu.
//
// Every index tensor is validated on the device before any kernel that uses it runs: a small
// kernel finds the first out-of-range position, which is copied back (the host waits for it), so
// a bad index is a graft::Error naming the same value as the CPU's message, never a device assert
// or a wild access. Scatters accumulate with atomicAdd (see index.cu for what that means for
// float rounding).
#include <cstring>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/index.h"
#include "cuda/reduce_helpers.h"
#include "ops/index_plan.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::new_tensor;
using kernels::sizes_or_1;
using kernels::strides_or_1;
namespace rh = reduce_helpers;

// Throws unless every value of the contiguous int64 `idx` lies in [0, size).
void check_indices(const Tensor& idx, int64_t size, int64_t dim, const char* op) {
  std::optional<int64_t> bad = rh::first_bad_index(idx, 0, size);
  if (bad) kernels::index_out_of_bounds_error(*bad, dim, size, op);
}

const int64_t* index_ptr(const Tensor& idx) { return static_cast<const int64_t*>(idx.data_ptr()); }

// ---- embedding ----

// ---- index_select / index_add ----

// ---- gather / scatter_add ----

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

// ---- one_hot ----

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

// weight [V, D], indices [*] (int64) -> [*, D]. padding_idx only affects the backward.
Tensor embedding_cuda(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  kernels::EmbeddingPlan p = kernels::plan_embedding(weight, indices, padding_idx);
  int64_t V = p.V, D = p.D;
  DeviceGuard guard(weight.device().index);
  Tensor idx = kernels::contiguous_as(indices);
  int64_t n = idx.numel();
  check_indices(idx, V, 0, "embedding");
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(D);
  Tensor out = new_tensor(out_sizes, weight.dtype(), weight.device());
  Tensor w = kernels::contiguous_as(weight);
  launch_index_select(w.data_ptr(), out.data_ptr(), static_cast<int>(weight.element_size()), index_ptr(idx), n, 1, V,
                      D, current_stream());
  return out;
}

// grad [*, D], indices [*] -> grad_weight [V, D]; repeated indices accumulate, padding_idx rows stay 0.
Tensor embedding_backward_cuda(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  int64_t D = kernels::plan_embedding_backward(grad, indices, num_weights, padding_idx);
  DeviceGuard guard(grad.device().index);
  Tensor idx = kernels::contiguous_as(indices);
  int64_t n = idx.numel();
  check_indices(idx, num_weights, 0, "embedding_backward");
  Tensor g = kernels::contiguous_as(grad);
  Tensor out = new_tensor({num_weights, D}, grad.dtype(), grad.device());
  rh::zero_dense(out);
  launch_embedding_backward(g.data_ptr(), grad.dtype(), index_ptr(idx), n, D, padding_idx, out.data_ptr(),
                            current_stream());
  return out;
}

// x [..., n_x, ...], index [n] -> [..., n, ...]
Tensor index_select_cuda(const Tensor& x, int64_t dim, const Tensor& index) {
  kernels::IndexPlan p = kernels::plan_index_select(x, dim, index);
  DeviceGuard guard(x.device().index);
  Tensor idx = kernels::contiguous_as(index);
  int64_t n = idx.numel();
  check_indices(idx, p.n_x, p.dim, "index_select");
  Tensor out = new_tensor(kernels::index_select_out_sizes(p, x, index, n), x.dtype(), x.device());
  Tensor xc = kernels::contiguous_as(x);
  launch_index_select(xc.data_ptr(), out.data_ptr(), static_cast<int>(x.element_size()), index_ptr(idx), n, p.outer,
                      p.n_x, p.inner, current_stream());
  return out;
}

// Out-of-place index_add: out = x; out[..., index[j], ...] += src[..., j, ...]
Tensor index_add_cuda(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  kernels::IndexPlan p = kernels::plan_index_add(x, dim, index, src);
  int64_t n = index.numel();
  DeviceGuard guard(x.device().index);
  Tensor idx = kernels::contiguous_as(index);
  check_indices(idx, p.n_x, p.dim, "index_add");
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  rh::copy_strided(out, x);
  Tensor s = kernels::contiguous_as(src);
  launch_index_add(s.data_ptr(), x.dtype(), index_ptr(idx), n, p.outer, p.n_x, p.inner, out.data_ptr(),
                   current_stream());
  return out;
}

// out[p] = x[p with p[dim] replaced by index[p]]; out has index's shape.
Tensor gather_cuda(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = kernels::plan_gather(x, dim, index);
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(index.sizes(), x.dtype(), x.device());
  Tensor idx = kernels::contiguous_as(index);
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
  dim = kernels::plan_scatter_add(x, dim, index, src);
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  rh::copy_strided(out, x);
  Tensor idx = kernels::contiguous_as(index);
  int64_t n = idx.numel();
  Shape xs = sizes_or_1(x);
  check_indices(idx, xs[dim], dim, "scatter_add");
  if (n == 0) return out;
  GatherGeometry g = gather_geometry(sizes_or_1(idx), dim, strides_or_1(out), strides_or_1(src), "scatter_add");
  launch_scatter_add(src.data_ptr(), x.dtype(), index_ptr(idx), out.data_ptr(), g, current_stream());
  return out;
}

// indices [*] (int64) -> [*, num_classes] int64; num_classes = -1 infers max + 1.
Tensor one_hot_cuda(const Tensor& indices, int64_t num_classes) {
  kernels::check_one_hot(indices, num_classes);
  DeviceGuard guard(indices.device().index);
  Tensor idx = kernels::contiguous_as(indices);
  int64_t n = idx.numel();
  std::optional<int64_t> negative = rh::first_negative(idx);
  if (negative) kernels::one_hot_negative_error(*negative);
  if (num_classes == -1) {
    kernels::check_one_hot_inferable(indices, n);
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

}  // namespace graft::cuda
