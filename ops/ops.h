#pragma once
// graft::ops: the dispatched op library. Each function boxes its arguments and goes through the
// dispatcher (modes, then the device kernel). These calls record no autograd history: the public
// functions in autograd/functional.h wrap them and add it.
//
// Every op is declared once in codegen/ops/*.yaml; its ops:: function is generated from that
// declaration (ops/ops_generated.h, included below), with the same name and arguments as its
// graft:: twin. Below it, a few helpers that are not ops: compositions of the ops above that
// kernels and the engine call without autograd.
//
// Schema conventions (see runtime/op_schema.h): in-place ops end in '_' and write `self`; views
// alias `self`. Reductions take `dim` (empty = all dims) and `keepdim`.
#include <optional>
#include <string>
#include <vector>

#include "runtime/option.h"
#include "runtime/tensor.h"

namespace graft::ops {

// Every declared op (codegen/ops/*.yaml), one dispatched function each.
#include "ops/ops_generated.h"

// ---- not ops: helpers over the ops above (ops/factory.cpp, ops/copy.cpp, ops/view.cpp, ...) ----
Tensor zeros(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor ones(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor& zero_(Tensor& self);
// _to_copy, or self when it already is of that dtype / on that device.
Tensor to_dtype(const Tensor& self, DType dtype);
Tensor to_device(const Tensor& self, Device device, bool non_blocking = false, bool pinned = false);
Tensor contiguous(const Tensor& self);  // self when already contiguous
// Self when it is already dense in `f` (size-1 dims ignored, as PyTorch), else clone(self, f).
Tensor contiguous(const Tensor& self, MemoryFormat f);
Tensor reshape(const Tensor& self, const Shape& sizes);  // a view when possible, else a copy
Tensor flatten(const Tensor& self, int64_t start_dim = 0, int64_t end_dim = -1);
// Sums `grad` down to `shape` (undoes broadcasting): used by every broadcasting derivative.
Tensor sum_to(const Tensor& grad, const Shape& shape);
// log_softmax over the class dim (0 for a 1-D input, else 1), then nll_loss; label smoothing and
// probability targets go to cross_entropy_log_probs. graft::cross_entropy is the differentiable one.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                     Option<LossReduction> reduction = LossReduction::Mean, int64_t ignore_index = -100,
                     double label_smoothing = 0.0);

// Fused optimizer steps (_fused_adam_, _fused_sgd_) with their scalars as one struct: one in-place
// pass over a parameter, its gradient and its state, giving the same bits as the op-by-op update.
struct FusedAdamArgs {
  double lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2;
  bool decoupled;  // AdamW: p *= 1 - lr * wd; Adam: g += wd * p
};
void fused_adam_(Tensor& param, Tensor& exp_avg, Tensor& exp_avg_sq, const Tensor& grad, const FusedAdamArgs& args);
struct FusedSgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first;  // first: the momentum buffer starts as the (decayed) gradient
};
// momentum_buffer is unused (may be undefined) when momentum == 0.
void fused_sgd_(Tensor& param, Tensor& momentum_buffer, const Tensor& grad, const FusedSgdArgs& args);

}  // namespace graft::ops
