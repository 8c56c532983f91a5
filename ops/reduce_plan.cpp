// Dim resolution and read orders shared by the CPU and CUDA reductions (reduce_plan.h).
#include "ops/reduce_plan.h"

#include <cmath>
#include <limits>
#include <utility>

#include "ops/kernel_utils.h"

namespace graft::kernels {

ReduceLayout plan_reduction(const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
  int64_t nd = x.dim();
  ReduceLayout p;
  p.reduced.assign(static_cast<size_t>(nd), dims.empty() ? 1 : 0);
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;  // dim 0 / -1 of a 0-d tensor names the scalar itself
    GRAFT_CHECK(!p.reduced[w], op, ": dim ", w, " appears multiple times in the list of dims ", shape_str(dims));
    p.reduced[w] = 1;
  }
  for (int64_t i = 0; i < nd; ++i) {
    int64_t s = x.size(i);
    if (p.reduced[i]) {
      p.len *= s;
      if (keepdim) p.out_sizes.push_back(1);
    } else {
      p.n_out *= s;
      p.out_sizes.push_back(s);
    }
  }
  return p;
}

NormPlan plan_norm(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  check_defined(x, "norm", "self");
  GRAFT_CHECK(is_floating(x.dtype()), "norm: expected a floating point input, got ", describe(x));
  GRAFT_CHECK(!std::isnan(p), "norm: p must not be NaN");
  constexpr double inf = std::numeric_limits<double>::infinity();
  NormKind kind = p == 0      ? NormKind::Zero
                  : p == 1    ? NormKind::One
                  : p == 2    ? NormKind::Two
                  : p == inf  ? NormKind::Inf
                  : p == -inf ? NormKind::NegInf
                              : NormKind::General;
  ReduceLayout lay = plan_reduction(x, dims, keepdim, "norm");
  if (kind == NormKind::Inf || kind == NormKind::NegInf) {
    GRAFT_CHECK(lay.len > 0, "norm: cannot compute the ", p, " norm of an empty reduction (input ", describe(x),
                "): it has no identity");
  }
  return {kind, std::move(lay)};
}

void check_nonempty_reduction(const Tensor& x, const ReduceLayout& p, const char* op) {
  if (p.len != 0) return;
  for (int64_t i = 0; i < x.dim(); ++i)
    GRAFT_CHECK(!(p.reduced[i] && x.size(i) == 0), op, ": expected reduction dim ", i,
                " to have non-zero size (input ", describe(x), ")");
}

void reordered(const Tensor& x, const ReduceLayout& p, bool reduced_first, Shape& sizes, Shape& strides) {
  sizes.clear();
  strides.clear();
  for (int pass = 0; pass < 2; ++pass) {
    bool want_reduced = (pass == 0) == reduced_first;
    for (int64_t i = 0; i < x.dim(); ++i) {
      if (static_cast<bool>(p.reduced[i]) != want_reduced) continue;
      sizes.push_back(x.size(i));
      strides.push_back(x.stride(i));
    }
  }
}

void blocked_order(const Tensor& x, const ReduceLayout& p, Shape& sizes, Shape& strides, int64_t& outer,
                   int64_t& inner) {
  int64_t nd = x.dim(), first = nd;
  for (int64_t i = 0; i < nd; ++i)
    if (p.reduced[i]) {
      first = i;
      break;
    }
  outer = inner = 1;
  for (int pass = 0; pass < 3; ++pass)
    for (int64_t i = 0; i < nd; ++i) {
      bool take = pass == 0 ? !p.reduced[i] && i < first : pass == 1 ? p.reduced[i] : !p.reduced[i] && i > first;
      if (!take) continue;
      sizes.push_back(x.size(i));
      strides.push_back(x.stride(i));
      if (pass == 0) outer *= x.size(i);
      if (pass == 2) inner *= x.size(i);
    }
}

DType sum_dtype(const Tensor& x, std::optional<DType> dtype) {
  check_defined(x, "sum", "self");
  return dtype.value_or(is_floating(x.dtype()) ? x.dtype() : kInt64);
}

void check_mean(const Tensor& x) {
  check_defined(x, "mean", "self");
  GRAFT_CHECK(is_floating(x.dtype()), "mean: expected a floating point input, got ", describe(x),
              " (cast integer tensors to a floating dtype first, as in PyTorch)");
}

}  // namespace graft::kernels
