// Node hooks, post-accumulate-grad hooks, gradient edges and increment_version (API.md "Graph
// features, second wave"), with PyTorch 2.15's order of hooks around a node.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {
Tensor leaf(std::vector<double> v) { return tensor(v, {static_cast<int64_t>(v.size())}, dtype(kFloat64)).requires_grad_(); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("hooks run in PyTorch's order: tensor hooks, retain_grad, node pre-hooks, apply, post-accumulate, node post hooks") {
  Tensor x = leaf({1, 2, 3});
  Tensor y = x * 2;
  std::vector<std::string> order;
  std::vector<double> prehook_saw, retained_at_prehook;
  y.register_hook([&](const Tensor& g) {
    order.push_back("y tensor hook");
    return g * 10;  // retain_grad and the node's pre-hook see the replaced gradient
  });
  y.retain_grad();
  y.grad_fn()->register_prehook([&](const variable_list& grad_outputs) -> std::optional<variable_list> {
    order.push_back("MulBackward prehook");
    prehook_saw = vals(grad_outputs[0]);
    retained_at_prehook = vals(y.grad());
    return std::nullopt;
  });
  y.grad_fn()->register_hook([&](const variable_list& grad_inputs, const variable_list& grad_outputs) -> std::optional<variable_list> {
    order.push_back("MulBackward hook");
    CHECK(vals(grad_inputs[0]) == std::vector<double>{20, 20, 20});
    CHECK(vals(grad_outputs[0]) == std::vector<double>{10, 10, 10});
    return std::nullopt;
  });
  x.register_hook([&](const Tensor&) {
    order.push_back("x tensor hook");
    return Tensor();
  });
  auto acc = grad_accumulator(x);
  acc->register_prehook([&](const variable_list&) -> std::optional<variable_list> {
    order.push_back("AccumulateGrad prehook");
    return std::nullopt;
  });
  x.register_post_accumulate_grad_hook([&](Tensor& leaf_x) {
    order.push_back("x post-accumulate hook");
    CHECK(vals(leaf_x.grad()) == std::vector<double>{20, 20, 20});  // .grad is already updated
  });
  acc->register_hook([&](const variable_list&, const variable_list&) -> std::optional<variable_list> {
    order.push_back("AccumulateGrad hook");
    return std::nullopt;
  });
  y.sum().backward();
  CHECK(order == std::vector<std::string>{"y tensor hook", "MulBackward prehook", "MulBackward hook", "x tensor hook",
                                          "AccumulateGrad prehook", "x post-accumulate hook", "AccumulateGrad hook"});
  CHECK(prehook_saw == std::vector<double>{10, 10, 10});
  CHECK(retained_at_prehook == std::vector<double>{10, 10, 10});
  CHECK(vals(x.grad()) == std::vector<double>{20, 20, 20});
}

TEST_CASE("a node post hook may replace the gradients it computed") {
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  Tensor y = x * w;
  y.grad_fn()->register_hook([](const variable_list& grad_inputs, const variable_list&) -> std::optional<variable_list> {
    return variable_list{grad_inputs[0] * 100, grad_inputs[1]};
  });
  y.sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{300, 400});
  CHECK(vals(w.grad()) == std::vector<double>{1, 2});
  // A replacement of the wrong length is an error naming the node.
  Tensor z = x * w;
  z.grad_fn()->register_hook([](const variable_list& gi, const variable_list&) -> std::optional<variable_list> {
    return variable_list{gi[0]};
  });
  CHECK_THROWS_WITH(z.sum().backward(), Catch::Contains("MulBackward") && Catch::Contains("returned 1 gradients, expected 2"));
}

TEST_CASE("a node pre-hook may replace incoming gradients, and its handle removes it") {
  Tensor x = leaf({1, 2});
  Tensor y = x.exp();
  int calls = 0;
  HookHandle h = y.grad_fn()->register_prehook([&](const variable_list& g) -> std::optional<variable_list> {
    ++calls;
    return variable_list{g[0] * 0};
  });
  y.sum().backward({}, true);
  CHECK(calls == 1);
  CHECK(vals(x.grad()) == std::vector<double>{0, 0});
  h.remove();
  h.remove();  // idempotent
  x.mutable_grad() = Tensor();
  y.sum().backward();
  CHECK(calls == 1);
  CHECK(vals(x.grad()) == vals(x.exp()));
}

TEST_CASE("node metadata is per-node storage that lives with the node") {
  Tensor x = leaf({1});
  Tensor y = x * 3;
  y.grad_fn()->metadata()["layer"] = std::string("fc1");
  CHECK(std::any_cast<std::string>(y.grad_fn()->metadata().at("layer")) == "fc1");
  CHECK((x * 3).grad_fn()->metadata().empty());
}

