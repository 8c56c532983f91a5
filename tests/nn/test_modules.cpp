#include <catch2/catch.hpp>

#include <cmath>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;

namespace {
std::vector<double> vals(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }
void set(Tensor t, std::vector<double> v) {
  NoGradGuard ng;
  t.copy_(tensor(v, t.sizes(), dtype(kFloat64)));
}
void check_range(const Tensor& t, double bound) {
  auto v = vals(t);
  double lo = 1e9, hi = -1e9;
  for (double x : v) {
    lo = std::min(lo, x);
    hi = std::max(hi, x);
  }
  CHECK(lo >= -bound);
  CHECK(hi <= bound);
  CHECK(hi - lo > bound);  // actually spread over the range
}
}  // namespace

TEST_CASE("Linear computes x W^T + b") {
  nn::Linear lin(2, 3);
  CHECK(lin.weight.sizes() == Shape{3, 2});
  CHECK(lin.bias.sizes() == Shape{3});
  set(lin.weight, {1, 2, 3, 4, 5, 6});
  set(lin.bias, {0.5, -0.5, 1});
  Tensor y = lin(tensor({1, -1, 2, 0.5}).view({2, 2}));
  CHECK(vals(y) == std::vector<double>{1 - 2 + 0.5, 3 - 4 - 0.5, 5 - 6 + 1, 2 + 1 + 0.5, 6 + 2 - 0.5, 10 + 3 + 1});
  nn::Linear nobias(2, 3, false);
  CHECK_FALSE(nobias.bias.defined());
  CHECK(nobias.parameters().size() == 1);
}

TEST_CASE("default initialisation matches PyTorch's ranges") {
  manual_seed(0);
  nn::Linear lin(100, 200);
  check_range(lin.weight, 0.1);
  check_range(lin.bias, 0.1);
  nn::Conv2d conv(4, 64, 3);  // fan_in 36
  check_range(conv.weight, 1.0 / 6);
  check_range(conv.bias, 1.0 / 6);
  nn::Conv2d grouped(4, 64, {3, 2}, 1, 0, 1, 2);  // fan_in 2*3*2 = 12
  CHECK(grouped.weight.sizes() == Shape{64, 2, 3, 2});
  check_range(grouped.weight, 1.0 / std::sqrt(12.0));
  nn::Embedding emb(1000, 20);
  auto e = vals(emb.weight);
  double mean = 0, sq = 0;
  for (double x : e) mean += x;
  mean /= e.size();
  for (double x : e) sq += (x - mean) * (x - mean);
  CHECK(std::abs(mean) < 0.05);
  CHECK(std::sqrt(sq / e.size()) == Approx(1).margin(0.05));
  nn::LayerNorm ln({4});
  CHECK(vals(ln.weight) == std::vector<double>{1, 1, 1, 1});
  CHECK(vals(ln.bias) == std::vector<double>{0, 0, 0, 0});
  nn::BatchNorm2d bn(2);
  CHECK(vals(bn.weight) == std::vector<double>{1, 1});
  CHECK(vals(bn.bias) == std::vector<double>{0, 0});
  CHECK(vals(bn.running_mean) == std::vector<double>{0, 0});
  CHECK(vals(bn.running_var) == std::vector<double>{1, 1});
  // init functions work on parameters that require grad
  nn::init::zeros_(lin.weight);
  CHECK(vals(lin.weight.sum())[0] == 0);
  nn::init::ones_(lin.bias);
  CHECK(vals(lin.bias.sum())[0] == 200);
  CHECK(lin.weight.is_leaf());
  CHECK_THROWS_WITH(nn::init::kaiming_uniform_(lin.bias), Catch::Contains("fewer than 2 dimensions"));
}

TEST_CASE("Conv2d matches the functional op") {
  manual_seed(3);
  nn::Conv2d conv(2, 4, 3, 2, 1);
  Tensor x = randn({2, 2, 7, 7});
  Tensor y = conv(x);
  CHECK(y.sizes() == Shape{2, 4, 4, 4});
  check_close(y, conv2d(x, conv.weight, conv.bias, {2, 2}, {1, 1}));
  nn::Conv2d dil(2, 2, {3, 1}, 1, {0, 1}, 2, 2, false);
  check_close(dil(x), conv2d(x, dil.weight, {}, {1, 1}, {0, 1}, {2, 2}, 2));
}

TEST_CASE("pooling modules") {
  Tensor x = arange(16, dtype(kFloat32)).view({1, 1, 4, 4});
  nn::MaxPool2d mp(2);
  CHECK(vals(mp(x)) == std::vector<double>{5, 7, 13, 15});
  nn::AvgPool2d ap(2);
  CHECK(vals(ap(x)) == std::vector<double>{2.5, 4.5, 10.5, 12.5});
  nn::MaxPool2d mp3(3, 1, 1);
  CHECK(mp3(x).sizes() == Shape{1, 1, 4, 4});
  check_close(mp3(x), max_pool2d(x, {3, 3}, {1, 1}, {1, 1}));
}

