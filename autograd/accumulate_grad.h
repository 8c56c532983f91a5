#pragma once
// AccumulateGrad: the sink node of a leaf. It runs the leaf's hooks, then adds the gradient into
// leaf.grad(): in place when grad mode is off (the usual backward), out of place under
// create_graph so the accumulated grad keeps its own history. Then it runs the leaf's
// post-accumulate-grad hooks (owned by the leaf's meta, so they need no one to hold this node).
#include "autograd/autograd_meta.h"
#include "autograd/node.h"

#include <functional>

namespace graft::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(Tensor variable);
  std::string name() const override { return "AccumulateGrad"; }
  variable_list apply(variable_list&& grads) override;
  // A leaf's tensor hooks live on the leaf (they outlive any one accumulator).
  void run_tensor_pre_hooks(variable_list& grads) override;
  const Tensor& variable() const { return variable_; }
  const Tensor* accumulated_leaf() const override { return &variable_; }
  // Direct accumulation: a node whose gradient for this leaf is a fresh product (a weight's g^T x)
  // can add it straight into the leaf's existing .grad instead of returning a temporary for this
  // node to add: the same sum without a weight-sized buffer alive during backward. This node
  // decides; it calls add(.grad) (under the leaf's lock) only when the result is indistinguishable
  // from the usual path, i.e. all of:
  // - grad mode is off (no create_graph: the accumulated grad keeps no history anyway);
  // - the running task runs this node without capturing (not grad(), not a backward(inputs=) that
  //   skips it), and neither it nor the leaf has tensor hooks, retain_grad, node hooks or
  //   post-accumulate-grad hooks, since those must see the gradient as a separate tensor;
  // - .grad exists, does not require grad, and is contiguous with the leaf's shape, dtype, device.
  // The caller then returns an undefined gradient for this edge.
  bool accumulate_directly(const std::function<void(Tensor& dest)>& add) override;

 private:
  Tensor variable_;  // strong: the leaf's meta holds this node only weakly
};

// Runs a leaf's registered hooks on `grad` (used by AccumulateGrad and by grad()'s capture).
Tensor run_leaf_hooks(const Tensor& leaf, Tensor grad);
// Adds `grad` into t's .grad (steals `grad` when nothing else refers to it and grad mode is off).
void accumulate_into_grad(const Tensor& t, Tensor grad);

}  // namespace graft::autograd
