#include "autograd/op_node.h"

#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"

namespace graft::autograd {

void OpNode::release_variables() {
  for (auto& s : saved_) s.release();
}

bool OpNode::needs(size_t i) const {
  if (i >= next_edges_.size() || !next_edges_[i].is_valid()) return false;
  GraphTask* task = current_graph_task();
  if (!task) return true;
  return will_engine_execute_node(next_edges_[i].function);
}

Tensor OpNode::saved_tensor(size_t i) {
  return saved_.at(i).unpack(std::static_pointer_cast<Node>(shared_from_this()));
}

namespace {
template <class Get>
std::shared_ptr<OpNode> make_node(const char* name, BackwardFn fn, size_t n, Get get) {
  if (!is_grad_enabled()) return nullptr;
  bool any = false;
  for (size_t i = 0; i < n && !any; ++i) {
    const Tensor& t = get(i);
    any = t.defined() && get_meta(t) && tensor_requires_grad(t);
  }
  if (!any) return nullptr;
  auto node = std::make_shared<OpNode>(name, fn);
  node->mutable_next_edges().reserve(n);
  node->inputs.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = get(i);
    if (t.defined()) {
      node->mutable_next_edges().push_back(gradient_edge(t));
      node->inputs.push_back(InputInfo{t.sizes(), t.dtype(), t.device()});
    } else {
      node->mutable_next_edges().push_back(Edge{});
      node->inputs.push_back(InputInfo{});
    }
  }
  return node;
}
}  // namespace

std::shared_ptr<OpNode> record_op(const char* name, BackwardFn fn, std::initializer_list<const Tensor*> inputs) {
  const Tensor* const* p = inputs.begin();
  return make_node(name, fn, inputs.size(), [p](size_t i) -> const Tensor& { return *p[i]; });
}

std::shared_ptr<OpNode> record_op(const char* name, BackwardFn fn, const std::vector<Tensor>& inputs) {
  return make_node(name, fn, inputs.size(), [&](size_t i) -> const Tensor& { return inputs[i]; });
}

void set_output(const std::shared_ptr<OpNode>& node, const Tensor& out) { set_history(out, node); }

void check_inplace(const Tensor& self, const char* op) {
  if (!is_grad_enabled()) return;
  AutogradMeta* m = get_meta(self);
  if (!m) return;
  GRAFT_CHECK(!(m->requires_grad_ && !m->grad_fn_), op,
              ": a leaf tensor that requires grad is being used in an in-place operation (", describe(self),
              "); wrap the update in NoGradGuard");
  if (m->is_view_) {
    AutogradMeta* bm = get_meta(m->base_);
    GRAFT_CHECK(!(bm && bm->requires_grad_ && !bm->grad_fn_), op,
                ": a view of a leaf tensor that requires grad is being used in an in-place operation (",
                describe(self), ")");
  }
}

}  // namespace graft::autograd
