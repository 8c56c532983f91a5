#include "autograd/function.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

#include "autograd/grad_mode.h"
#include "autograd/op_node.h"
#include "autograd/view_nodes.h"
#include "ops/ops.h"

namespace graft::autograd {

std::string demangle(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && d ? std::string(d.get()) : std::string(name);
}

void FunctionCtx::save_for_backward(std::vector<Tensor> tensors) { to_save_ = std::move(tensors); }

std::vector<Tensor> FunctionCtx::saved_tensors() {
  std::vector<Tensor> out;
  auto node = node_.lock();
  if (saved_.empty() && !to_save_.empty() && !node) return to_save_;  // forward ran without a graph
  GRAFT_CHECK(!released_ || saved_.empty(),
              "Trying to backward through the graph a second time (or directly access saved tensors after they have "
              "already been freed). Specify retain_graph=true if you need to backward through the graph a second time.");
  out.reserve(saved_.size());
  for (auto& s : saved_) out.push_back(s.unpack(node));
  return out;
}

bool FunctionCtx::needs_input_grad(size_t i) const {
  GRAFT_CHECK(i < needs_input_grad_.size(), "needs_input_grad: index ", i, " is out of range for ",
              needs_input_grad_.size(), " tensor inputs");
  return needs_input_grad_[i];
}

void FunctionCtx::mark_dirty(std::vector<Tensor> tensors) { dirty_ = std::move(tensors); }
void FunctionCtx::mark_non_differentiable(std::vector<Tensor> tensors) { non_differentiable_ = std::move(tensors); }

namespace {
// Stands behind the gradients of a once-differentiable Function computed under create_graph:
// differentiating them reaches this node, which refuses (torch's DelayedError).
class DelayedError final : public Node {
 public:
  explicit DelayedError(std::string fn_name) : fn_name_(std::move(fn_name)) {}
  std::string name() const override { return "DelayedError"; }
  variable_list apply(variable_list&&) override {
    GRAFT_ERROR("trying to differentiate twice a function that was marked with @once_differentiable (", fn_name_,
                " sets once_differentiable = true)");
  }

 private:
  std::string fn_name_;
};

variable_list wrap_once_differentiable(const std::string& fn_name, const variable_list& grads, variable_list r) {
  auto node = std::make_shared<DelayedError>(fn_name);
  for (const auto& g : grads)
    if (g.defined() && tensor_requires_grad(g)) node->mutable_next_edges().push_back(gradient_edge(g));
  for (auto& t : r) {
    if (!t.defined() || !is_floating(t.dtype())) continue;
    t = ops::alias(t);
    set_history(t, node);
  }
  return r;
}
}  // namespace

variable_list CustomNode::apply(variable_list&& grads) {
  variable_list r;
  if (once_differentiable) {
    bool wrap = false;
    if (is_recording_enabled())
      for (const auto& g : grads) wrap = wrap || (g.defined() && tensor_requires_grad(g));
    variable_list kept = wrap ? grads : variable_list{};
    {
      NoGradGuard ng;
      r = fn_(&ctx, std::move(grads));
    }
    if (wrap) r = wrap_once_differentiable(name_, kept, std::move(r));
  } else {
    r = fn_(&ctx, std::move(grads));
  }
  size_t n_tensors = next_edges_.size();
  if (r.size() == n_tensors) return r;
  GRAFT_CHECK(r.size() == arg_is_tensor.size(), name_, ": function backward returned an incorrect number of ",
              "gradients (expected ", n_tensors, " or ", arg_is_tensor.size(), ", got ", r.size(), ")");
  variable_list out;
  for (size_t i = 0; i < r.size(); ++i)
    if (arg_is_tensor[i]) out.push_back(r[i]);
  return out;
}

void CustomNode::release_variables() {
  for (auto& s : ctx.saved_) s.release();
  ctx.released_ = true;
}

variable_list wrap_custom_outputs(const std::shared_ptr<CustomNode>& node, const variable_list& inputs,
                                  variable_list outputs) {
  auto contains = [](const std::vector<Tensor>& v, const Tensor& t) {
    for (auto& x : v)
      if (x.is_same(t)) return true;
    return false;
  };
  for (auto& d : node->ctx.dirty_) {
    GRAFT_CHECK(contains(inputs, d), node->name(), ": mark_dirty was given a tensor that is not an input");
    check_inplace(d, node->name().c_str());
  }
  for (auto& out : outputs) {
    if (!out.defined()) continue;
    if (contains(node->ctx.non_differentiable_, out) || !is_floating(out.dtype())) {
      node->add_input_metadata(out);
      continue;
    }
    if (contains(inputs, out)) {
      if (contains(node->ctx.dirty_, out)) {
        node->add_input_metadata(out);
        rebase_history(out, node);
        continue;
      }
      out = ops::alias(out);  // an input returned as is: the output is a new view of it
    }
    bool is_view = false;
    for (auto& in : inputs) {
      if (in.defined() && out.is_alias_of(in)) {
        set_view_of(out, in);
        is_view = true;
        break;
      }
    }
    (void)is_view;
    set_history(out, node);
  }
  // Saved tensors become SavedVariables now that outputs carry their history.
  for (auto& t : node->ctx.to_save_) {
    bool is_output = false;
    for (auto& o : outputs) is_output = is_output || (t.defined() && o.defined() && o.is_same(t));
    node->ctx.saved_.emplace_back(t, is_output, node.get());
  }
  node->ctx.to_save_.clear();
  // The dirty/non-differentiable lists now hold outputs whose grad_fn is this node: drop them, or
  // node -> ctx -> tensor -> grad_fn -> node would never be freed.
  node->ctx.dirty_.clear();
  node->ctx.non_differentiable_.clear();
  return outputs;
}

}  // namespace graft::autograd
