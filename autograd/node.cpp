#include "autograd/node.h"

#include "autograd/anomaly_mode.h"
#include "autograd/autograd_meta.h"

namespace graft::autograd {

namespace {
thread_local uint64_t t_sequence_nr = 0;
}

Node::Node() : sequence_nr_(t_sequence_nr++), forward_trace_(capture_forward_trace()) {}

uint32_t Node::add_input_metadata(const Tensor& t) {
  input_metadata_.push_back(TensorMeta::of(t));
  return static_cast<uint32_t>(input_metadata_.size() - 1);
}

std::shared_ptr<TensorHook> Node::add_tensor_pre_hook(uint32_t output_nr, std::function<Tensor(const Tensor&)> fn) {
  auto h = std::make_shared<TensorHook>(TensorHook{std::move(fn)});
  pre_hooks_.emplace_back(output_nr, h);
  return h;
}

void Node::add_retains_grad_hook(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor) {
  for (auto& [nr, w] : retains_grad_)
    if (nr == output_nr && !w.owner_before(tensor) && !tensor.owner_before(w)) return;
  retains_grad_.emplace_back(output_nr, std::move(tensor));
}

namespace {
// A handle that empties the hook's slot: the node keeps owning the (now empty) function.
template <class F>
HookHandle emptying_handle(const std::shared_ptr<F>& h) {
  std::weak_ptr<F> weak = h;
  return HookHandle([weak] {
    if (auto p = weak.lock()) *p = nullptr;
  });
}

void check_replacement(const Node& node, const char* what, const variable_list& now, const variable_list& was) {
  GRAFT_CHECK(now.size() == was.size(), "hook: a ", what, " hook of ", node.name(), " returned ", now.size(),
              " gradients, expected ", was.size());
}
}  // namespace

HookHandle Node::register_hook(NodeHook fn) {
  GRAFT_CHECK(fn != nullptr, "register_hook: the hook function of ", name(), " is empty");
  auto h = std::make_shared<NodeHook>(std::move(fn));
  post_hooks_.push_back(h);
  return emptying_handle(h);
}

HookHandle Node::register_prehook(NodePreHook fn) {
  GRAFT_CHECK(fn != nullptr, "register_prehook: the hook function of ", name(), " is empty");
  auto h = std::make_shared<NodePreHook>(std::move(fn));
  node_pre_hooks_.push_back(h);
  return emptying_handle(h);
}

void Node::run_tensor_pre_hooks(variable_list& grads) {
  for (auto& [nr, hook] : pre_hooks_) {
    if (!hook->fn || nr >= grads.size()) continue;
    Tensor r = hook->fn(grads[nr]);
    if (r.defined()) grads[nr] = r;
  }
  for (auto& [nr, weak] : retains_grad_) {
    auto impl = weak.lock();
    if (!impl || nr >= grads.size() || !grads[nr].defined()) continue;
    accumulate_retained_grad(Tensor(impl), grads[nr]);
  }
}

void Node::run_pre_hooks(variable_list& grads) {
  for (auto& h : node_pre_hooks_) {
    if (!*h) continue;
    if (auto r = (*h)(grads)) {
      check_replacement(*this, "pre", *r, grads);
      grads = std::move(*r);
    }
  }
}

void Node::run_post_hooks(variable_list& grad_inputs, const variable_list& grad_outputs) {
  for (auto& h : post_hooks_) {
    if (!*h) continue;
    if (auto r = (*h)(grad_inputs, grad_outputs)) {
      check_replacement(*this, "post", *r, grad_inputs);
      grad_inputs = std::move(*r);
    }
  }
}

}  // namespace graft::autograd
