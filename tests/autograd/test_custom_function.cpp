#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {

struct MyExp : Function<MyExp> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    return {g[0] * ctx->saved_tensors()[0]};
  }
};

// Scales by a non-tensor argument kept in saved_data; returns one grad per forward argument.
struct Scale : Function<Scale> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x, double k) {
    ctx->saved_data["k"] = k;
    return x * k;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    return {g[0] * std::any_cast<double>(ctx->saved_data["k"]), Tensor()};
  }
};

// Returns a view of its input.
struct FirstRow : Function<FirstRow> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    ctx->saved_data["shape"] = x.sizes();
    return x.select(0, 0);
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    Tensor r = zeros(std::any_cast<Shape>(ctx->saved_data["shape"]), dtype(g[0].dtype()));
    r.select(0, 0).copy_(g[0]);
    return {r};
  }
};

// Doubles its input in place and marks it dirty.
struct DoubleInPlace : Function<DoubleInPlace> {
  static Tensor forward(FunctionCtx* ctx, Tensor x) {
    x.mul_(2);
    ctx->mark_dirty({x});
    return x;
  }
  static std::vector<Tensor> backward(FunctionCtx*, std::vector<Tensor> g) { return {g[0] * 2}; }
};

struct NeedsGradProbe : Function<NeedsGradProbe> {
  static inline std::vector<bool> seen;
  static Tensor forward(FunctionCtx* ctx, const Tensor& a, const Tensor& b) {
    seen = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
    return a * b;
  }
  static std::vector<Tensor> backward(FunctionCtx*, std::vector<Tensor> g) { return {g[0], g[0]}; }
};

}  // namespace

TEST_CASE("a custom function's forward and backward run and its node is named") {
  Tensor x = tensor({0.5, 1.0}, dtype(kFloat64)).requires_grad_();
  Tensor y = MyExp::apply(x);
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name().find("MyExp") != std::string::npos);
  y.sum().backward();
  CHECK(x.grad().to_vector<double>()[1] == Approx(std::exp(1.0)));
  CHECK(gradcheck([](const std::vector<Tensor>& in) { return MyExp::apply(in[0]); }, {x}));
}

TEST_CASE("custom function saved tensors are released after backward") {
  Tensor x = tensor({0.5}, dtype(kFloat64)).requires_grad_();
  Tensor y = MyExp::apply(x).sum();
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("backward through the graph a second time"));
}

TEST_CASE("non-tensor arguments and saved_data work") {
  Tensor x = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Scale::apply(x, 3.0).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3, 3});
}

TEST_CASE("a custom function can return a view of its input") {
  Tensor x = tensor(std::vector<double>{1, 2, 3, 4}, {2, 2}).requires_grad_();
  Tensor r = FirstRow::apply(x);
  CHECK(r.is_alias_of(x));
  (r * tensor(std::vector<double>{5, 7}, {2})).sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{5, 7, 0, 0});
}

TEST_CASE("a custom function that marks its input dirty rebases its history") {
  Tensor a = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Tensor m = a * 3;
  Tensor out = DoubleInPlace::apply(m);
  CHECK(out.is_same(m));
  CHECK(m.grad_fn()->name().find("DoubleInPlace") != std::string::npos);
  CHECK(m.to_vector<double>() == std::vector<double>{6, 12});
  m.sum().backward();
  CHECK(a.grad().to_vector<double>() == std::vector<double>{6, 6});
  Tensor leaf = tensor({1.0}, dtype(kFloat64)).requires_grad_();
  CHECK_THROWS_WITH(DoubleInPlace::apply(leaf), Catch::Contains("leaf tensor that requires grad"));
}

TEST_CASE("needs_input_grad reports which inputs require grad") {
  Tensor a = tensor({1.0}, dtype(kFloat64)).requires_grad_();
  Tensor b = tensor({2.0}, dtype(kFloat64));
  NeedsGradProbe::apply(a, b);
  CHECK(NeedsGradProbe::seen == std::vector<bool>{true, false});
}

namespace {

// Two outputs; backward reports whether each incoming gradient was defined.
struct TwoOut : Function<TwoOut> {
  static std::vector<Tensor> forward(FunctionCtx* ctx, const Tensor& x, bool materialize) {
    ctx->set_materialize_grads(materialize);
    return {x * 2, x * 3};
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    ctx->saved_data["defined"] = std::vector<bool>{g[0].defined(), g[1].defined()};
    Tensor r = g[0].defined() ? g[0] * 2 : Tensor();
    if (g[1].defined()) r = r.defined() ? r + g[1] * 3 : g[1] * 3;
    return {r, Tensor()};
  }
};

// Sorts and returns the permutation too; the indices are marked non-differentiable.
struct SortWithIndex : Function<SortWithIndex> {
  static std::vector<Tensor> forward(FunctionCtx* ctx, const Tensor& x) {
    Tensor scaled = x * 1;
    Tensor idx = x * 0;  // a float "index" output, to check that marking alone detaches it
    ctx->mark_non_differentiable({idx});
    return {scaled, idx};
  }
  static std::vector<Tensor> backward(FunctionCtx*, std::vector<Tensor> g) {
    CHECK(g[1].defined());  // materialized as zeros
    CHECK(g[1].sum().item<double>() == 0);
    return {g[0]};
  }
};

struct OnceExp : Function<OnceExp> {
  static constexpr bool once_differentiable = true;
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y});
    return y;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    CHECK_FALSE(is_grad_enabled());  // a once-differentiable backward records nothing
    return {g[0] * ctx->saved_tensors()[0]};
  }
};

}  // namespace

TEST_CASE("set_materialize_grads(false) hands undefined gradients to backward; the default hands zeros") {
  Tensor x = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  for (bool materialize : {true, false}) {
    auto outs = TwoOut::apply(x, materialize);
    outs[0].sum().backward();
    auto node = std::dynamic_pointer_cast<CustomNode>(outs[0].grad_fn());
    REQUIRE(node);
    auto defined = std::any_cast<std::vector<bool>>(node->ctx.saved_data["defined"]);
    CHECK(defined == std::vector<bool>{true, materialize});
    CHECK(x.grad().to_vector<double>() == std::vector<double>{2, 2});
    x.mutable_grad() = Tensor();
  }
}

TEST_CASE("mark_non_differentiable: the output does not require grad and backward sees zeros for it") {
  Tensor x = tensor({3.0, 1.0}, dtype(kFloat64)).requires_grad_();
  auto outs = SortWithIndex::apply(x);
  CHECK(outs[0].requires_grad());
  CHECK_FALSE(outs[1].requires_grad());
  outs[0].sum().backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 1});
}

TEST_CASE("once_differentiable: first order works, differentiating the backward throws PyTorch's message") {
  Tensor x = tensor({0.5, 1.0}, dtype(kFloat64)).requires_grad_();
  auto g = grad({OnceExp::apply(x).sum()}, {x});
  CHECK(g[0].to_vector<double>() == x.exp().to_vector<double>());
  auto g1 = grad({(OnceExp::apply(x) * x).sum()}, {x}, {}, std::nullopt, /*create_graph=*/true);
  CHECK(g1[0].requires_grad());
  CHECK_THROWS_WITH(grad({g1[0].sum()}, {x}),
                    Catch::Contains("trying to differentiate twice a function that was marked with @once_differentiable"));
}
