// Coverage of the gradcheck suites, driven by the op registry: every registered op is either
// differentiated by some GRADCHECK / GRADGRADCHECK case of this executable (the recorder in
// gradcheck_coverage.h), or listed below as not differentiable with the reason. A new
// differentiable op without a gradcheck case fails here.
//
// This file is linked last, so Catch2 (declaration order) runs these cases after every gradcheck
// case of test_gradcheck.cpp and test_gradcheck_nn.cpp.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "autograd/gradcheck_coverage.h"
#include "graft.h"

using namespace graft;

namespace {

// Ops that never carry a gradient, or whose gradient is checked elsewhere; each with its reason.
const std::map<std::string, std::string>& not_differentiable() {
  static const std::map<std::string, std::string> m = {
      // Factories: no tensor input to differentiate.
      {"arange", "factory"}, {"empty", "factory"}, {"empty_strided", "factory"}, {"full", "factory"},
      {"rand", "factory"}, {"randint", "factory"}, {"randn", "factory"},
      // Random fills overwrite self: nothing of the old value reaches the result (init, dropout masks).
      {"bernoulli_", "random fill"}, {"normal_", "random fill"}, {"random_", "random fill"},
      {"uniform_", "random fill"},
      // Integer or bool results carry no gradient (PyTorch: not differentiable).
      {"argmax", "int64 result"}, {"argmin", "int64 result"}, {"one_hot", "int64 result"},
      {"ge.Tensor", "bool result"}, {"le.Tensor", "bool result"}, {"lt.Scalar", "bool result"},
      {"ne.Scalar", "bool result"}, {"ne.Tensor", "bool result"}, {"logical_and", "bool result"},
      {"logical_or", "bool result"}, {"logical_not", "bool result"},
      // First-order backward kernels: the gradcheck of their forward op checks them. When a graph is
      // built (create_graph), the rule uses differentiable ops instead, which gradgradcheck checks.
      {"gelu_backward", "gelu's first-order backward"},
      {"sigmoid_backward", "sigmoid's first-order backward"},
      {"tanh_backward", "tanh's first-order backward"},
      {"threshold_backward", "relu's first-order backward"},
      {"softmax_backward", "softmax's first-order backward"},
      {"log_softmax_backward", "log_softmax's first-order backward"},
      // Backward kernels of ops that are not twice differentiable (as PyTorch): the rule marks their
      // result, and test_gradcheck_nn.cpp asserts gradgradcheck's error for conv2d and layer_norm.
      {"conv2d_backward_input", "conv2d's backward; not twice differentiable"},
      {"conv2d_backward_weight", "conv2d's backward; not twice differentiable"},
      {"max_pool2d_backward", "max_pool2d's backward; not twice differentiable"},
      {"avg_pool2d_backward", "avg_pool2d's backward; not twice differentiable"},
      {"layer_norm_backward", "layer_norm's backward; not twice differentiable"},
      {"_sdpa_flash_backward", "the fused attention's backward; double backward differentiates the composed formulas instead"},
      {"embedding_backward", "embedding's backward; not twice differentiable"},
      {"mm_accumulate_", "mm's backward accumulating straight into a leaf's .grad (never recorded)"},
      // Fast paths taken only when no input requires grad; the differentiable path is checked.
      {"matmul", "no-grad fast path; with grad, matmul composes mm/bmm and views"},
      {"max_pool2d", "no-grad fast path; with grad, max_pool2d_with_indices runs"},
      // ops:: only, never behind a differentiable graft:: function: optimizer and running-stat
      // updates, and dispatcher-level forms the public API composes differently.
      {"addcmul_", "optimizer update (optim/optimizer.cpp), under no_grad"},
      {"addcdiv_", "optimizer update (optim/optimizer.cpp), under no_grad"},
      {"lerp_.Scalar", "optimizer and running-stat update, under no_grad"},
      {"_fused_adam_", "optimizer update, under no_grad"},
      {"_fused_sgd_", "optimizer update, under no_grad"},
      {"alias", "detach and hook plumbing: a new view with no history"},
      {"neg_", "ops:: only; graft:: has no in-place neg"},
      {"sqrt_", "ops:: only; graft:: has no in-place sqrt"},
      {"rsub.Scalar", "ops:: only; graft:: writes s - x as neg(x) + s"},
      {"rdiv.Scalar", "ops:: only; graft:: writes s / x as reciprocal(x) * s"},
      {"split_with_sizes", "ops:: only; graft:: offers split and chunk, both gradchecked"},
      {"mse_loss", "ops:: only; graft::mse_loss is composed, to any order"},
      {"cross_entropy_log_probs", "ops:: only; graft::cross_entropy composes log_softmax and nll_loss"},
  };
  return m;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

TEST_CASE("every registered op is gradchecked or listed as not differentiable, with a reason") {
  // Collected by the cases before this one: run alone, there is nothing to compare.
  REQUIRE(test::gradcheck_calls() > 100);
  std::vector<std::string> missing;
  for (const Op* op : registered_ops()) {
    const std::string name = op->schema.full_name();
    if (!test::gradchecked_ops().count(name) && !not_differentiable().count(name)) missing.push_back(name);
  }
  INFO("ops no gradcheck case differentiates (add a GRADCHECK case, or an exclusion with its reason): "
       << join(missing));
  CHECK(missing.empty());
}

TEST_CASE("every gradcheck exclusion names a registered op and has a reason") {
  std::vector<std::string> unknown;
  std::set<std::string> registered;
  for (const Op* op : registered_ops()) registered.insert(op->schema.full_name());
  for (const auto& [name, why] : not_differentiable()) {
    INFO(name);
    CHECK(!why.empty());
    if (!registered.count(name)) unknown.push_back(name);
  }
  INFO("exclusions that name no registered op: " << join(unknown));
  CHECK(unknown.empty());
}
