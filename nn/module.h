#pragma once
// nn::Module: the base of every layer, shaped like libtorch's torch::nn::Module.
//
// A module owns named parameters, buffers and child modules, in registration order. Names are
// dotted paths ("0.weight", "fc1.bias"). Parameters and buffers are stored in stable slots; a
// subclass keeps its own Tensor members (weight, bias, ...) as handles to the same tensors, and
// refreshes them in `on_tensors_replaced()` after `to()` swaps a slot for a moved tensor.
#include <cstdint>
#include <memory>
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

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  // The layer's computation. The default throws: containers and multi-input modules override
  // their own entry points.
  virtual Tensor forward(const Tensor& input);
  Tensor operator()(const Tensor& input) { return forward(input); }

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

  // ---- device / dtype: parameters (and their grads) and buffers move; parameters stay leaves ----
  virtual void to(Device device, bool non_blocking = false);
  // Casts floating parameters and buffers (integral buffers such as counters are kept).
  virtual void to(DType dtype);

  // set_to_none: grads become undefined; otherwise they are zeroed in place.
  void zero_grad(bool set_to_none = true);

  // ---- state ----
  // Parameters then buffers of each module, recursively: "fc.weight", "bn.running_mean", ...
  StateDict state_dict() const;
  // Copies the values in place (under NoGradGuard). strict: missing and unexpected keys are errors;
  // a shape mismatch always is. Nothing is copied when any check fails.
  void load_state_dict(const StateDict& dict, bool strict = true);

 protected:
  // Called after to() replaced slot tensors: subclasses re-read their Tensor members here.
  virtual void on_tensors_replaced() {}
  // The stored parameter / buffer named `name` of this module (undefined when not registered).
  Tensor param(const std::string& name) const;
  Tensor buffer(const std::string& name) const;

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
  void replace_tensors(F&& convert);

  std::vector<std::unique_ptr<Slot>> params_, buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
};

}  // namespace graft::nn