TEST_CASE("post-accumulate-grad hooks are owned by the leaf, run once per backward, and are removable") {
  Tensor w = leaf({1, 2});
  int calls = 0;
  std::vector<double> seen;
  // No accumulator is held by the caller: the hook still fires (it lives on the leaf).
  HookHandle h = w.register_post_accumulate_grad_hook([&](Tensor& p) {
    ++calls;
    seen = vals(p.grad());
  });
  (w * w).sum().backward();  // w used twice: one accumulation, one call
  CHECK(calls == 1);
  CHECK(seen == std::vector<double>{2, 4});
  (w * 3).sum().backward();
  CHECK(calls == 2);
  CHECK(seen == std::vector<double>{5, 7});
  h.remove();
  (w * 3).sum().backward();
  CHECK(calls == 2);
  // A hook that updates the parameter in place, as an optimizer-in-backward does.
  Tensor p = leaf({1, 1});
  p.register_post_accumulate_grad_hook([](Tensor& t) {
    NoGradGuard ng;
    t.sub_(t.grad() * 0.5);
    t.mutable_grad() = Tensor();
  });
  Tensor y = (p * 4).sum();
  y.backward();
  CHECK(vals(p) == std::vector<double>{-1, -1});
  CHECK_FALSE(p.grad().defined());
  CHECK_THROWS_WITH((p * 2).register_post_accumulate_grad_hook([](Tensor&) {}), Catch::Contains("non-leaf"));
  CHECK_THROWS_WITH(ones({2}).register_post_accumulate_grad_hook([](Tensor&) {}), Catch::Contains("doesn't require gradient"));
}

TEST_CASE("a gradient edge gives the gradient with respect to a value an in-place op later overwrote") {
  Tensor x = leaf({0.5, 1.0});
  Tensor a = x * 3;  // a scalar multiply saves nothing, so backward may pass through it after a.mul_
  GradientEdge before = get_gradient_edge(a);
  CHECK(before.node == a.grad_fn());
  a.mul_(2);  // a's history now ends in the in-place mul
  Tensor out = (a * a).sum();
  auto g = grad({out}, std::vector<GradientEdge>{before}, {}, /*retain_graph=*/true);
  // out = sum((2 a_before)^2): d out / d a_before = 8 a_before = 24 x
  CHECK(vals(g[0]) == vals(x * 24));
  // The edge of a leaf is its accumulator; grad() with it captures instead of accumulating.
  auto gx = grad({out}, std::vector<GradientEdge>{get_gradient_edge(x)});
  CHECK(vals(gx[0]) == vals(x * 72));
  CHECK_FALSE(x.grad().defined());
  CHECK_THROWS_WITH(get_gradient_edge(ones({2})), Catch::Contains("does not require gradients"));
  Tensor unused = x * 5;
  Tensor o2 = (x * 2).sum();
  CHECK_THROWS_WITH(grad({o2}, std::vector<GradientEdge>{get_gradient_edge(unused)}), Catch::Contains("not have been used"));
  auto ok = grad({(x * 2).sum()}, std::vector<GradientEdge>{get_gradient_edge(unused)}, {}, std::nullopt, false, true);
  CHECK_FALSE(ok[0].defined());
}

TEST_CASE("increment_version makes a saved tensor look written in place") {
  Tensor x = leaf({0.1, 0.2});
  Tensor y = x.sigmoid();  // saves its output
  int64_t v0 = y.version();
  increment_version({y});
  CHECK(y.version() == v0 + 1);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("modified by an inplace operation") &&
                                            Catch::Contains("SigmoidBackward"));
}

TEST_CASE("backward from gradient edges, restricted to leaf edges") {
  Tensor x = leaf({1, 2}), w = leaf({3, 4});
  Tensor y = x * w;
  GradientEdge root = get_gradient_edge(y);
  backward({root}, {ones({2}, dtype(kFloat64))}, /*retain_graph=*/true);
  CHECK(vals(x.grad()) == std::vector<double>{3, 4});
  CHECK(vals(w.grad()) == std::vector<double>{1, 2});
  // inputs= as edges: only x's accumulator runs.
  backward({root}, {full({2}, 2.0, dtype(kFloat64))}, true, false, {get_gradient_edge(x)});
  CHECK(vals(x.grad()) == std::vector<double>{9, 12});
  CHECK(vals(w.grad()) == std::vector<double>{1, 2});
  CHECK_THROWS_WITH(backward({root}, {ones({3}, dtype(kFloat64))}, true), Catch::Contains("mismatch in shape"));
  CHECK_THROWS_WITH(backward({root}, {}, true), Catch::Contains("got 0 gradients for 1 gradient edges"));
  Tensor z = x * 2;
  CHECK_THROWS_WITH(backward({get_gradient_edge((z * 3).sum())}, {ones({}, dtype(kFloat64))}, true, false,
                             {get_gradient_edge(z)}),
                    Catch::Contains("not of a leaf's AccumulateGrad"));
}
