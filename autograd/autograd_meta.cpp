#include "autograd/autograd_meta.h"

#include "autograd/accumulate_grad.h"
#include "autograd/view_nodes.h"
#include "ops/ops.h"

namespace graft::autograd {

AutogradMeta& ensure_meta(const Tensor& t) {
  GRAFT_CHECK(t.defined(), "autograd: operation on an undefined tensor");
  auto* m = static_cast<AutogradMeta*>(t.impl()->autograd_meta());
  if (!m) {
    auto fresh = std::make_unique<AutogradMeta>();
    m = fresh.get();
    t.impl()->set_autograd_meta(std::move(fresh));
  }
  return *m;
}

std::shared_ptr<Node> grad_fn_of(const Tensor& t) {
  AutogradMeta* m = get_meta(t);
  if (!m) return nullptr;
  if (m->is_view_ && m->attr_version_ != t.version()) {
    // The shared storage was written since this view's history was computed: rebuild it from the
    // base's current history (which CopySlices updated if the write went through autograd).
    m->attr_version_ = t.version();
    Edge base_edge = gradient_edge(m->base_);
    if (base_edge.is_valid() && !m->requires_grad_) {
      auto node = std::make_shared<AsStridedBackward>(Geometry::of(m->base_), Geometry::of(t));
      node->mutable_next_edges().push_back(base_edge);
      m->output_nr_ = node->add_input_metadata(t);
      m->grad_fn_ = node;
    }
  }
  return m->grad_fn_;
}

bool tensor_requires_grad(const Tensor& t) {
  AutogradMeta* m = get_meta(t);
  if (!m) return false;
  if (m->requires_grad_) return true;
  return grad_fn_of(t) != nullptr;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = get_meta(t);
  if (!m) return {};
  if (auto fn = grad_fn_of(t)) return Edge{fn, m->output_nr_};
  if (m->requires_grad_) return Edge{grad_accumulator(t), 0};
  return {};
}

void set_history(const Tensor& t, const std::shared_ptr<Node>& fn) {
  AutogradMeta& m = ensure_meta(t);
  m.grad_fn_ = fn;
  m.output_nr_ = fn->add_input_metadata(t);
  m.attr_version_ = t.version();
}

void set_view_of(const Tensor& view, const Tensor& base) {
  AutogradMeta& m = ensure_meta(view);
  AutogradMeta* bm = get_meta(base);
  m.is_view_ = true;
  m.base_ = bm && bm->is_view_ ? bm->base_ : base;
  m.attr_version_ = view.version();
}

void accumulate_retained_grad(const Tensor& t, const Tensor& grad) {
  AutogradMeta& m = ensure_meta(t);
  std::lock_guard<std::mutex> lock(m.mutex_);
  if (!m.grad_.defined()) m.grad_ = ops::clone(grad);
  else m.grad_ = ops::add(m.grad_, grad);
}

std::shared_ptr<Node> grad_accumulator(const Tensor& leaf) {
  AutogradMeta* m = get_meta(leaf);
  GRAFT_CHECK(m && m->requires_grad_ && !m->grad_fn_,
              "grad_accumulator: only leaf tensors that require grad have a gradient accumulator (got ",
              describe(leaf), m && m->grad_fn_ ? ", a non-leaf" : ", which does not require grad", ")");
  std::lock_guard<std::mutex> lock(m->mutex_);
  if (auto acc = m->grad_accumulator_.lock()) return acc;
  auto acc = std::make_shared<AccumulateGrad>(leaf);
  m->grad_accumulator_ = acc;
  return acc;
}

}  // namespace graft::autograd
