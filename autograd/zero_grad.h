#pragma once
// Clearing the .grad of a set of tensors, as torch's Module.zero_grad and Optimizer.zero_grad
// (both call this, so they cannot drift): set_to_none drops each gradient; otherwise a gradient
// that has history (create_graph) is detached first, so zeroing it never writes into a graph, and
// is then zeroed in place.
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

void zero_grads(const std::vector<Tensor>& tensors, bool set_to_none);

}  // namespace graft::autograd
