#pragma once
// Custom differentiable functions, as libtorch's torch::autograd::Function:
//
//   struct MyExp : Function<MyExp> {
//     static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
//       Tensor y = x.exp(); ctx->save_for_backward({y}); return y; }
//     static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
//       return {g[0] * ctx->saved_tensors()[0]}; }
//   };
//   Tensor y = MyExp::apply(x);
//
// forward runs with grad mode off. Tensors saved with save_for_backward go through SavedVariable
// (so saved-tensor hooks, version checks and release after backward apply to them). backward
// returns one gradient per forward argument (undefined for non-tensors or inputs without grad),
// or one per tensor argument. `static constexpr bool once_differentiable = true;` in Derived makes
// differentiating its backward an error, as torch's @once_differentiable.
#include <any>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "autograd/autograd_meta.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "autograd/saved_variable.h"

namespace graft::autograd {

class CustomNode;

struct FunctionCtx {
  void save_for_backward(std::vector<Tensor> tensors);
  std::vector<Tensor> saved_tensors();
  std::unordered_map<std::string, std::any> saved_data;
  bool needs_input_grad(size_t i) const;  // i counts tensor arguments
  void mark_dirty(std::vector<Tensor> tensors);
  // Outputs that get no gradient: they do not require grad, and backward receives zeros for them.
  void mark_non_differentiable(std::vector<Tensor> tensors);
  // false: backward receives undefined tensors (not zeros) for outputs that got no gradient.
  void set_materialize_grads(bool value) { materialize_grads_ = value; }

  // Internal: filled by Function::apply.
  std::vector<Tensor> to_save_;
  std::vector<SavedVariable> saved_;
  std::vector<Tensor> dirty_;
  std::vector<Tensor> non_differentiable_;
  std::vector<bool> needs_input_grad_;
  std::weak_ptr<CustomNode> node_;
  bool released_ = false;
  bool materialize_grads_ = true;
};

class CustomNode final : public Node {
 public:
  using BackwardFn = variable_list (*)(FunctionCtx*, variable_list);
  CustomNode(std::string name, BackwardFn fn) : name_(std::move(name)), fn_(fn) {}
  std::string name() const override { return name_; }
  variable_list apply(variable_list&& grads) override;
  void release_variables() override;
  bool materialize_grads() const override { return ctx.materialize_grads_; }
  std::vector<const SavedVariable*> saved_variables() const override {
    std::vector<const SavedVariable*> out;
    for (const auto& s : ctx.saved_) out.push_back(&s);
    return out;
  }
  FunctionCtx ctx;
  std::vector<bool> arg_is_tensor;  // per forward argument
  // Derived::once_differentiable: backward runs without recording, and under create_graph its
  // results carry a node that throws when differentiated (torch's @once_differentiable).
  bool once_differentiable = false;

 private:
  std::string name_;
  BackwardFn fn_;
};

// Wires the outputs of a custom forward into the graph (dirty inputs, views, plain outputs).
// Returns the outputs as they must be handed to the caller.
variable_list wrap_custom_outputs(const std::shared_ptr<CustomNode>& node, const variable_list& inputs,
                                  variable_list outputs);
std::string demangle(const char* name);

namespace detail {
template <class T> void collect_tensor(std::vector<Tensor>& out, std::vector<bool>& is_t, const T& a) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) {
    out.push_back(a);
    is_t.push_back(true);
  } else {
    is_t.push_back(false);
  }
}
}  // namespace detail

template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    std::vector<Tensor> inputs;
    std::vector<bool> is_tensor;
    (detail::collect_tensor(inputs, is_tensor, args), ...);
    bool record = is_recording_enabled();
    bool any = false;
    for (auto& t : inputs) any = any || (t.defined() && tensor_requires_grad(t));
    std::shared_ptr<CustomNode> node;
    FunctionCtx local_ctx;
    FunctionCtx* ctx = &local_ctx;
    if (record && any) {
      node = std::make_shared<CustomNode>("CppNode<" + demangle(typeid(Derived).name()) + ">",
                                          [](FunctionCtx* c, variable_list g) -> variable_list {
                                            return Derived::backward(c, std::move(g));
                                          });
      node->arg_is_tensor = is_tensor;
      if constexpr (requires { Derived::once_differentiable; }) node->once_differentiable = Derived::once_differentiable;
      for (auto& t : inputs) {
        node->mutable_next_edges().push_back(t.defined() ? gradient_edge(t) : Edge{});
        node->ctx.needs_input_grad_.push_back(node->mutable_next_edges().back().is_valid());
      }
      node->ctx.node_ = node;
      ctx = &node->ctx;
    } else {
      for (size_t i = 0; i < inputs.size(); ++i) ctx->needs_input_grad_.push_back(false);
    }
    using Ret = decltype(Derived::forward(ctx, std::forward<Args>(args)...));
    Ret out;
    {
      NoGradGuard ng;
      out = Derived::forward(ctx, std::forward<Args>(args)...);
    }
    if constexpr (std::is_same_v<Ret, Tensor>) {
      if (!node) return out;
      return wrap_custom_outputs(node, inputs, {out})[0];
    } else {
      if (!node) return out;
      return Ret(wrap_custom_outputs(node, inputs, variable_list(out.begin(), out.end())));
    }
  }
};

}  // namespace graft::autograd