TEST_CASE("activations match the functional ops") {
  Tensor x = tensor({-2, -0.5, 0, 0.5, 3});
  CHECK(vals(nn::ReLU()(x)) == std::vector<double>{0, 0, 0, 0.5, 3});
  check_close(nn::GELU()(x), nn::functional::gelu(x));
  check_close(nn::GELU("tanh")(x), gelu(x, "tanh"));
  CHECK(vals(nn::GELU()(x))[4] == Approx(3 * 0.5 * (1 + std::erf(3 / std::sqrt(2.0)))));
  check_close(nn::Tanh()(x), x.tanh());
  check_close(nn::Sigmoid()(x), x.sigmoid());
  check_close(nn::functional::relu(x), x.relu());
}

TEST_CASE("Dropout scales by 1/(1-p) in training and is the identity in eval") {
  manual_seed(7);
  nn::Dropout drop(0.25);
  Tensor x = ones({20000}).requires_grad_();
  Tensor y = drop(x);
  auto v = vals(y);
  int64_t zeros_count = 0;
  for (double e : v) {
    CHECK((e == 0 || e == Approx(1 / 0.75)));
    zeros_count += e == 0;
  }
  CHECK(zeros_count / 20000.0 == Approx(0.25).margin(0.02));
  y.sum().backward();
  CHECK(vals(x.grad()) == v);  // d/dx (x * mask) = mask
  drop.eval();
  Tensor z = drop(x);
  CHECK(vals(z) == std::vector<double>(20000, 1.0));
  CHECK(vals(nn::functional::dropout(x, 0.0, true)) == std::vector<double>(20000, 1.0));
  CHECK(vals(nn::functional::dropout(x, 1.0, true).sum())[0] == 0);
  CHECK_THROWS(nn::Dropout(1.5));
}

TEST_CASE("LayerNorm normalises over the trailing shape") {
  nn::LayerNorm ln({4});
  Tensor x = tensor({1, 2, 3, 4, 2, 2, 2, 6}).view({2, 4});
  auto y = vals(ln(x));
  double s = std::sqrt(1.25 + 1e-5);
  CHECK(y[0] == Approx(-1.5 / s));
  CHECK(y[3] == Approx(1.5 / s));
  set(ln.weight, {2, 2, 2, 2});
  set(ln.bias, {1, 1, 1, 1});
  CHECK(vals(ln(x))[0] == Approx(2 * -1.5 / s + 1));
  check_close(ln(x), layer_norm(x, {4}, ln.weight, ln.bias));
  nn::LayerNorm plain({2, 4}, 1e-5, false);
  CHECK(plain.parameters().empty());
}

TEST_CASE("BatchNorm2d: batch statistics in training, running statistics in eval") {
  manual_seed(11);
  const int64_t N = 3, C = 2, H = 2, W = 2;
  nn::BatchNorm2d bn(C, 1e-5, 0.1);
  set(bn.weight, {1.5, 0.5});
  set(bn.bias, {0.25, -1});
  Tensor x = randn({N, C, H, W}, dtype(kFloat64));
  Tensor y = bn(x.to(kFloat32));
  auto xv = vals(x), yv = vals(y);
  auto at = [&](int64_t n, int64_t c, int64_t i) { return xv[(n * C + c) * H * W + i]; };
  std::vector<double> mean(C), var(C);
  const double m = N * H * W;
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < H * W; ++i) mean[c] += at(n, c, i) / m;
    for (int64_t n = 0; n < N; ++n)
      for (int64_t i = 0; i < H * W; ++i) var[c] += (at(n, c, i) - mean[c]) * (at(n, c, i) - mean[c]) / m;
  }
  double w[] = {1.5, 0.5}, b[] = {0.25, -1};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H * W; ++i)
        CHECK(yv[(n * C + c) * H * W + i] ==
              Approx((at(n, c, i) - mean[c]) / std::sqrt(var[c] + 1e-5) * w[c] + b[c]).margin(1e-5));
  auto rm = vals(bn.running_mean), rv = vals(bn.running_var);
  for (int64_t c = 0; c < C; ++c) {
    CHECK(rm[c] == Approx(0.1 * mean[c]).margin(1e-6));
    CHECK(rv[c] == Approx(0.9 + 0.1 * var[c] * m / (m - 1)).margin(1e-6));  // unbiased
  }
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);

  bn.eval();
  Tensor ye = bn(x.to(kFloat32));
  auto yev = vals(ye);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < H * W; ++i)
        CHECK(yev[(n * C + c) * H * W + i] ==
              Approx((at(n, c, i) - rm[c]) / std::sqrt(rv[c] + 1e-5) * w[c] + b[c]).margin(1e-5));
  CHECK(bn.num_batches_tracked.item<int64_t>() == 1);  // eval does not update
  CHECK(vals(bn.running_mean) == rm);
}

