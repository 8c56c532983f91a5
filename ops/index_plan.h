#pragma once
// The device-independent half of the indexing ops (embedding and its backward, index_select,
// index_add, gather, scatter_add, one_hot): argument checks, wrapped dims, output shapes and the
// [outer, n, inner] geometry. ops/index.cpp (CPU) and cuda/index_cuda.cpp supply the loops and
// the bounds scan of the index values, reporting a bad value through the errors below, so both
// devices word it the same way. Indices are never wrapped: negative values are out of bounds, as
// in PyTorch's indexing kernels.
#include <cstdint>

#include "runtime/tensor.h"

namespace graft::kernels {

// Scalars index like 1-element vectors (PyTorch treats a 0-d tensor as size 1 along dim 0).
Shape sizes_or_1(const Tensor& t);
Shape strides_or_1(const Tensor& t);
// Product of s's sizes in [b, e).
int64_t size_product(const Shape& s, size_t b, size_t e);

[[noreturn]] void index_out_of_bounds_error(int64_t value, int64_t dim, int64_t size, const char* op);

// weight [V, D], indices [*] -> [*, D] (padding_idx only affects the backward).
struct EmbeddingPlan {
  int64_t V = 0, D = 0;
};
EmbeddingPlan plan_embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx);
// grad [*, D], indices [*] -> grad_weight [num_weights, D]; returns D.
int64_t plan_embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx);

// index_select / index_add along `dim` of x seen as [outer, n_x, inner].
struct IndexPlan {
  int64_t dim = 0;
  Shape xs;  // sizes_or_1(x)
  int64_t outer = 1, n_x = 1, inner = 1;
};
IndexPlan plan_index_select(const Tensor& x, int64_t dim, const Tensor& index);
// The output shape once the n index values were checked (a 0-d x takes exactly one).
Shape index_select_out_sizes(const IndexPlan& p, const Tensor& x, const Tensor& index, int64_t n);
IndexPlan plan_index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// gather / scatter_add: the wrapped dim, after PyTorch's shape rules (same ndim; index no larger
// than self outside dim, and no larger than src anywhere for scatter).
int64_t plan_gather(const Tensor& x, int64_t dim, const Tensor& index);
int64_t plan_scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);

// one_hot: indices [*] (int64) -> [*, num_classes]; num_classes = -1 infers max + 1.
void check_one_hot(const Tensor& indices, int64_t num_classes);
[[noreturn]] void one_hot_negative_error(int64_t value);
void check_one_hot_inferable(const Tensor& indices, int64_t n);

}  // namespace graft::kernels
