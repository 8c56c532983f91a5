#pragma once
// nn::Module: the base of every layer, shaped like libtorch's torch::nn::Module.
//
// A module owns named parameters, buffers and child modules, in registration order. Names are
// dotted paths ("0.weight", "fc1.bias").
//
// Invariants:
// 1. A registered parameter or buffer is one tensor for the module's whole life: a subclass keeps
//    its own Tensor members (weight, bias, running_mean, ...) as handles to exactly the tensors
//    registration returned, and the module never replaces them.
// 2. Each stored tensor can take new data in place: registration stores a tensor with history, or
//    an autograd view of another tensor, detached (a tensor of its own on the same storage).
// 3. to() changes data, never tensors: each parameter, each buffer and each parameter's .grad takes
//    the converted data in place (Tensor::set_data, as libtorch's Module::to; .grad as PyTorch's
//    Module._apply), keeping identity and autograd state. So every handle, wherever it is kept (a
//    member, an optimizer, a second module sharing the tensor, the caller), sees the new device,
//    dtype or layout, and no module needs code of its own around to(). A view taken of a parameter
//    before to() keeps the old data: take views in forward, as the modules here do.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <string>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/tensor.h"

namespace graft::nn {

// An insertion-ordered map from names to values (libtorch's OrderedDict). Iteration yields
// std::pair<std::string, V>; lookups are linear (modules are small).
template <class V>
class OrderedDict {
 public:
  using Item = std::pair<std::string, V>;
  OrderedDict() = default;
  OrderedDict(std::initializer_list<Item> items) {
    for (const auto& it : items) insert(it.first, it.second);
  }
  // Inserts or replaces (keeping the original position).
  V& insert(const std::string& key, V value) {
    for (auto& it : items_)
      if (it.first == key) return it.second = std::move(value);
    items_.emplace_back(key, std::move(value));
    return items_.back().second;
  }
  bool contains(const std::string& key) const { return find(key) != nullptr; }
  const V* find(const std::string& key) const {
    for (const auto& it : items_)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  V* find(const std::string& key) {
    for (auto& it : items_)
      if (it.first == key) return &it.second;
    return nullptr;
  }
  const V& at(const std::string& key) const {
    const V* v = find(key);
    GRAFT_CHECK(v, "OrderedDict: no key '", key, "'");
    return *v;
  }
  V& at(const std::string& key) {
    V* v = find(key);
    GRAFT_CHECK(v, "OrderedDict: no key '", key, "'");
    return *v;
  }
  const V& operator[](const std::string& key) const { return at(key); }
  V& operator[](const std::string& key) {
    V* v = find(key);
    return v ? *v : insert(key, V{});
  }
  bool erase(const std::string& key) {
    for (auto it = items_.begin(); it != items_.end(); ++it)
      if (it->first == key) {
        items_.erase(it);
        return true;
      }
    return false;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> k;
    for (const auto& it : items_) k.push_back(it.first);
    return k;
  }
  std::vector<V> values() const {
    std::vector<V> v;
    for (const auto& it : items_) v.push_back(it.second);
    return v;
  }
  size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }
  void clear() { items_.clear(); }
  auto begin() { return items_.begin(); }
  auto end() { return items_.end(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }
  const std::vector<Item>& items() const { return items_; }

 private:
  std::vector<Item> items_;
};

using StateDict = OrderedDict<Tensor>;

// Whether writing over `t` in place is invisible: no other Tensor, view or saved variable shares
// its TensorImpl or storage, it is no view and no leaf that requires grad, and it keeps no grad
// (retain_grad). An activation passed on by Sequential is; a caller's input is not.
bool is_sole_owner(const Tensor& t);

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The layer's computation. The default throws: containers and multi-input modules override
  // their own entry points.
  virtual Tensor forward(const Tensor& input);
  // Calls forward with the module's hooks around it (forward pre-hooks, forward hooks, and the
  // full backward hooks' routing nodes); without hooks it is forward(input) and nothing else.
  // Containers call their children through it so the children's hooks fire.
  Tensor operator()(const Tensor& input);
  // operator() on an input the caller gives up, as Sequential hands each child's output to the
  // next: a module that works in place (works_in_place()) then writes its output over the input
  // when nothing else can see it (is_sole_owner), which saves one activation-sized buffer while
  // the layer runs. The values and gradients are forward(input)'s. With hooks it is operator():
  // a hook may keep the input.
  Tensor call_owned(Tensor&& input);
  // Whether forward_owned may compute in place (ReLU, Tanh, Sigmoid); the memory planner models it
  // (nn/budget_solver.h, invariant 11).
  virtual bool works_in_place() const { return false; }
  // Whether forward(input) may run on slices of input's rows (dimension 0) one at a time: each
  // output row comes from its input row alone, and forward draws no random numbers and keeps no
  // statistics across rows. The slices' outputs, stacked, are then forward(input) up to the
  // kernels' rounding. The memory planner runs such layers by slices of the batch where their
  // whole-batch activations break a budget (autograd/checkpoint_rows.h). False unless a layer
  // says otherwise: Dropout draws numbers, BatchNorm2d shares statistics.
  virtual bool splits_by_rows(const Tensor& input) const { return false; }
  // What call_owned runs without hooks; the default is forward(input).
  virtual Tensor forward_owned(Tensor&& input);

