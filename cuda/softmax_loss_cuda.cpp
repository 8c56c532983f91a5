// softmax / log_softmax (+ backward) and the losses on CUDA: nll_loss (+ backward),
// cross_entropy_log_probs and mse_loss. Same checks, messages, shapes and reductions as
// ops/softmax.cpp and ops/loss.cpp; kernels in cuda/kernels/softmax_loss.cu.
//
// Class targets are validated on the device before the loss kernels run (one small reduction and
// a copy back of the first offending position), so a bad target is a graft::Error naming the same
// value the CPU would name, never a device assert or an out-of-bounds read.
#include "cuda/cuda_context.h"
#include "cuda/kernels/softmax_loss.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::check_floating;
using kernels::new_tensor;
namespace rh = reduce_helpers;

// ---- softmax ----

struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};

DimSplit split_at(const Tensor& x, int64_t dim) {
  DimSplit s;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < dim) s.outer *= x.size(i);
    else if (i == dim) s.size = x.size(i);
    else s.inner *= x.size(i);
  }
  return s;
}

// x: [outer, D, inner] -> y of x's shape.
Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  check_defined(x, op, "self");
  check_floating(x, op);
  int64_t d = wrap_dim(dim, x.dim(), op);
  DeviceGuard guard(x.device().index);
  Tensor in = rh::contiguous_as(x);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  DimSplit s = x.dim() == 0 ? DimSplit{} : split_at(x, d);
  launch_softmax_forward(in.data_ptr(), out.data_ptr(), x.dtype(), log, s.outer, s.size, s.inner, current_stream());
  return out;
}

Tensor softmax_cuda(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax"); }
Tensor log_softmax_cuda(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax"); }

// grad, out: [outer, D, inner] -> grad_input of out's shape.
Tensor softmax_backward_impl(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const char* op) {
  check_defined(grad, op, "grad_output");
  check_defined(out, op, "output");
  check_floating(out, op);
  GRAFT_CHECK(grad.sizes() == out.sizes() && grad.dtype() == out.dtype(), op, ": grad_output ", describe(grad),
              " does not match output ", describe(out));
  int64_t d = wrap_dim(dim, out.dim(), op);
  DeviceGuard guard(out.device().index);
  Tensor g = rh::contiguous_as(grad), y = rh::contiguous_as(out);
  Tensor gx = new_tensor(out.sizes(), out.dtype(), out.device());
  if (out.numel() == 0) return gx;
  DimSplit s = out.dim() == 0 ? DimSplit{} : split_at(out, d);
  launch_softmax_backward(g.data_ptr(), y.data_ptr(), gx.data_ptr(), out.dtype(), log, s.outer, s.size, s.inner,
                          current_stream());
  return gx;
}

Tensor softmax_backward_cuda(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad, out, dim, false, "softmax_backward");
}
Tensor log_softmax_backward_cuda(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad, out, dim, true, "log_softmax_backward");
}

// ---- losses (checks as ops/loss.cpp) ----

LossReduction parse_reduction(const std::string& r, const char* op) {
  if (r == "mean") return LossReduction::Mean;
  if (r == "sum") return LossReduction::Sum;
  if (r == "none") return LossReduction::None;
  GRAFT_ERROR(op, ": reduction must be 'mean', 'sum' or 'none', got '", r, "'");
}

// log_probs as [N, C, S]: element (n, c, s) at (n * C + c) * S + s; target element (n, s) at n * S + s.
struct ClassLayout {
  int64_t N = 1, C = 1, S = 1;
  Shape per_sample;  // shape of the unreduced loss: log_probs without the class dim
};

