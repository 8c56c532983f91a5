// softmax / log_softmax (+ backward) and the losses on CUDA: nll_loss (+ backward),
// cross_entropy_log_probs and mse_loss. Checks, messages, shapes and reductions come from the
// shared plan (ops/softmax_loss_plan.h), as on the CPU; kernels in cuda/kernels/softmax_loss.cu.
//
// Class targets are validated on the device before the loss kernels run (one small reduction and
// a copy back of the first offending position), so a bad target is a graft::Error naming the same
// value the CPU would name, never a device assert or an out-of-bounds read.
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/softmax_loss.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "ops/softmax_loss_plan.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::ClassLossPlan;
using kernels::DimSplit;
using kernels::new_tensor;
namespace rh = reduce_helpers;

// ---- softmax ----

// x: [outer, D, inner] -> y of x's shape.
Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  DimSplit s = kernels::plan_softmax(x, dim, op);
  DeviceGuard guard(x.device().index);
  Tensor in = kernels::contiguous_as(x);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  launch_softmax_forward(in.data_ptr(), out.data_ptr(), x.dtype(), log, s.outer, s.size, s.inner, current_stream());
  return out;
}

// grad, out: [outer, D, inner] -> grad_input of out's shape.
Tensor softmax_backward_impl(const Tensor& grad, const Tensor& out, int64_t dim, bool log, const char* op) {
  DimSplit s = kernels::plan_softmax_backward(grad, out, dim, op);
  DeviceGuard guard(out.device().index);
  Tensor g = kernels::contiguous_as(grad), y = kernels::contiguous_as(out);
  Tensor gx = new_tensor(out.sizes(), out.dtype(), out.device());
  if (out.numel() == 0) return gx;
  launch_softmax_backward(g.data_ptr(), y.data_ptr(), gx.data_ptr(), out.dtype(), log, s.outer, s.size, s.inner,
                          current_stream());
  return gx;
}

// ---- losses (checks and shapes: ops/softmax_loss_plan.h) ----

// Throws for the first target (in order) that is neither ignore_index nor in [0, C).
void validate_targets(const Tensor& tc, int64_t C, int64_t ignore_index, const char* op) {
  std::optional<int64_t> bad = rh::first_bad_index(tc, 0, C, ignore_index);
  if (bad) kernels::bad_class_target_error(*bad, C, op);
}

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// The reduced loss is a 0-d tensor; 'none' returns the per-sample losses.
Tensor loss_output(LossReduction red, const Shape& per_sample, DType dt, Device dev) {
  return red == LossReduction::None ? new_tensor(per_sample, dt, dev) : new_tensor({}, dt, dev);
}

Tensor class_index_loss(const Tensor& lp_in, const Tensor& target_in, const Tensor& weight_in, LossReduction red,
                        int64_t ignore_index, double ls, const ClassLossPlan& l, const char* op) {
  DeviceGuard guard(lp_in.device().index);
  Tensor lpc = kernels::contiguous_as(lp_in), tc = kernels::contiguous_as(target_in);
  Tensor wc = weight_in.defined() ? kernels::contiguous_as(weight_in) : Tensor();
  validate_targets(tc, l.C, ignore_index, op);
  Tensor out = loss_output(red, l.per_sample, lp_in.dtype(), lp_in.device());
  Tensor scratch = rh::scratch(kLossScratchDoubles * 8, lp_in.device());
  launch_class_index_loss(lpc.data_ptr(), static_cast<const int64_t*>(tc.data_ptr()), ptr_or_null(wc), lp_in.dtype(),
                          l.N * l.S, l.C, l.S, ignore_index, ls, red, out.data_ptr(), out.data_ptr(),
                          static_cast<double*>(scratch.data_ptr()), current_stream());
  return out;
}

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor softmax_cuda(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, false, "softmax"); }

Tensor log_softmax_cuda(const Tensor& x, int64_t dim) { return softmax_impl(x, dim, true, "log_softmax"); }

Tensor softmax_backward_cuda(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad, out, dim, false, "softmax_backward");
}

Tensor log_softmax_backward_cuda(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_impl(grad, out, dim, true, "log_softmax_backward");
}

