#include "autograd/node.h"

#include "autograd/autograd_meta.h"

namespace graft::autograd {

namespace {
thread_local uint64_t t_sequence_nr = 0;
}

Node::Node() : sequence_nr_(t_sequence_nr++) {}

uint32_t Node::add_input_metadata(const Tensor& t) {
  input_metadata_.push_back(InputMetadata{t.sizes(), t.dtype(), t.device()});
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

std::shared_ptr<Node::PostHook> Node::add_post_hook(PostHook fn) {
  auto h = std::make_shared<PostHook>(std::move(fn));
  post_hooks_.push_back(h);
  return h;
}

void Node::run_pre_hooks(variable_list& grads) {
  for (auto& [nr, hook] : pre_hooks_) {
    if (!hook->fn || nr >= grads.size() || !grads[nr].defined()) continue;
    Tensor r = hook->fn(grads[nr]);
    if (r.defined()) grads[nr] = r;
  }
  for (auto& [nr, weak] : retains_grad_) {
    auto impl = weak.lock();
    if (!impl || nr >= grads.size() || !grads[nr].defined()) continue;
    accumulate_retained_grad(Tensor(impl), grads[nr]);
  }
}

void Node::run_post_hooks(const variable_list& grad_inputs, const variable_list& grad_outputs) {
  for (auto& h : post_hooks_)
    if (*h) (*h)(grad_inputs, grad_outputs);
}

}  // namespace graft::autograd