ClassLayout class_layout(const Tensor& lp, const char* op) {
  check_floating(lp, op);
  GRAFT_CHECK(lp.dim() >= 1, op, ": expected an input with a class dim (1-D or more), got ", describe(lp));
  ClassLayout l;
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

void check_class_target(const Tensor& lp, const Tensor& target, const ClassLayout& l, const char* op) {
  check_defined(target, op, "target");
  GRAFT_CHECK(target.dtype() == kInt64, op, ": expected int64 class indices as target, got ", describe(target));
  GRAFT_CHECK(target.sizes() == l.per_sample, op, ": expected target of shape ", shape_str(l.per_sample),
              " for input of shape ", shape_str(lp.sizes()), ", got target of shape ", shape_str(target.sizes()));
}

void check_weight(const Tensor& weight, const Tensor& lp, const ClassLayout& l, const char* op) {
  if (!weight.defined()) return;
  GRAFT_CHECK(weight.dim() == 1 && weight.size(0) == l.C, op, ": expected a weight of shape [", l.C,
              "] (one per class), got ", describe(weight));
  GRAFT_CHECK(weight.dtype() == lp.dtype(), op, ": weight ", describe(weight), " must have the dtype of input ",
              describe(lp));
}

// Throws for the first target (in order) that is neither ignore_index nor in [0, C).
void validate_targets(const Tensor& tc, int64_t C, int64_t ignore_index, const char* op) {
  std::optional<int64_t> bad = rh::first_bad_index(tc, 0, C, ignore_index);
  GRAFT_CHECK(!bad, op, ": target ", *bad, " is out of bounds: expected a class index in [0, ", C, ") (C = ", C,
              ") or ignore_index");
}

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// The reduced loss is a 0-d tensor; 'none' returns the per-sample losses.
Tensor loss_output(LossReduction red, const Shape& per_sample, DType dt, Device dev) {
  return red == LossReduction::None ? new_tensor(per_sample, dt, dev) : new_tensor({}, dt, dev);
}

Tensor class_index_loss(const Tensor& lp_in, const Tensor& target_in, const Tensor& weight_in, LossReduction red,
                        int64_t ignore_index, double ls, const ClassLayout& l, const char* op) {
  DeviceGuard guard(lp_in.device().index);
  Tensor lpc = rh::contiguous_as(lp_in), tc = rh::contiguous_as(target_in);
  Tensor wc = weight_in.defined() ? rh::contiguous_as(weight_in) : Tensor();
  validate_targets(tc, l.C, ignore_index, op);
  Tensor out = loss_output(red, l.per_sample, lp_in.dtype(), lp_in.device());
  Tensor scratch = rh::scratch(kLossScratchDoubles * 8, lp_in.device());
  launch_class_index_loss(lpc.data_ptr(), static_cast<const int64_t*>(tc.data_ptr()), ptr_or_null(wc), lp_in.dtype(),
                          l.N * l.S, l.C, l.S, ignore_index, ls, red, out.data_ptr(), out.data_ptr(),
                          static_cast<double*>(scratch.data_ptr()), current_stream());
  return out;
}

Tensor nll_loss_cuda(const Tensor& lp, const Tensor& target, Tensor weight, const std::string& reduction,
                     int64_t ignore_index) {
  const char* op = "nll_loss";
  check_defined(lp, op, "input");
  LossReduction red = parse_reduction(reduction, op);
  ClassLayout l = class_layout(lp, op);
  check_class_target(lp, target, l, op);
  check_weight(weight, lp, l, op);
  return class_index_loss(lp, target, weight, red, ignore_index, 0.0, l, op);
}

// grad_input[n, t, s] = -w[t] * g(n, s), where g is grad_out (none) or grad_out / total_weight
// (mean) or grad_out (sum); zero for every other class and for ignored targets.
Tensor nll_loss_backward_cuda(const Tensor& grad_out, const Tensor& lp, const Tensor& target, Tensor weight,
                              const std::string& reduction, int64_t ignore_index) {
  const char* op = "nll_loss_backward";
  check_defined(grad_out, op, "grad_output");
  check_defined(lp, op, "input");
  LossReduction red = parse_reduction(reduction, op);
  ClassLayout l = class_layout(lp, op);
  check_class_target(lp, target, l, op);
  check_weight(weight, lp, l, op);
  if (red == LossReduction::None)
    GRAFT_CHECK(grad_out.sizes() == l.per_sample, op, ": expected grad_output of shape ", shape_str(l.per_sample),
                " (reduction 'none'), got ", describe(grad_out));
  else
    GRAFT_CHECK(grad_out.numel() == 1, op, ": expected a single-element grad_output for reduction '", reduction,
                "', got ", describe(grad_out));
  DeviceGuard guard(lp.device().index);
  Tensor gx = new_tensor(lp.sizes(), lp.dtype(), lp.device());
  rh::zero_dense(gx);
  Tensor tc = rh::contiguous_as(target), gc = rh::contiguous_as(grad_out, lp.dtype());
  Tensor wc = weight.defined() ? rh::contiguous_as(weight) : Tensor();
  validate_targets(tc, l.C, ignore_index, op);
  Tensor scratch = rh::scratch(kLossScratchDoubles * 8, lp.device());
  launch_nll_loss_backward(gc.data_ptr(), static_cast<const int64_t*>(tc.data_ptr()), ptr_or_null(wc), lp.dtype(),
                           l.N * l.S, l.C, l.S, ignore_index, red, gx.data_ptr(),
                           static_cast<double*>(scratch.data_ptr()), current_stream());
  return gx;
}

// The loss of cross_entropy once log_softmax is taken, for the cases nll_loss does not cover:
// label smoothing, or class-probability targets.
Tensor cross_entropy_log_probs_cuda(const Tensor& lp, const Tensor& target, Tensor weight,
                                    const std::string& reduction, int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  check_defined(lp, op, "input");
  check_defined(target, op, "target");
  LossReduction red = parse_reduction(reduction, op);
  ClassLayout l = class_layout(lp, op);
  check_weight(weight, lp, l, op);
  GRAFT_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, ": label_smoothing must be in [0, 1], got ",
              label_smoothing);
  if (is_floating(target.dtype())) {
    GRAFT_CHECK(target.sizes() == lp.sizes(), op, ": probability targets must have the input's shape ",
                shape_str(lp.sizes()), ", got ", describe(target));
    GRAFT_CHECK(ignore_index < 0, op, ": ignore_index is only supported for class-index targets, not for ",
                describe(target));
    DeviceGuard guard(lp.device().index);
    Tensor lpc = rh::contiguous_as(lp), tc = rh::contiguous_as(target, lp.dtype());
    Tensor wc = weight.defined() ? rh::contiguous_as(weight) : Tensor();
    Tensor out = loss_output(red, l.per_sample, lp.dtype(), lp.device());
    Tensor scratch = rh::scratch(kLossScratchDoubles * 8, lp.device());
    launch_probability_loss(lpc.data_ptr(), tc.data_ptr(), ptr_or_null(wc), lp.dtype(), l.N * l.S, l.C, l.S,
                            label_smoothing, red, out.data_ptr(), out.data_ptr(),
                            static_cast<double*>(scratch.data_ptr()), current_stream());
    return out;
  }
  check_class_target(lp, target, l, op);
  return class_index_loss(lp, target, weight, red, ignore_index, label_smoothing, l, op);
}

