#include "autograd/op_node.h"

#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"

namespace graft::autograd {

void OpNode::release_variables() {
  for (SavedVariable* s : saved_) s->release();
}

bool OpNode::needs(size_t i) const {
  if (i >= next_edges_.size() || !next_edges_[i].is_valid()) return false;
  GraphTask* task = current_graph_task();
  if (!task || runs_every_reachable_node(task)) return true;  // the common case: no hash lookups
  return will_engine_execute_node(next_edges_[i].function);
}

void OpNode::save(SavedVariable& slot, const Tensor& t, bool is_output, SaveTolerance tolerance) {
  slot = SavedVariable(t, is_output, this, tolerance);
  saved_.push_back(&slot);
}

Tensor OpNode::unpack(const SavedVariable& slot) { return slot.unpack(shared_from_this()); }

namespace detail {

bool should_record(const Tensor* const* inputs, size_t n) {
  if (!is_recording_enabled()) return false;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = *inputs[i];
    if (t.defined() && get_meta(t) && tensor_requires_grad(t)) return true;
  }
  return false;
}

bool should_record(const std::vector<Tensor>& inputs) {
  if (!is_recording_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && get_meta(t) && tensor_requires_grad(t)) return true;
  return false;
}

namespace {
void attach_one(OpNode& node, const Tensor& t) {
  if (t.defined()) {
    node.mutable_next_edges().push_back(gradient_edge(t));
    node.inputs.push_back(TensorMeta::of(t));
  } else {
    node.mutable_next_edges().push_back(Edge{});
    node.inputs.push_back(TensorMeta{});
  }
}
}  // namespace

void attach_inputs(OpNode& node, const Tensor* const* inputs, size_t n) {
  node.mutable_next_edges().reserve(n);
  node.inputs.reserve(n);
  for (size_t i = 0; i < n; ++i) attach_one(node, *inputs[i]);
}

void attach_inputs(OpNode& node, const std::vector<Tensor>& inputs) {
  node.mutable_next_edges().reserve(inputs.size());
  node.inputs.reserve(inputs.size());
  for (const Tensor& t : inputs) attach_one(node, t);
}

}  // namespace detail

void set_output(const std::shared_ptr<Node>& node, const Tensor& out) { set_history(out, node); }

void check_inplace(const Tensor& self, const char* op) {
  if (!is_recording_enabled()) return;
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
