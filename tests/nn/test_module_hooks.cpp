// Module hooks (torch.nn.Module's forward pre-hooks, forward hooks and full backward hooks; libtorch
// has none): order, replacement, removal, a module used twice, and a module inside a checkpoint.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "graft.h"

using namespace graft;

namespace {
std::vector<float> vals(const Tensor& t) { return t.to_vector<float>(); }

std::shared_ptr<nn::Linear> make_linear() {
  manual_seed(7);
  return std::make_shared<nn::Linear>(3, 2);
}
}  // namespace

TEST_CASE("forward pre-hooks and forward hooks run around forward and may replace inputs and outputs") {
  auto fc = make_linear();
  std::vector<std::string> order;
  fc->register_forward_pre_hook([&](nn::Module& m, const std::vector<Tensor>& in) {
    order.push_back("pre " + m.name());
    CHECK(in.size() == 1);
  });
  auto h = fc->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) -> std::optional<std::vector<Tensor>> {
    order.push_back("pre scale");
    return std::vector<Tensor>{in[0] * 0};
  });
  std::vector<float> hook_input;
  fc->register_forward_hook([&](nn::Module&, const std::vector<Tensor>& in, const std::vector<Tensor>& out) -> std::optional<std::vector<Tensor>> {
    order.push_back("post");
    hook_input = vals(in[0]);
    return std::vector<Tensor>{out[0] + 1};
  });
  Tensor x = ones({1, 3});
  Tensor y = (*fc)(x);
  CHECK(order == std::vector<std::string>{"pre Linear", "pre scale", "post"});
  CHECK(hook_input == std::vector<float>(3, 0.0f));  // forward hooks see the replaced input
  CHECK(vals(y) == vals(fc->bias.detach() + 1));
  h.remove();
  order.clear();
  Tensor y2 = (*fc)(x);
  CHECK(order == std::vector<std::string>{"pre Linear", "post"});
  CHECK(vals(y2) == vals(fc->forward(x) + 1));
  // forward() itself runs no hooks: containers call children through operator().
  order.clear();
  fc->forward(x);
  CHECK(order.empty());
  nn::Sequential seq({fc});
  seq.forward(x);
  CHECK(order == std::vector<std::string>{"pre Linear", "post"});
}

TEST_CASE("a full backward hook gets the module's input and output gradients and may replace grad_input") {
  auto fc = make_linear();
  Tensor x = randn({4, 3}).requires_grad_();
  std::vector<Tensor> gin, gout;
  int calls = 0;
  fc->register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& grad_input, const std::vector<Tensor>& grad_output) {
    ++calls;
    gin = grad_input;
    gout = grad_output;
  });
  Tensor y = (*fc)(x);
  Tensor loss = (y * y).sum();
  loss.backward();
  CHECK(calls == 1);
  REQUIRE(gout.size() == 1);
  REQUIRE(gin.size() == 1);
  Tensor ye = fc->forward(x).detach();
  CHECK(vals(gout[0]) == vals(ye * 2));
  CHECK(vals(gin[0]) == vals(x.grad()));
  // Replacing grad_input changes what flows to the input.
  fc->register_full_backward_hook([](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) -> std::optional<std::vector<Tensor>> {
    return std::vector<Tensor>{gi[0] * 0};
  });
  x.mutable_grad() = Tensor();
  ((*fc)(x)).sum().backward();
  CHECK(vals(x.grad()) == std::vector<float>(12, 0.0f));
}

TEST_CASE("a module used twice fires its backward hook once per call, each with that call's gradients") {
  auto fc = std::make_shared<nn::Linear>(3, 3);
  Tensor x = randn({2, 3}).requires_grad_();
  std::vector<std::vector<float>> outs;
  fc->register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& go) {
    outs.push_back(vals(go[0]));
  });
  Tensor h = (*fc)(x);
  Tensor y = (*fc)(h);
  (y * 3).sum().backward();
  REQUIRE(outs.size() == 2);
  CHECK(outs[0] == std::vector<float>(6, 3.0f));  // the second call's output gradient comes first
  Tensor w = fc->weight.detach();
  CHECK(outs[1] == vals(matmul(full({2, 3}, 3.0), w)));  // dy/dh for the first call
}

TEST_CASE("a backward hook on a module whose input needs no gradient fires with an undefined grad_input") {
  auto fc = make_linear();
  std::vector<Tensor> gin;
  int calls = 0;
  fc->register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) {
    ++calls;
    gin = gi;
  });
  (*fc)(ones({1, 3})).sum().backward();
  CHECK(calls == 1);
  REQUIRE(gin.size() == 1);
  CHECK_FALSE(gin[0].defined());
  CHECK(fc->weight.grad().defined());
}

TEST_CASE("a checkpointed module fires its backward hook once per backward; forward hooks rerun in the recomputation") {
  auto fc = make_linear();
  Tensor x = randn({2, 3}).requires_grad_();
  int backward_calls = 0, forward_calls = 0;
  std::vector<float> gin;
  fc->register_full_backward_hook([&](nn::Module&, const std::vector<Tensor>& gi, const std::vector<Tensor>&) {
    ++backward_calls;
    gin = vals(gi[0]);
  });
  fc->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>&) { ++forward_calls; });
  Tensor y = autograd::checkpoint([&](const Tensor& h) { return (*fc)(h).tanh(); }, x);
  y.sum().backward();
  CHECK(backward_calls == 1);
  CHECK(forward_calls == 2);  // the forward and the recomputation, as in PyTorch
  CHECK(gin == vals(x.grad()));
}