Tensor mse_loss_cuda(const Tensor& input, const Tensor& target, const std::string& reduction) {
  const char* op = "mse_loss";
  check_defined(input, op, "input");
  check_defined(target, op, "target");
  LossReduction red = parse_reduction(reduction, op);
  GRAFT_CHECK(input.sizes() == target.sizes(), op, ": input of shape ", shape_str(input.sizes()),
              " and target of shape ", shape_str(target.sizes()), " must have the same shape");
  GRAFT_CHECK(is_floating(input.dtype()) && is_floating(target.dtype()), op,
              ": expected floating point input and target, got ", describe(input), " and ", describe(target));
  DType dt = promote_types(input.dtype(), target.dtype());
  DeviceGuard guard(input.device().index);
  Tensor a = rh::contiguous_as(input, dt), b = rh::contiguous_as(target, dt);
  Tensor out = loss_output(red, input.sizes(), dt, input.device());
  Tensor scratch = rh::scratch(kLossScratchDoubles * 8, input.device());
  launch_mse_loss(a.data_ptr(), b.data_ptr(), dt, input.numel(), red, out.data_ptr(), out.data_ptr(),
                  static_cast<double*>(scratch.data_ptr()), current_stream());
  return out;
}

}  // namespace

GRAFT_KERNEL("softmax", CUDA, softmax_cuda);
GRAFT_KERNEL("log_softmax", CUDA, log_softmax_cuda);
GRAFT_KERNEL("softmax_backward", CUDA, softmax_backward_cuda);
GRAFT_KERNEL("log_softmax_backward", CUDA, log_softmax_backward_cuda);
GRAFT_KERNEL("nll_loss", CUDA, nll_loss_cuda);
GRAFT_KERNEL("nll_loss_backward", CUDA, nll_loss_backward_cuda);
GRAFT_KERNEL("cross_entropy_log_probs", CUDA, cross_entropy_log_probs_cuda);
GRAFT_KERNEL("mse_loss", CUDA, mse_loss_cuda);

}  // namespace graft::cuda
