#pragma once
// Nodes that keep views and in-place ops consistent, as PyTorch's:
// - AsStridedBackward: the regenerated grad_fn of a view whose base changed history. Its gradient
//   is scattered into the base's geometry.
// - CopySlices: the new grad_fn of a base after an in-place op on one of its views. Backward runs
//   the in-place op's own node on the slice of the base's gradient that the view covers, and
//   passes the rest of the base's gradient through unchanged.
#include "autograd/node.h"

namespace graft::autograd {

struct Geometry {
  Shape sizes, strides;
  int64_t offset = 0;
  static Geometry of(const Tensor& t) { return {t.sizes(), t.strides(), t.storage_offset()}; }
};

// Gradient of as_strided(base, view): scatter-adds `grad` (view-shaped) into a zero tensor shaped
// like the base, honouring overlapping (expanded) views.
Tensor as_strided_backward(const Tensor& grad, const Geometry& base, const Geometry& view);

class AsStridedBackward final : public Node {
 public:
  AsStridedBackward(Geometry base, Geometry view) : base_(std::move(base)), view_(std::move(view)) {}
  std::string name() const override { return "AsStridedBackward"; }
  variable_list apply(variable_list&& grads) override;

 private:
  Geometry base_, view_;
};

class CopySlices final : public Node {
 public:
  // `base` is the root base (its current gradient edge becomes edge 0); `fn` is the in-place op's
  // node recorded on the view (its edges 1.. are taken over).
  CopySlices(const Tensor& base, Geometry view, std::shared_ptr<Node> fn);
  std::string name() const override { return "CopySlices"; }
  variable_list apply(variable_list&& grads) override;
  void release_variables() override { fn_->release_variables(); }

 private:
  Geometry base_, view_;
  std::shared_ptr<Node> fn_;
};

// An in-place op recorded `fn` for `self`: make `fn` (or CopySlices over the base, when self is a
// view) the history of self and of its base.
void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn);

// Wraps a gradient computed by a kernel that has no derivative of its own: under create_graph, a
// second backward through it throws instead of silently producing a wrong (zero) result.
Tensor mark_not_twice_differentiable(const Tensor& grad, const char* node_name,
                                     const std::vector<const Tensor*>& depends_on);

}  // namespace graft::autograd