TEST_CASE("Embedding looks rows up; the padding row is zero and gets no gradient") {
  nn::Embedding emb(5, 3, 1);
  CHECK(vals(emb.weight.select(0, 1)) == std::vector<double>{0, 0, 0});
  Tensor idx = tensor(std::vector<int64_t>{4, 1, 4}, {3});
  Tensor y = emb(idx);
  CHECK(y.sizes() == Shape{3, 3});
  check_close(y.select(0, 0), emb.weight.select(0, 4));
  y.sum().backward();
  CHECK(vals(emb.weight.grad().select(0, 4)) == std::vector<double>{2, 2, 2});
  CHECK(vals(emb.weight.grad().select(0, 1)) == std::vector<double>{0, 0, 0});
  nn::Embedding neg(5, 2, -1);
  CHECK(neg.padding_idx == 4);
}

TEST_CASE("Flatten and Sequential") {
  Tensor x = randn({2, 3, 4, 5});
  CHECK(nn::Flatten()(x).sizes() == Shape{2, 60});
  CHECK(nn::Flatten(0, 1)(x).sizes() == Shape{6, 4, 5});
  manual_seed(5);
  auto l1 = std::make_shared<nn::Linear>(60, 8);
  auto l2 = std::make_shared<nn::Linear>(8, 3);
  nn::Sequential seq{std::make_shared<nn::Flatten>(), l1, std::make_shared<nn::ReLU>(), l2};
  check_close(seq(x), l2->forward(l1->forward(x.flatten(1)).relu()));
  seq.push_back(std::make_shared<nn::Functional>([](const Tensor& t) { return t * 2; }));
  check_close(seq(x), l2->forward(l1->forward(x.flatten(1)).relu()) * 2);
}

TEST_CASE("gradcheck through Linear, Conv2d, LayerNorm and BatchNorm2d in float64") {
  manual_seed(13);
  auto lin = std::make_shared<nn::Linear>(3, 2);
  lin->to(kFloat64);
  Tensor x = randn({4, 3}, dtype(kFloat64)).requires_grad_();
  CHECK(autograd::gradcheck([&](const std::vector<Tensor>&) -> Tensor { return lin->forward(x); },
                            {x, lin->weight, lin->bias}));

  auto conv = std::make_shared<nn::Conv2d>(2, 2, 3, 1, 1, 1, 2);
  conv->to(kFloat64);
  Tensor xc = randn({1, 2, 4, 4}, dtype(kFloat64)).requires_grad_();
  CHECK(autograd::gradcheck([&](const std::vector<Tensor>&) -> Tensor { return conv->forward(xc); },
                            {xc, conv->weight, conv->bias}));

  auto ln = std::make_shared<nn::LayerNorm>(Shape{3});
  ln->to(kFloat64);
  set(ln->weight, {0.5, 1.5, -1});
  set(ln->bias, {0.1, 0.2, 0.3});
  Tensor xl = randn({2, 3}, dtype(kFloat64)).requires_grad_();
  CHECK(autograd::gradcheck([&](const std::vector<Tensor>&) -> Tensor { return ln->forward(xl); },
                            {xl, ln->weight, ln->bias}));

  auto bn = std::make_shared<nn::BatchNorm2d>(2);
  bn->to(kFloat64);
  set(bn->weight, {0.5, 2});
  set(bn->bias, {0.1, -0.2});
  Tensor xb = randn({2, 2, 2, 2}, dtype(kFloat64)).requires_grad_();
  CHECK(autograd::gradcheck([&](const std::vector<Tensor>&) -> Tensor { return bn->forward(xb); },
                            {xb, bn->weight, bn->bias}));
  bn->eval();
  CHECK(autograd::gradcheck([&](const std::vector<Tensor>&) -> Tensor { return bn->forward(xb); },
                            {xb, bn->weight, bn->bias}));
}

