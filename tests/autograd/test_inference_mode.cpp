// InferenceMode (c10::InferenceMode): inference tensors carry no autograd state and no version
// counter, and are refused where autograd would need them.
#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

TEST_CASE("inside InferenceMode: grad mode is off, new tensors are inference tensors without history") {
  Tensor w = randn({3}).requires_grad_();
  Tensor normal = ones({3});
  CHECK_FALSE(normal.is_inference());
  {
    InferenceMode guard;
    CHECK_FALSE(is_grad_enabled());
    Tensor y = w * 2;
    CHECK(y.is_inference());
    CHECK_FALSE(y.requires_grad());
    CHECK(y.grad_fn() == nullptr);
    // No version counter on inference tensors; normal tensors keep theirs.
    int64_t v = y.version();
    y.add_(1);
    CHECK(y.version() == v);
    int64_t nv = normal.version();
    normal.add_(1);
    CHECK(normal.version() == nv + 1);
    // A view of a normal tensor is not an inference tensor.
    CHECK_FALSE(normal.select(0, 0).is_inference());
  }
  CHECK(is_grad_enabled());
}

TEST_CASE("an inference tensor saved for backward is refused with PyTorch's message") {
  Tensor x;
  {
    InferenceMode guard;
    x = ones({3});
  }
  Tensor w = randn({3}).requires_grad_();
  CHECK_THROWS_WITH(w * x, Catch::Contains("Inference tensors cannot be saved for backward") &&
                               Catch::Contains("MulBackward"));
  // Ops that save nothing of it are fine, gradients included.
  Tensor y = w + x;
  y.sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>{1, 1, 1});
}

TEST_CASE("writing an inference tensor in place or making it require grad outside InferenceMode is an error") {
  Tensor x;
  {
    InferenceMode guard;
    x = zeros({2});
  }
  CHECK_THROWS_WITH(x.add_(1), Catch::Contains("Inplace update to inference tensor outside InferenceMode"));
  CHECK(x.to_vector<float>() == std::vector<float>{0, 0});  // nothing was written
  CHECK_THROWS_WITH(x.requires_grad_(), Catch::Contains("Setting requires_grad=True on inference tensor outside InferenceMode"));
  Tensor c = x.clone();  // the documented way out
  CHECK_FALSE(c.is_inference());
  c.add_(1);
  CHECK(c.to_vector<float>() == std::vector<float>{1, 1});
}

TEST_CASE("InferenceMode(false) inside an enabled scope turns grad mode and inference tensors back off") {
  Tensor w = randn({2}).requires_grad_();
  InferenceMode outer;
  {
    InferenceMode inner(false);
    CHECK(is_grad_enabled());
    Tensor y = w * 3;
    CHECK_FALSE(y.is_inference());
    CHECK(y.requires_grad());
  }
  CHECK_FALSE(is_grad_enabled());
  CHECK((w * 3).is_inference());
}

namespace {

struct Twice : Function<Twice> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * 2;
  }
  static std::vector<Tensor> backward(FunctionCtx*, std::vector<Tensor> g) { return {g[0] * 2}; }
};

// What libtorch gives for any op inside InferenceMode: no node, so nothing requires grad.
void check_no_history(const Tensor& t) {
  CHECK(t.grad_fn() == nullptr);
  CHECK_FALSE(t.requires_grad());
}

}  // namespace

TEST_CASE("EnableGradGuard inside InferenceMode turns grad mode back on, yet no op records history") {
  // libtorch: InferenceMode excludes the autograd dispatch keys, so AutoGradMode(true) inside it makes
  // GradMode::is_enabled() true again while every op still runs without autograd.
  Tensor w = randn({2, 3}).requires_grad_();
  Tensor h = w * 2;  // a non-leaf with history, made outside
  auto h_fn = h.grad_fn();
  int64_t h_version = h.version();
  Tensor q = randn({1, 2, 4, 8}), k = randn({1, 2, 4, 8}), v = randn({1, 2, 4, 8});
  for (Tensor* t : {&q, &k, &v}) t->requires_grad_();
  Tensor mask = zeros({4, 4}).requires_grad_();
  Tensor a = randn({3}).requires_grad_();
  Tensor s = (a.sigmoid() * a).sum();
  Tensor leaf = randn({2}).requires_grad_();
  auto lin = std::make_shared<nn::Linear>(3, 2);
  lin->register_full_backward_hook([](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) {});
  Tensor seen_input;  // what forward got: the input itself, or the backward hooks' routing alias
  lin->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& in, const std::vector<Tensor>&) { seen_input = in[0]; });
  {
    InferenceMode guard;
    EnableGradGuard grad;
    CHECK(is_grad_enabled());

    Tensor y = w * w;  // an op that saves its inputs
    CHECK(y.is_inference());
    check_no_history(y);
    check_no_history(y.exp());
    check_no_history(w.matmul(w.t()));                       // the linear-algebra wrappers
    check_no_history(graft::stack({w, w}));
    // Views of a normal tensor stay normal tensors and get no node. (libtorch's requires_grad() of
    // such a view still answers through its base; graft's views made without recording do not.)
    for (const Tensor& part : graft::split(w, 1)) CHECK(part.grad_fn() == nullptr);
    Tensor view = w.select(0, 1);
    CHECK_FALSE(view.is_inference());
    CHECK(view.grad_fn() == nullptr);
    CHECK(w.view({3, 2}).grad_fn() == nullptr);
    check_no_history(Twice::apply(w));                       // a custom Function records no node
    check_no_history(scaled_dot_product_attention(q, k, v, mask));
    check_no_history(checkpoint([](const Tensor& x) { return x.exp().sum(); }, w));
    check_no_history((*lin)(w));
    CHECK(seen_input.grad_fn() == nullptr);  // the module's backward hooks routed nothing
    Tensor inference_input = ones({3});
    check_no_history(checkpoint([](const Tensor& x) { return x.exp(); }, inference_input));

    // In place on a tensor with history: the write happens (and counts), the history is not rebased.
    Tensor h_row = h.select(0, 0);
    h.mul_(3);
    CHECK(h.version() == h_version + 1);
    CHECK(h.grad_fn() == h_fn);
    // A view taken here is not linked to its base (a linked one would now rebuild its history).
    CHECK(h_row.grad_fn() == nullptr);
    // In place on a leaf that requires grad is no autograd error here: autograd does not run.
    leaf.add_(1);
    CHECK(leaf.is_leaf());

    // A backward run here with create_graph builds no graph either.
    auto g = autograd::grad({s}, {a}, {}, std::nullopt, /*create_graph=*/true);
    check_no_history(g[0]);
  }
  CHECK(is_grad_enabled());
  // Outside, w is untouched by what ran inside: its graph is the one made before.
  h.sum().backward();
  CHECK(w.grad().to_vector<float>() == std::vector<float>(6, 2.0f));
}
