#include "nn/sequential.h"

#include <string>

namespace graft::nn {

Sequential::Sequential(std::initializer_list<std::shared_ptr<Module>> modules) {
  for (const auto& m : modules) append(m);
}

void Sequential::append(std::shared_ptr<Module> module) {
  GRAFT_CHECK(module, "Sequential: push_back got a null module");
  register_module(std::to_string(modules_.size()), module);
  modules_.push_back(std::move(module));
}

const std::shared_ptr<Module>& Sequential::operator[](size_t i) const {
  GRAFT_CHECK(i < modules_.size(), "Sequential: index ", i, " is out of range for ", modules_.size(), " modules");
  return modules_[i];
}

Tensor Sequential::forward(const Tensor& input) {
  // Each child's output is passed on, not kept: a child that works in place may reuse it (the
  // first child's input is the caller's, so it never is).
  Tensor x = input;
  for (auto& m : modules_) x = m->call_owned(std::move(x));
  return x;
}

}  // namespace graft::nn
