#include "autograd/accumulate_grad.h"

#include "autograd/engine.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "ops/ops.h"
#include "runtime/memory_format.h"

namespace graft::autograd {

AccumulateGrad::AccumulateGrad(Tensor variable) : variable_(std::move(variable)) {
  add_input_metadata(variable_);
}

Tensor run_leaf_hooks(const Tensor& leaf, Tensor grad) {
  AutogradMeta* m = get_meta(leaf);
  if (!m) return grad;
  for (auto& h : m->leaf_hooks_) {
    if (!h->fn) continue;
    Tensor r = h->fn(grad);
    if (r.defined()) grad = r;
  }
  return grad;
}

// PyTorch's gradient layout contract: the .grad of a dense leaf has the leaf's strides (a
// channels-last convolution weight gets a channels-last gradient, whatever layout its backward
// kernel wrote), any other leaf's is contiguous. Size-1 dims' strides do not matter. An optimizer's
// fused kernels then see one layout in a parameter, its gradient and its state (optim/optimizer.cpp).
bool obeys_layout_contract(const Tensor& grad, const Tensor& leaf) {
  if (grad.is_contiguous() && leaf.is_contiguous()) return true;  // the common case, without the stride sort
  if (grad.sizes() != leaf.sizes() || !is_non_overlapping_and_dense(leaf.sizes(), leaf.strides()))
    return grad.is_contiguous();
  return is_dense_like(grad.sizes(), grad.strides(), leaf.strides());
}
Tensor clone_obeying_layout_contract(const Tensor& grad, const Tensor& leaf) {
  if (grad.sizes() != leaf.sizes() || !is_non_overlapping_and_dense(leaf.sizes(), leaf.strides()))
    return ops::clone(grad, MemoryFormat::Contiguous);
  Tensor out = ops::empty_strided(leaf.sizes(), leaf.strides(), grad.dtype(), grad.device());
  ops::copy_(out, grad);
  return out;
}

void accumulate_into_grad(const Tensor& t, Tensor grad) {
  AutogradMeta& m = ensure_meta(t);
  std::lock_guard<std::mutex> lock(m.mutex_);
  if (!m.grad_.defined()) {
    // Steal the buffer when the engine holds the only reference and no history must be kept.
    bool stealable = !is_recording_enabled() && grad.impl_ptr().use_count() == 1 && get_meta(grad) == nullptr &&
                     obeys_layout_contract(grad, t);
    m.grad_ = stealable ? grad : (is_recording_enabled() ? grad : clone_obeying_layout_contract(grad, t));
  } else if (!is_recording_enabled()) {
    ops::add_(m.grad_, grad);
  } else {
    m.grad_ = graft::add(m.grad_, grad);
  }
}

bool AccumulateGrad::accumulate_directly(const std::function<void(Tensor& dest)>& add) {
  if (is_recording_enabled() || has_pre_hooks() || has_post_hooks() || !task_runs_without_capture(this)) return false;
  const Tensor& v = variable_;
  AutogradMeta* m = get_meta(v);
  if (m == nullptr || !m->leaf_hooks_.empty() || !m->post_accumulate_hooks_.empty()) return false;
  std::lock_guard<std::mutex> lock(m->mutex_);
  Tensor& g = m->grad_;
  if (!g.defined() || tensor_requires_grad(g) || g.sizes() != v.sizes() || g.dtype() != v.dtype() ||
      g.device() != v.device() || !g.is_contiguous())
    return false;
  add(g);
  return true;
}

void AccumulateGrad::run_tensor_pre_hooks(variable_list& grads) {
  Node::run_tensor_pre_hooks(grads);
  if (!grads.empty()) grads[0] = run_leaf_hooks(variable_, std::move(grads[0]));
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  if (!grads[0].defined()) return {};
  accumulate_into_grad(variable_, std::move(grads[0]));
  AutogradMeta* m = get_meta(variable_);
  if (m == nullptr || m->post_accumulate_hooks_.empty()) return {};
  // A copy: a hook may register or remove hooks.
  auto hooks = m->post_accumulate_hooks_;
  Tensor leaf = variable_;
  for (auto& h : hooks)
    if (*h) (*h)(leaf);
  return {};
}

}  // namespace graft::autograd
