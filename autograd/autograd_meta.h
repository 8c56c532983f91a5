#pragma once
// AutogradMeta: what autograd keeps per tensor, in TensorImpl's opaque slot.
//
// Invariants:
// - A tensor with no meta does not require grad and has no history; plain tensors never pay for
//   autograd (the hot path checks one pointer).
// - A leaf requires grad through `requires_grad_`; a non-leaf through `grad_fn_` (output `output_nr_`
//   of that node). Never both.
// - A leaf's AccumulateGrad is held weakly here and strongly by the edges of the graph, so it lives
//   exactly as long as some graph can reach it, and every graph sees the same accumulator.
// - A differentiable view records its root base (never itself a view) and the version at which its
//   grad_fn was computed. When the shared version moved on (an in-place op through the base or
//   another view), grad_fn_of() regenerates the view's grad_fn as AsStridedBackward from the base's
//   current history, which is how an in-place op on one view is seen by every other view.
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "autograd/node.h"
#include "runtime/tensor.h"

namespace graft::autograd {

struct AutogradMeta final : AutogradMetaInterface {
  bool requires_grad_ = false;  // leaves only
  std::shared_ptr<Node> grad_fn_;
  uint32_t output_nr_ = 0;
  std::weak_ptr<Node> grad_accumulator_;
  Tensor grad_;
  bool retains_grad_ = false;
  std::vector<std::shared_ptr<TensorHook>> leaf_hooks_;  // hooks of a leaf, run before accumulation
  // Run after the leaf's .grad was updated (register_post_accumulate_grad_hook).
  std::vector<std::shared_ptr<std::function<void(Tensor&)>>> post_accumulate_hooks_;
  std::mutex mutex_;                                       // guards grad_ during concurrent backwards

  // Differentiable views.
  bool is_view_ = false;
  Tensor base_;
  int64_t attr_version_ = 0;

  bool requires_grad() const override { return requires_grad_ || grad_fn_ != nullptr; }
};

inline AutogradMeta* get_meta(const Tensor& t) {
  return t.defined() ? static_cast<AutogradMeta*>(t.impl()->autograd_meta()) : nullptr;
}
AutogradMeta& ensure_meta(const Tensor& t);

// History of `t` (regenerating a stale view's grad_fn first). Null for leaves and plain tensors.
std::shared_ptr<Node> grad_fn_of(const Tensor& t);
// Whether `t` takes part in autograd: a leaf with requires_grad or a tensor with history.
bool tensor_requires_grad(const Tensor& t);
// The edge a gradient for `t` must travel: its grad_fn, or its leaf accumulator, or invalid.
Edge gradient_edge(const Tensor& t);
// Makes `t` output `output_nr` of `fn` (records its metadata on fn).
void set_history(const Tensor& t, const std::shared_ptr<Node>& fn);
// Records that `view` is a view of `base` (for in-place rebasing).
void set_view_of(const Tensor& view, const Tensor& base);
// Adds `grad` into `t.grad()` for retain_grad (under the meta's lock).
void accumulate_retained_grad(const Tensor& t, const Tensor& grad);

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf);

}  // namespace graft::autograd
