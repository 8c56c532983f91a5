#include "autograd/view_nodes.h"

#include <algorithm>

#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"

namespace graft::autograd {

namespace {

// Storage offsets (relative to `lo`) of every element of a geometry, in row-major order.
Tensor element_offsets(const Geometry& g, int64_t lo) {
  Tensor idx = ops::empty({shape_numel(g.sizes)}, kInt64);
  int64_t* p = idx.data_ptr<int64_t>();
  int64_t i = 0;
  kernels::for_each_offset(g.sizes, g.strides, [&](int64_t off) { p[i++] = g.offset + off - lo; });
  return idx;
}

int64_t max_offset(const Geometry& g) {
  int64_t hi = g.offset;
  for (size_t d = 0; d < g.sizes.size(); ++d)
    if (g.sizes[d] > 0) hi += (g.sizes[d] - 1) * g.strides[d];
  return hi;
}

class NotTwiceDifferentiable final : public Node {
 public:
  explicit NotTwiceDifferentiable(const char* name) : name_(name) {}
  std::string name() const override { return std::string(name_) + "Backward"; }
  variable_list apply(variable_list&&) override {
    GRAFT_ERROR(name_, ": double backward (a derivative of this op's gradient) is not implemented; "
                       "create_graph=true through ", name_, " is not supported");
  }

 private:
  const char* name_;
};

}  // namespace

Tensor as_strided_backward(const Tensor& grad, const Geometry& base, const Geometry& view) {
  NoGradGuard ng;
  int64_t lo = std::min(base.offset, view.offset);
  int64_t hi = std::max(max_offset(base), max_offset(view));
  Tensor flat = ops::zeros({hi - lo + 1}, grad.dtype(), grad.device());
  Tensor src = ops::reshape(ops::contiguous(grad), {-1});
  flat = ops::index_add(flat, 0, ops::to_device(element_offsets(view, lo), grad.device()), src);
  return ops::contiguous(ops::as_strided(flat, base.sizes, base.strides, base.offset - lo));
}

variable_list AsStridedBackward::apply(variable_list&& grads) {
  Tensor g = as_strided_backward(grads[0], base_, view_);
  if (is_recording_enabled()) g = mark_not_twice_differentiable(g, "AsStrided", {&grads[0]});
  return {g};
}

CopySlices::CopySlices(const Tensor& base, Geometry view, std::shared_ptr<Node> fn)
    : base_(Geometry::of(base)), view_(std::move(view)), fn_(std::move(fn)) {
  next_edges_.push_back(gradient_edge(base));
  for (size_t i = 1; i < fn_->next_edges().size(); ++i) next_edges_.push_back(fn_->next_edges()[i]);
}

variable_list CopySlices::apply(variable_list&& grads) {
  const Tensor& g = grads[0];
  GRAFT_CHECK(g.defined(), "CopySlices: undefined gradient");
  // fn_'s first edge is the view's history before the write, which this task never visits: the
  // op's rule must still compute the view's gradient whenever the base's gradient is wanted.
  if (!fn_->next_edges().empty() && fn_->next_edges()[0].is_valid() && next_edges_[0].is_valid() &&
      will_engine_execute_node(next_edges_[0].function))
    mark_node_needed(fn_->next_edges()[0].function);
  // Under create_graph every step is recorded, so the result is differentiable for higher orders.
  bool record = is_recording_enabled();
  // The base's gradient, laid out like the base so the view's geometry addresses it.
  Tensor result = ops::empty_strided(base_.sizes, base_.strides, g.dtype(), g.device());
  int64_t shift = base_.offset;
  if (record) graft::copy_(result, g);
  else ops::copy_(result, g);
  Tensor slice = record ? graft::as_strided(result, view_.sizes, view_.strides, view_.offset - shift)
                        : ops::as_strided(result, view_.sizes, view_.strides, view_.offset - shift);
  variable_list res = fn_->apply({record ? graft::clone(slice) : ops::clone(slice)});
  variable_list out(next_edges_.size());
  if (!res.empty() && res[0].defined()) {
    if (record) graft::copy_(slice, res[0]);
    else ops::copy_(slice, res[0]);
  } else {
    if (record) graft::zero_(slice);
    else ops::zero_(slice);
  }
  out[0] = result;
  for (size_t i = 1; i < res.size() && i < out.size(); ++i) out[i] = res[i];
  return out;
}

void rebase_history(const Tensor& self, const std::shared_ptr<Node>& fn) {
  AutogradMeta& m = ensure_meta(self);
  if (m.is_view_) {
    Tensor base = m.base_;
    AutogradMeta* bm = get_meta(base);
    GRAFT_CHECK(!(bm && bm->requires_grad_ && !bm->grad_fn_),
                "a view of a leaf tensor that requires grad is being used in an in-place operation (", describe(self),
                ")");
    auto cs = std::make_shared<CopySlices>(base, Geometry::of(self), fn);
    set_history(base, cs);
    // The view's own history is regenerated from the base on next access.
    m.grad_fn_.reset();
    m.attr_version_ = self.version() - 1;
    return;
  }
  m.grad_fn_ = fn;
  m.output_nr_ = 0;
  m.attr_version_ = self.version();
}

Tensor mark_not_twice_differentiable(const Tensor& grad, const char* node_name,
                                     const std::vector<const Tensor*>& depends_on) {
  bool any = false;
  for (const Tensor* t : depends_on) any = any || (t->defined() && tensor_requires_grad(*t));
  if (!any || !grad.defined()) return grad;
  auto node = std::make_shared<NotTwiceDifferentiable>(node_name);
  for (const Tensor* t : depends_on) node->mutable_next_edges().push_back(t->defined() ? gradient_edge(*t) : Edge{});
  Tensor out = ops::alias(grad);
  set_history(out, node);
  return out;
}

}  // namespace graft::autograd
