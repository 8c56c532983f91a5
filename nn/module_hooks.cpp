// Module::operator(): forward pre-hooks, forward, forward hooks, and the routing that gives full
// backward hooks their gradients.
//
// A full backward hook needs, per call of the module, the gradients of its outputs and of its
// inputs. Both are caught by identity nodes placed around forward (as torch's
// BackwardHookFunction): the outputs' node runs first in backward and stores grad_output; the
// inputs' node runs when the gradients for the module's inputs are complete and calls the hooks.
// Each call gets its own pair of nodes, so a module used twice fires twice, and a checkpointed
// module fires from the forward's nodes (the recomputation's graph is never run backward).
#include <memory>

#include "autograd/autograd_meta.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "nn/module.h"
#include "ops/ops.h"

namespace graft::nn {

namespace {

using autograd::variable_list;

class BackwardHookNode final : public autograd::Node {
 public:
  explicit BackwardHookNode(std::function<variable_list(variable_list&&)> fn) : fn_(std::move(fn)) {}
  std::string name() const override { return "BackwardHookFunctionBackward"; }
  variable_list apply(variable_list&& grads) override { return fn_(std::move(grads)); }

 private:
  std::function<variable_list(variable_list&&)> fn_;
};

// What the two nodes of one call share. The module is held strongly when it is owned by a
// shared_ptr (a graph that outlives the module still reports to it), else by address.
struct CallState {
  std::shared_ptr<Module> owner;
  Module* module = nullptr;
  size_t num_inputs = 0;
  std::vector<size_t> routed_inputs;  // positions of the inputs that go through the input node
  variable_list grad_outputs;
};

// Sends the tensors that require grad through one identity node running `fn` on their
// gradients; returns the tensors as the caller must use them and the positions routed.
variable_list route(const variable_list& ts, std::function<variable_list(variable_list&&)> fn,
                    std::vector<size_t>* routed) {
  auto node = std::make_shared<BackwardHookNode>(std::move(fn));
  variable_list out = ts;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!out[i].defined() || !out[i].requires_grad()) continue;
    node->mutable_next_edges().push_back(autograd::gradient_edge(out[i]));
    Tensor a = ops::alias(out[i]);
    autograd::set_view_of(a, out[i]);
    autograd::set_history(a, node);
    out[i] = a;
    if (routed) routed->push_back(i);
  }
  return out;
}

// Calls the module's backward hooks; a returned vector replaces grad_input.
variable_list call_backward_hooks(CallState& st, variable_list grad_input) {
  Module& m = *st.module;
  for (auto& h : m.backward_hooks()) {
    if (!*h) continue;
    if (auto r = (*h)(m, grad_input, st.grad_outputs)) {
      GRAFT_CHECK(r->size() == grad_input.size(), m.name(), ": a full backward hook returned ", r->size(),
                  " gradients for ", grad_input.size(), " inputs");
      grad_input = std::move(*r);
    }
  }
  return grad_input;
}

}  // namespace

bool is_sole_owner(const Tensor& t) {
  if (!t.defined() || t.impl_ptr().use_count() != 1 || t.impl()->storage().use_count() != 1) return false;
  const autograd::AutogradMeta* m = autograd::get_meta(t);
  return m == nullptr || (!m->is_view_ && !m->requires_grad_ && !m->retains_grad_);
}

Tensor Module::forward_owned(Tensor&& input) { return forward(input); }

Tensor Module::call_owned(Tensor&& input) {
  if (forward_pre_hooks_.empty() && forward_hooks_.empty() && backward_hooks_.empty()) [[likely]]
    return forward_owned(std::move(input));
  return (*this)(input);
}

Tensor Module::operator()(const Tensor& input) {
  if (forward_pre_hooks_.empty() && forward_hooks_.empty() && backward_hooks_.empty()) [[likely]]
    return forward(input);
  TensorList in{input};
  for (auto& h : std::vector(forward_pre_hooks_)) {
    if (!*h) continue;
    if (auto r = (*h)(*this, in)) {
      GRAFT_CHECK(r->size() == 1, name(), ": a forward pre-hook returned ", r->size(), " inputs, expected 1");
      in = std::move(*r);
    }
  }
  bool any_backward_hook = false;
  for (auto& h : backward_hooks_) any_backward_hook = any_backward_hook || static_cast<bool>(*h);
  std::shared_ptr<CallState> st;
  if (any_backward_hook && autograd::is_recording_enabled()) {
    st = std::make_shared<CallState>();
    st->owner = weak_from_this().lock();
    st->module = this;
    st->num_inputs = in.size();
    std::weak_ptr<CallState> weak = st;  // the output node owns the state; the input node is below it
    in = route(in,
               [weak](variable_list&& grads) -> variable_list {
                 auto s = weak.lock();
                 if (!s) return std::move(grads);
                 variable_list full(s->num_inputs);
                 for (size_t k = 0; k < s->routed_inputs.size() && k < grads.size(); ++k)
                   full[s->routed_inputs[k]] = grads[k];
                 full = call_backward_hooks(*s, std::move(full));
                 for (size_t k = 0; k < s->routed_inputs.size() && k < grads.size(); ++k)
                   grads[k] = full[s->routed_inputs[k]];
                 return std::move(grads);
               },
               &st->routed_inputs);
  }
  TensorList out{forward(in[0])};
  for (auto& h : std::vector(forward_hooks_)) {
    if (!*h) continue;
    if (auto r = (*h)(*this, in, out)) {
      GRAFT_CHECK(r->size() == 1, name(), ": a forward hook returned ", r->size(), " outputs, expected 1");
      out = std::move(*r);
    }
  }
  if (st) {
    out = route(out,
                [st](variable_list&& grads) -> variable_list {
                  st->grad_outputs = grads;
                  // No input needs a gradient: the hook fires now, with undefined grad_input.
                  if (st->routed_inputs.empty()) call_backward_hooks(*st, variable_list(st->num_inputs));
                  return std::move(grads);
                },
                nullptr);
  }
  return out[0];
}

}  // namespace graft::nn