Tensor nll_loss_cuda(const Tensor& lp, const Tensor& target, const Tensor& weight, LossReduction reduction,
                     int64_t ignore_index) {
  const char* op = "nll_loss";
  ClassLossPlan l = kernels::plan_nll_loss(lp, target, weight, reduction, op);
  return class_index_loss(lp, target, weight, l.reduction, ignore_index, 0.0, l, op);
}

// grad_input[n, t, s] = -w[t] * g(n, s), where g is grad_out (none) or grad_out / total_weight
// (mean) or grad_out (sum); zero for every other class and for ignored targets.
Tensor nll_loss_backward_cuda(const Tensor& grad_out, const Tensor& lp, const Tensor& target, const Tensor& weight,
                              LossReduction reduction, int64_t ignore_index) {
  const char* op = "nll_loss_backward";
  ClassLossPlan l = kernels::plan_nll_loss_backward(grad_out, lp, target, weight, reduction, op);
  LossReduction red = l.reduction;
  DeviceGuard guard(lp.device().index);
  Tensor gx = new_tensor(lp.sizes(), lp.dtype(), lp.device());
  rh::zero_dense(gx);
  Tensor tc = kernels::contiguous_as(target), gc = kernels::contiguous_as(grad_out, lp.dtype());
  Tensor wc = weight.defined() ? kernels::contiguous_as(weight) : Tensor();
  validate_targets(tc, l.C, ignore_index, op);
  Tensor scratch = rh::scratch(kLossScratchDoubles * 8, lp.device());
  launch_nll_loss_backward(gc.data_ptr(), static_cast<const int64_t*>(tc.data_ptr()), ptr_or_null(wc), lp.dtype(),
                           l.N * l.S, l.C, l.S, ignore_index, red, gx.data_ptr(),
                           static_cast<double*>(scratch.data_ptr()), current_stream());
  return gx;
}

// The loss of cross_entropy once log_softmax is taken, for the cases nll_loss does not cover:
// label smoothing, or class-probability targets.
Tensor cross_entropy_log_probs_cuda(const Tensor& lp, const Tensor& target, const Tensor& weight,
                                    LossReduction reduction, int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  ClassLossPlan l = kernels::plan_cross_entropy(lp, target, weight, reduction, ignore_index, label_smoothing, op);
  LossReduction red = l.reduction;
  if (l.probability_targets) {
    DeviceGuard guard(lp.device().index);
    Tensor lpc = kernels::contiguous_as(lp), tc = kernels::contiguous_as(target, lp.dtype());
    Tensor wc = weight.defined() ? kernels::contiguous_as(weight) : Tensor();
    Tensor out = loss_output(red, l.per_sample, lp.dtype(), lp.device());
    Tensor scratch = rh::scratch(kLossScratchDoubles * 8, lp.device());
    launch_probability_loss(lpc.data_ptr(), tc.data_ptr(), ptr_or_null(wc), lp.dtype(), l.N * l.S, l.C, l.S,
                            label_smoothing, red, out.data_ptr(), out.data_ptr(),
                            static_cast<double*>(scratch.data_ptr()), current_stream());
    return out;
  }
  return class_index_loss(lp, target, weight, red, ignore_index, label_smoothing, l, op);
}

Tensor mse_loss_cuda(const Tensor& input, const Tensor& target, LossReduction reduction) {
  const char* op = "mse_loss";
  kernels::MseLossPlan plan = kernels::plan_mse_loss(input, target, reduction, op);
  LossReduction red = plan.reduction;
  DType dt = plan.dtype;
  DeviceGuard guard(input.device().index);
  Tensor a = kernels::contiguous_as(input, dt), b = kernels::contiguous_as(target, dt);
  Tensor out = loss_output(red, input.sizes(), dt, input.device());
  Tensor scratch = rh::scratch(kLossScratchDoubles * 8, input.device());
  launch_mse_loss(a.data_ptr(), b.data_ptr(), dt, input.numel(), red, out.data_ptr(), out.data_ptr(),
                  static_cast<double*>(scratch.data_ptr()), current_stream());
  return out;
}

}  // namespace graft::cuda