  // ---- hooks (torch.nn.Module's; libtorch has none). Each returns a handle; removal is by handle.
  // A hook may return void, or std::optional<std::vector<Tensor>> to replace what it was given.
  // forward pre-hook: fn(module, inputs), before forward; a returned vector replaces the inputs.
  // forward hook: fn(module, inputs, outputs), after forward; a returned vector replaces the outputs.
  // full backward hook: fn(module, grad_input, grad_output) once per call of the module in each
  //   backward, when the gradients for its inputs are computed (grad_input entries are undefined
  //   for inputs that do not require grad; then it fires as soon as grad_output is known). A
  //   returned vector replaces grad_input. A module used twice fires twice, as in PyTorch.
  using TensorList = std::vector<Tensor>;
  using ForwardPreHook = std::function<std::optional<TensorList>(Module&, const TensorList&)>;
  using ForwardHook = std::function<std::optional<TensorList>(Module&, const TensorList&, const TensorList&)>;
  using BackwardHook = std::function<std::optional<TensorList>(Module&, const TensorList&, const TensorList&)>;
  template <class F>
  HookHandle register_forward_pre_hook(F fn) {
    return add_hook(forward_pre_hooks_, ForwardPreHook(adapt<const TensorList&>(std::move(fn))));
  }
  template <class F>
  HookHandle register_forward_hook(F fn) {
    return add_hook(forward_hooks_, ForwardHook(adapt<const TensorList&, const TensorList&>(std::move(fn))));
  }
  template <class F>
  HookHandle register_full_backward_hook(F fn) {
    return add_hook(backward_hooks_, BackwardHook(adapt<const TensorList&, const TensorList&>(std::move(fn))));
  }
  // The backward hooks alive now (used by the backward routing nodes when they fire).
  std::vector<std::shared_ptr<BackwardHook>> backward_hooks() const { return backward_hooks_; }

  // A short type name for printing and errors ("Linear", "Sequential"; "Module" by default).
  virtual std::string name() const { return "Module"; }

  // ---- registration (returns a handle to the stored tensor / the child) ----
  // A parameter is a leaf; requires_grad is set as asked. Re-registering a name is an error.
  Tensor& register_parameter(const std::string& name, Tensor tensor, bool requires_grad = true);
  Tensor& register_buffer(const std::string& name, Tensor tensor);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
    register_child(name, module);
    return module;
  }
  // Replaces a registered child (as libtorch's replace_module).
  template <class M>
  std::shared_ptr<M> replace_module(const std::string& name, std::shared_ptr<M> module) {
    replace_child(name, module);
    return module;
  }

  // ---- traversal (registration order; recursive ones visit self first, then children) ----
  std::vector<Tensor> parameters(bool recurse = true) const;
  OrderedDict<Tensor> named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  OrderedDict<Tensor> named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  OrderedDict<std::shared_ptr<Module>> named_children() const;
  // Every module below this one (not including this one), depth first, with dotted names.
  OrderedDict<std::shared_ptr<Module>> named_modules() const;

  // ---- mode ----
  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // ---- device / dtype / layout: parameters, their grads and buffers change in place (invariant 3) ----
  virtual void to(Device device, bool non_blocking = false);
  // Casts floating parameters and buffers (integral buffers such as counters are kept).
  virtual void to(DType dtype);
  // Lays 4-D floating parameters and buffers out in `f` (PyTorch's model.to(memory_format=...)):
  // a tensor whose strides do not already suggest `f` is copied, so even a weight with one input
  // channel (dense in both formats) gets channels-last strides and its convolution runs NHWC.
  virtual void to(MemoryFormat f);

  // set_to_none: grads become undefined; otherwise they are zeroed in place.
  void zero_grad(bool set_to_none = true);

  // ---- state ----
  // Parameters then buffers of each module, recursively: "fc.weight", "bn.running_mean", ...
  StateDict state_dict() const;
  // Copies the values in place (under NoGradGuard). strict: missing and unexpected keys are errors;
  // a shape mismatch always is. Nothing is copied when any check fails.
  void load_state_dict(const StateDict& dict, bool strict = true);

 protected:
  bool training_ = true;

 private:
  struct Slot {
    std::string name;
    Tensor value;
  };
  void register_child(const std::string& name, std::shared_ptr<Module> module);
  void replace_child(const std::string& name, std::shared_ptr<Module> module);
  void check_new_name(const std::string& name) const;
  void collect(const std::string& prefix, bool params, bool recurse, OrderedDict<Tensor>& out) const;
  template <class F>
  void convert_in_place(F&& convert);

  std::vector<std::unique_ptr<Slot>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;

  // Hooks: a handle empties its slot; empty slots are skipped (and dropped on the next add).
  template <class... Args, class F>
  static auto adapt(F fn) {
    return [fn = std::move(fn)](Module& m, Args... args) mutable -> std::optional<TensorList> {
      if constexpr (std::is_void_v<std::invoke_result_t<F&, Module&, Args...>>) {
        fn(m, args...);
        return std::nullopt;
      } else {
        return fn(m, args...);
      }
    };
  }
  template <class H>
  static HookHandle add_hook(std::vector<std::shared_ptr<H>>& list, H fn) {
    std::erase_if(list, [](const std::shared_ptr<H>& h) { return !*h; });
    auto h = std::make_shared<H>(std::move(fn));
    list.push_back(h);
    std::weak_ptr<H> weak = h;
    return HookHandle([weak] {
      if (auto p = weak.lock()) *p = nullptr;
    });
  }
  std::vector<std::shared_ptr<ForwardPreHook>> forward_pre_hooks_;
  std::vector<std::shared_ptr<ForwardHook>> forward_hooks_;
  std::vector<std::shared_ptr<BackwardHook>> backward_hooks_;
};

}  // namespace graft::nn
