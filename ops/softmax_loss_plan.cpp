// Checks and geometry shared by the CPU and CUDA softmax and loss kernels (softmax_loss_plan.h).
#include "ops/softmax_loss_plan.h"

#include "ops/kernel_utils.h"

namespace graft::kernels {

namespace {

DimSplit split_at(const Tensor& x, int64_t dim) {
  DimSplit s;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < dim) s.outer *= x.size(i);
    else if (i == dim) s.size = x.size(i);
    else s.inner *= x.size(i);
  }
  return s;
}

ClassLossPlan class_layout(const Tensor& lp, LossReduction reduction, const char* op) {
  check_defined(lp, op, "input");
  ClassLossPlan l;
  l.reduction = reduction;
  check_floating(lp, op);
  GRAFT_CHECK(lp.dim() >= 1, op, ": expected an input with a class dim (1-D or more), got ", describe(lp));
  if (lp.dim() == 1) {
    l.C = lp.size(0);
    return l;
  }
  l.N = lp.size(0);
  l.C = lp.size(1);
  l.per_sample.push_back(l.N);
  for (int64_t i = 2; i < lp.dim(); ++i) {
    l.S *= lp.size(i);
    l.per_sample.push_back(lp.size(i));
  }
  return l;
}

void check_class_target(const Tensor& lp, const Tensor& target, const ClassLossPlan& l, const char* op) {
  check_defined(target, op, "target");
  GRAFT_CHECK(target.dtype() == kInt64, op, ": expected int64 class indices as target, got ", describe(target));
  GRAFT_CHECK(target.sizes() == l.per_sample, op, ": expected target of shape ", shape_str(l.per_sample),
              " for input of shape ", shape_str(lp.sizes()), ", got target of shape ", shape_str(target.sizes()));
}

void check_weight(const Tensor& weight, const Tensor& lp, const ClassLossPlan& l, const char* op) {
  if (!weight.defined()) return;
  GRAFT_CHECK(weight.dim() == 1 && weight.size(0) == l.C, op, ": expected a weight of shape [", l.C,
              "] (one per class), got ", describe(weight));
  GRAFT_CHECK(weight.dtype() == lp.dtype(), op, ": weight ", describe(weight), " must have the dtype of input ",
              describe(lp));
}

}  // namespace

DimSplit plan_softmax(const Tensor& x, int64_t dim, const char* op) {
  check_defined(x, op, "self");
  check_floating(x, op);
  int64_t d = wrap_dim(dim, x.dim(), op);
  return x.dim() == 0 ? DimSplit{} : split_at(x, d);
}

DimSplit plan_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim, const char* op) {
  check_defined(grad, op, "grad_output");
  check_defined(out, op, "output");
  check_floating(out, op);
  GRAFT_CHECK(grad.sizes() == out.sizes() && grad.dtype() == out.dtype(), op, ": grad_output ", describe(grad),
              " does not match output ", describe(out));
  int64_t d = wrap_dim(dim, out.dim(), op);
  return out.dim() == 0 ? DimSplit{} : split_at(out, d);
}


ClassLossPlan plan_nll_loss(const Tensor& lp, const Tensor& target, const Tensor& weight,
                            LossReduction reduction, const char* op) {
  ClassLossPlan l = class_layout(lp, reduction, op);
  check_class_target(lp, target, l, op);
  check_weight(weight, lp, l, op);
  return l;
}

ClassLossPlan plan_nll_loss_backward(const Tensor& grad_out, const Tensor& lp, const Tensor& target,
                                     const Tensor& weight, LossReduction reduction, const char* op) {
  check_defined(grad_out, op, "grad_output");
  ClassLossPlan l = plan_nll_loss(lp, target, weight, reduction, op);
  if (l.reduction == LossReduction::None)
    GRAFT_CHECK(grad_out.sizes() == l.per_sample, op, ": expected grad_output of shape ", shape_str(l.per_sample),
                " (reduction 'none'), got ", describe(grad_out));
  else
    GRAFT_CHECK(grad_out.numel() == 1, op, ": expected a single-element grad_output for reduction '", option_name(reduction),
                "', got ", describe(grad_out));
  return l;
}

ClassLossPlan plan_cross_entropy(const Tensor& lp, const Tensor& target, const Tensor& weight,
                                 LossReduction reduction, int64_t ignore_index, double label_smoothing,
                                 const char* op) {
  check_defined(lp, op, "input");
  check_defined(target, op, "target");
  ClassLossPlan l = class_layout(lp, reduction, op);
  check_weight(weight, lp, l, op);
  GRAFT_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, ": label_smoothing must be in [0, 1], got ",
              label_smoothing);
  if (is_floating(target.dtype())) {
    GRAFT_CHECK(target.sizes() == lp.sizes(), op, ": probability targets must have the input's shape ",
                shape_str(lp.sizes()), ", got ", describe(target));
    GRAFT_CHECK(ignore_index < 0, op, ": ignore_index is only supported for class-index targets, not for ",
                describe(target));
    l.probability_targets = true;
    return l;
  }
  check_class_target(lp, target, l, op);
  return l;
}

void bad_class_target_error(int64_t target, int64_t C, const char* op) {
  GRAFT_ERROR(op, ": target ", target, " is out of bounds: expected a class index in [0, ", C, ") (C = ", C,
              ") or ignore_index");
}

MseLossPlan plan_mse_loss(const Tensor& input, const Tensor& target, LossReduction reduction, const char* op) {
  check_defined(input, op, "input");
  check_defined(target, op, "target");
  MseLossPlan p;
  p.reduction = reduction;
  GRAFT_CHECK(input.sizes() == target.sizes(), op, ": input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " must have the same shape");
  GRAFT_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), op,
              ": expected floating point input and target, got ", describe(input), " and ", describe(target));
  p.dtype = promote_types(input.dtype(), target.dtype());
  return p;
}

}  // namespace graft::kernels
