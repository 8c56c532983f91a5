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

 private:
  Tensor variable_;  // strong: the leaf's meta holds this node only weakly
};

// Runs a leaf's registered hooks on `grad` (used by AccumulateGrad and by grad()'s capture).
Tensor run_leaf_hooks(const Tensor& leaf, Tensor grad);
// Adds `grad` into t's .grad (steals `grad` when nothing else refers to it and grad mode is off).
void accumulate_into_grad(const Tensor& t, Tensor grad);

// Direct accumulation: a node whose gradient for `edge` is a fresh product (a weight's g^T x) can
// add it straight into the leaf's existing .grad instead of returning a temporary for
// AccumulateGrad to add: the same sum without a weight-sized buffer alive during backward.
// `add(grad)` runs (under the leaf's lock) only when the result is indistinguishable from the
// usual path, i.e. all of:
// - grad mode is off (no create_graph: the accumulated grad keeps no history anyway);
// - `edge` leads to an AccumulateGrad that this task runs without capturing (not grad(), not a
//   backward(inputs=) that skips it) and that has no tensor hooks, retain_grad or post hooks,
//   since those must see the gradient as a separate tensor;
// - .grad exists, does not require grad, and is contiguous with the leaf's shape and dtype;
// - the leaf has no post-accumulate-grad hooks (they must run once, after the whole sum).
// Returns whether it ran; the caller then returns an undefined gradient for `edge`.
bool accumulate_directly(const Edge& edge, const std::function<void(Tensor& grad)>& add);

}  // namespace graft::autograd
