// The public functions declared `composite` in codegen/ops/{view,copy,reduce}.yaml that compose
// views and copies: each is written with differentiable graft:: ops, so its gradient (and every
// higher order) follows from theirs.
#include "autograd/derivatives.h"
#include "ops/view_plan.h"

namespace graft {
using namespace autograd;

Tensor reshape(const Tensor& x, const Shape& shape) {
  Shape target = kernels::infer_size(shape, x.numel(), "reshape", x.sizes());
  if (kernels::view_strides(x.sizes(), x.strides(), target)) return graft::view(x, target);
  return graft::view(graft::clone(x), target);
}

Tensor flatten(const Tensor& x, int64_t start_dim, int64_t end_dim) {
  return graft::reshape(x, kernels::flatten_shape(x.sizes(), start_dim, end_dim));
}

Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : graft::clone(x); }
Tensor contiguous(const Tensor& x, MemoryFormat f) {
  if (f == MemoryFormat::Preserve) return x;
  return x.is_contiguous(f) ? x : graft::clone(x, f);
}

Tensor detach(const Tensor& x) { return ops::alias(x); }

Tensor to(const Tensor& x, DType d) {
  if (x.dtype() == d) return x;
  if (!is_floating(d)) return ops::_to_copy(x, d, x.device());  // integer results carry no gradient
  return graft::_to_copy(x, d, x.device());
}
Tensor to(const Tensor& x, Device dev, bool non_blocking) {
  if (x.device() == dev) return x;
  return graft::_to_copy(x, x.dtype(), dev, non_blocking);
}

Tensor& zero_(Tensor& x) { return graft::fill_(x, 0); }

// Sums `x` over the dims `size` broadcasts (the leading ones, and size-1 ones), then views the
// result in `size`: the inverse of expand.
Tensor sum_to(const Tensor& x, const Shape& size) {
  if (x.sizes() == size) return x;
  int64_t nd = x.dim(), ns = static_cast<int64_t>(size.size());
  GRAFT_CHECK(ns <= nd, "sum_to: cannot sum a tensor of shape ", shape_str(x.sizes()), " to shape ",
              shape_str(size), " (the target has more dims)");
  Shape dims;
  for (int64_t i = 0; i < nd; ++i) {
    int64_t j = i - (nd - ns);
    if (j < 0 || (size[j] == 1 && x.size(i) != 1)) {
      dims.push_back(i);
      continue;
    }
    GRAFT_CHECK(size[j] == x.size(i), "sum_to: cannot sum a tensor of shape ", shape_str(x.sizes()), " to shape ",
                shape_str(size), " (size ", x.size(i), " vs ", size[j], " at dim ", i, ")");
  }
  return graft::view(graft::sum(x, dims, true), size);
}

}  // namespace graft
