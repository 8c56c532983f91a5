#include "autograd/zero_grad.h"

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::autograd {

void zero_grads(const std::vector<Tensor>& tensors, bool set_to_none) {
  for (Tensor p : tensors) {
    Tensor& g = p.mutable_grad();
    if (!g.defined()) continue;
    if (set_to_none) {
      g = Tensor();
    } else {
      NoGradGuard ng;
      if (g.grad_fn()) g = g.detach();
      ops::zero_(g);
    }
  }
}

}  // namespace graft::autograd
