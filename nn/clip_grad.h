#pragma once
// nn::utils::clip_grad_norm_ (torch.nn.utils.clip_grad_norm_): rescales the gradients of a list of
// parameters in place so that their total norm is at most max_norm.
//
// Invariants (PyTorch 2.x's):
// - The total norm is the norm_type-norm of the per-parameter gradient norms (each computed on
//   its gradient's device, gathered on the first gradient's device), so it equals the norm of all
//   gradients seen as one vector; norm_type inf takes the largest |element|. It is returned as a
//   0-d tensor in the gradients' promoted dtype (float32 0 for a list with no gradient).
// - Parameters without a gradient are skipped; the gradients keep their dtype and device.
// - Every gradient is multiplied in place by min(max_norm / (total + 1e-6), 1), the coefficient
//   computed in the total's dtype, also when it is 1 (no branch on the device's value): a
//   non-finite total turns the gradients into NaN unless error_if_nonfinite, which throws first
//   and leaves them as they were.
// - Nothing is recorded for autograd (it runs under no_grad), and no new kernel runs: it is
//   norm, stack, add, rdiv, clamp and mul_.
#include <vector>

#include "runtime/tensor.h"

namespace graft::nn::utils {

Tensor clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm, double norm_type = 2.0,
                       bool error_if_nonfinite = false);

}  // namespace graft::nn::utils
