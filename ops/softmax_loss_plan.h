#pragma once
// The device-independent half of softmax, log_softmax and the losses (nll_loss, cross_entropy,
// mse_loss): argument checks, dtype rules, output shapes and the [outer, D, inner] / [N, C, S]
// geometry. ops/softmax.cpp and ops/loss.cpp (CPU) and cuda/softmax_loss_cuda.cpp supply only the
// arithmetic, so both devices accept the same inputs and fail with the same messages.
//
// PyTorch's semantics for the class losses:
// - log_probs is [C] (target 0-d), [N, C] (target [N]) or [N, C, d...] (target [N, d...]).
// - A target equal to ignore_index contributes neither loss nor weight; any other target outside
//   [0, C) is an error (bad_class_target_error), found by each device while it reads the targets.
// - "mean" divides by the summed weights of the counted targets (their count without weights).
#include <cstdint>
#include <string>

#include "runtime/option.h"
#include "runtime/tensor.h"

namespace graft::kernels {

// A tensor as [outer, D, inner] around one dim: element (o, d, i) of a contiguous tensor is at
// (o * D + d) * inner + i.
struct DimSplit {
  int64_t outer = 1, size = 1, inner = 1;
};

// softmax / log_softmax of x over `dim` (wrapped): checks x, returns its split (0-d: 1 x 1 x 1).
DimSplit plan_softmax(const Tensor& x, int64_t dim, const char* op);
// Their backward from grad_output and the forward's output: same shape and dtype required.
DimSplit plan_softmax_backward(const Tensor& grad, const Tensor& out, int64_t dim, const char* op);

// log_probs as [N, C, S]: element (n, c, s) at (n * C + c) * S + s; target element (n, s) at n * S + s.
struct ClassLossPlan {
  LossReduction reduction = LossReduction::Mean;
  int64_t N = 1, C = 1, S = 1;
  Shape per_sample;  // shape of the unreduced loss: log_probs without the class dim
  // cross_entropy only: the targets are class probabilities (log_probs' shape), not indices.
  bool probability_targets = false;
};

ClassLossPlan plan_nll_loss(const Tensor& lp, const Tensor& target, const Tensor& weight,
                            LossReduction reduction, const char* op);
// Also checks grad_output: the per-sample shape for 'none', a single element otherwise.
ClassLossPlan plan_nll_loss_backward(const Tensor& grad_out, const Tensor& lp, const Tensor& target,
                                     const Tensor& weight, LossReduction reduction, const char* op);
// cross_entropy_log_probs: label smoothing in [0, 1]; class-index or probability targets.
ClassLossPlan plan_cross_entropy(const Tensor& lp, const Tensor& target, const Tensor& weight,
                                 LossReduction reduction, int64_t ignore_index, double label_smoothing,
                                 const char* op);
[[noreturn]] void bad_class_target_error(int64_t target, int64_t C, const char* op);

struct MseLossPlan {
  LossReduction reduction = LossReduction::Mean;
  DType dtype = kFloat32;  // both operands are read as this (promoted) dtype
};
MseLossPlan plan_mse_loss(const Tensor& input, const Tensor& target, LossReduction reduction, const char* op);

}  // namespace graft::kernels
