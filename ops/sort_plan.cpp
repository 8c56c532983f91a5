// Checks and geometry shared by the CPU and CUDA topk (sort_plan.h).
#include "ops/sort_plan.h"

#include "ops/index_plan.h"
#include "ops/kernel_utils.h"

namespace graft::kernels {

TopkPlan plan_topk(const Tensor& x, int64_t k, int64_t dim) {
  check_defined(x, "topk", "self");
  GRAFT_CHECK(x.dtype() != kBool, "topk: bool tensors are not supported, got ", describe(x));
  TopkPlan p;
  p.dim = wrap_dim(dim, x.dim(), "topk");
  const Shape xs = sizes_or_1(x);
  p.len = xs[p.dim];
  GRAFT_CHECK(k >= 0 && k <= p.len, "topk: selected index k out of range (k = ", k, ", size ", p.len, " at dim ",
              p.dim, " of ", describe(x), ")");
  p.outer = size_product(xs, 0, static_cast<size_t>(p.dim));
  p.inner = size_product(xs, static_cast<size_t>(p.dim) + 1, xs.size());
  if (x.dim() == 0) {
    p.k = 1;  // the element itself, for k = 0 as well (PyTorch)
    return p;
  }
  p.k = k;
  p.out_sizes = x.sizes();
  p.out_sizes[p.dim] = k;
  return p;
}

}  // namespace graft::kernels
