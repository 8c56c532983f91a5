#pragma once
// The device-independent half of the reductions (sum, mean, amax/amin, max/min with indices,
// argmax/argmin, var/std, norm, logsumexp): resolving `dims` against the input (wrapping, repeats,
// keepdim) into an output shape and a [n_out rows x len] reduction, the empty-dim check of ops
// without an identity, and the dim orders the kernels read the input in. ops/reduce.cpp (CPU)
// and cuda/reduce_cuda.cpp supply only the arithmetic.
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/norm_kind.h"
#include "runtime/tensor.h"

namespace graft::kernels {

// The result of resolving `dims` against x: which dims are reduced, the output shape, and the
// reduction as n_out rows of len elements.
struct ReduceLayout {
  std::vector<char> reduced;  // per input dim
  Shape out_sizes;
  int64_t n_out = 1;
  int64_t len = 1;
};

// dims empty = every dim. Negative dims wrap; a dim named twice is an error (as PyTorch).
ReduceLayout plan_reduction(const Tensor& x, const Shape& dims, bool keepdim, const char* op);
// norm: checks x (defined, floating) and p (not NaN; +-inf needs non-empty rows: no identity),
// classifies p for the kernels, and lays out the reduction as plan_reduction.
struct NormPlan {
  NormKind kind;
  ReduceLayout layout;
};
NormPlan plan_norm(const Tensor& x, double p, const Shape& dims, bool keepdim);
// sum's result dtype: the requested one, else x's floating dtype, else int64 (bool and int64 sum
// as int64, as PyTorch). mean takes floating inputs only.
DType sum_dtype(const Tensor& x, std::optional<DType> dtype);
void check_mean(const Tensor& x);
// Ops with no identity (max, argmax, ...) cannot reduce an empty dim.
void check_nonempty_reduction(const Tensor& x, const ReduceLayout& p, const char* op);
// x's dims reordered: kept dims first (reduced_first = false) or reduced dims first.
void reordered(const Tensor& x, const ReduceLayout& p, bool reduced_first, Shape& sizes, Shape& strides);
// sizes/strides of x's dims in this order: kept dims before the first reduced dim, reduced dims,
// the other kept dims. With no kept dim after a reduced one this is [n_out, len].
void blocked_order(const Tensor& x, const ReduceLayout& p, Shape& sizes, Shape& strides, int64_t& outer,
                   int64_t& inner);

}  // namespace graft::kernels
