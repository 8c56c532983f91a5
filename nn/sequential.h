#pragma once
// nn::Sequential: runs its modules in order; children are named "0", "1", ...
// nn::Functional wraps a plain function as a module (for use inside a Sequential).
#include <functional>
#include <initializer_list>
#include <memory>

#include "nn/module.h"

namespace graft::nn {

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential(std::initializer_list<std::shared_ptr<Module>> modules);

  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> module) {
    append(module);
    return module;
  }
  // Constructs a module in place: seq.emplace_back<Linear>(4, 2).
  template <class M, class... Args>
  std::shared_ptr<M> emplace_back(Args&&... args) {
    return push_back(std::make_shared<M>(std::forward<Args>(args)...));
  }

  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Sequential"; }
  size_t size() const { return modules_.size(); }
  bool empty() const { return modules_.empty(); }
  const std::shared_ptr<Module>& operator[](size_t i) const;
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    GRAFT_CHECK(p, "Sequential: module ", i, " is a ", (*this)[i]->name(), ", not the requested type");
    return p;
  }
  auto begin() const { return modules_.begin(); }
  auto end() const { return modules_.end(); }

 private:
  void append(std::shared_ptr<Module> module);
  std::vector<std::shared_ptr<Module>> modules_;
};

class Functional : public Module {
 public:
  explicit Functional(std::function<Tensor(const Tensor&)> fn) : fn_(std::move(fn)) {}
  Tensor forward(const Tensor& input) override { return fn_(input); }
  std::string name() const override { return "Functional"; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
};

}  // namespace graft::nn