TEST_CASE("Sequential runs a ReLU in place on an activation nothing else holds, with the same values and gradients") {
  manual_seed(3);
  auto fc1 = std::make_shared<nn::Linear>(4, 8), fc2 = std::make_shared<nn::Linear>(8, 3);
  nn::Sequential seq{fc1, std::make_shared<nn::ReLU>(), fc2};
  Tensor x = randn({5, 4});
  const void* fc1_out = nullptr;
  const void* fc2_in = nullptr;
  Tensor kept;
  bool keep = false;
  fc1->register_forward_hook([&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& out) {
    fc1_out = out[0].data_ptr();
    if (keep) kept = out[0];
  });
  fc2->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) { fc2_in = in[0].data_ptr(); });
  // The reference: the layers called one by one, out of place.
  Tensor want = (*fc2)(graft::relu((*fc1)(x)));
  auto grads = [&](const Tensor& y) { return autograd::grad({(y * y).sum()}, {fc1->weight, fc1->bias, fc2->weight}); };
  std::vector<Tensor> want_g = grads(want);
  Tensor y = seq(x);
  CHECK(fc2_in == fc1_out);  // the ReLU wrote over fc1's output
  CHECK(vals(y) == vals(want));
  std::vector<Tensor> g = grads(y);
  for (size_t i = 0; i < g.size(); ++i) CHECK(vals(g[i]) == vals(want_g[i]));
  // A hook that keeps the activation makes the ReLU run out of place: what it kept is unchanged.
  keep = true;
  y = seq(x);
  CHECK(fc2_in != fc1_out);
  std::vector<double> k = vals(kept);
  CHECK(std::any_of(k.begin(), k.end(), [](double v) { return v < 0; }));
  CHECK(vals(y) == vals(want));
  // The caller's tensor is never written: a ReLU first in the chain runs out of place.
  nn::Sequential first{std::make_shared<nn::ReLU>()};
  Tensor z = randn({6});
  std::vector<double> z0 = vals(z);
  Tensor r = first(z);
  CHECK(vals(z) == z0);
  CHECK(r.data_ptr() != z.data_ptr());
}

TEST_CASE("Sequential runs Tanh and Sigmoid in place too, with the out-of-place values and gradients") {
  for (int kind = 0; kind < 2; ++kind) {
    manual_seed(4);
    auto fc1 = std::make_shared<nn::Linear>(4, 8), fc2 = std::make_shared<nn::Linear>(8, 3);
    std::shared_ptr<nn::Module> act = kind == 0 ? std::shared_ptr<nn::Module>(std::make_shared<nn::Tanh>())
                                                : std::make_shared<nn::Sigmoid>();
    INFO(act->name());
    CHECK(act->works_in_place());
    nn::Sequential seq{fc1, act, fc2};
    Tensor x = randn({5, 4});
    const void* fc1_out = nullptr;
    const void* fc2_in = nullptr;
    fc1->register_forward_hook(
        [&](nn::Module&, const std::vector<Tensor>&, const std::vector<Tensor>& out) { fc1_out = out[0].data_ptr(); });
    fc2->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) { fc2_in = in[0].data_ptr(); });
    Tensor h = (*fc1)(x);
    Tensor want = (*fc2)(kind == 0 ? graft::tanh(h) : graft::sigmoid(h));
    auto grads = [&](const Tensor& y) { return autograd::grad({(y * y).sum()}, {fc1->weight, fc1->bias, fc2->weight}); };
    std::vector<Tensor> want_g = grads(want);
    Tensor y = seq(x);
    CHECK(fc2_in == fc1_out);
    CHECK(vals(y) == vals(want));
    std::vector<Tensor> g = grads(y);
    for (size_t i = 0; i < g.size(); ++i) CHECK(vals(g[i]) == vals(want_g[i]));
  }
}

TEST_CASE("call_owned runs a hooked module through operator(), and is_sole_owner refuses shared, viewed and kept tensors") {
  // A hook may keep what it is given, so a module with hooks never writes over its input.
  auto relu = std::make_shared<nn::ReLU>();
  Tensor seen;
  relu->register_forward_pre_hook([&](nn::Module&, const std::vector<Tensor>& in) { seen = in[0]; });
  Tensor a = randn({8}) * 1;
  std::vector<double> before = vals(a);
  const void* data = a.data_ptr();
  Tensor r = relu->call_owned(std::move(a));
  CHECK(r.data_ptr() != data);
  CHECK(vals(seen) == before);
  // The ownership test itself.
  Tensor w = randn({4}).requires_grad_();
  Tensor fresh = w * 2;
  CHECK(nn::is_sole_owner(fresh));
  Tensor other = fresh;
  CHECK_FALSE(nn::is_sole_owner(fresh));  // a second Tensor shares it
  other = Tensor();
  Tensor view = fresh.view({2, 2});
  CHECK_FALSE(nn::is_sole_owner(view));   // a view, sharing the storage
  CHECK_FALSE(nn::is_sole_owner(fresh));
  view = Tensor();
  CHECK(nn::is_sole_owner(fresh));
  fresh.retain_grad();
  CHECK_FALSE(nn::is_sole_owner(fresh));  // its gradient is kept for the user
  CHECK_FALSE(nn::is_sole_owner(w));      // a leaf that requires grad
  CHECK_FALSE(nn::is_sole_owner(Tensor()));
}
