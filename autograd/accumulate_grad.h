#pragma once
// AccumulateGrad: the sink node of a leaf. It runs the leaf's hooks, then adds the gradient into
// leaf.grad(): in place when grad mode is off (the usual backward), out of place under
// create_graph so the accumulated grad keeps its own history.
#include "autograd/autograd_meta.h"
#include "autograd/node.h"

namespace graft::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  variable_list apply(variable_list&& grads) override;
  const Tensor& variable() const { return variable_; }

 private:
  Tensor variable_;  // strong: the leaf's meta holds this node only weakly
};

// Runs a leaf's registered hooks on `grad` (used by AccumulateGrad and by grad()'s capture).
Tensor run_leaf_hooks(const Tensor& leaf, Tensor grad);
// Adds `grad` into t's .grad (steals `grad` when nothing else refers to it and grad mode is off).
void accumulate_into_grad(const Tensor& t, Tensor grad);

}  // namespace graft::autograd
