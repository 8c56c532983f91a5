#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <tuple>

#include "graft.h"
#include "ops/ops.h"
#include "support/check_close.h"

using namespace graft;

namespace {
Tensor param() { return tensor({1.0, -2.0}, dtype(kFloat64)).requires_grad_(); }
// loss = 0.5 * sum(p^2), so grad = p.
void backward_on(const Tensor& p) { (p * p).sum().mul(0.5).backward(); }

template <class Opt>
void run_and_check(Opt& opt, Tensor p, const std::vector<std::vector<double>>& expected) {
  for (const auto& e : expected) {
    opt.zero_grad();
    backward_on(p);
    opt.step();
    auto v = p.to_vector<double>();
    CHECK(v[0] == Approx(e[0]).epsilon(1e-12));
    CHECK(v[1] == Approx(e[1]).epsilon(1e-12));
    CHECK(p.is_leaf());
    CHECK(p.requires_grad());
  }
}
}  // namespace

TEST_CASE("SGD without momentum: p -= lr * g") {
  Tensor p = param();
  optim::SGD opt({p}, 0.1);
  run_and_check(opt, p, {{0.9, -1.8}, {0.81, -1.62}, {0.729, -1.458}});
}

TEST_CASE("SGD with momentum and weight decay: the first buffer is the gradient") {
  Tensor p = param();
  optim::SGD opt({p}, 0.1, 0.9, 0, 0.1);
  run_and_check(opt, p, {{0.89, -1.78}, {0.6931, -1.3862}, {0.439649, -0.879298}});
}

TEST_CASE("SGD with nesterov momentum and weight decay") {
  Tensor p = param();
  optim::SGD opt({p}, 0.1, 0.9, 0, 0.1, true);
  run_and_check(opt, p, {{0.791, -1.582}, {0.536581, -1.073162}, {0.273767471, -0.547534942}});
  CHECK_THROWS(optim::SGD({p}, 0.1, 0, 0, 0, true));
}

TEST_CASE("SGD with dampening") {
  Tensor p = param();
  optim::SGD opt({p}, 0.1, 0.9, 0.5);
  run_and_check(opt, p, {{0.9, -1.8}, {0.765, -1.53}, {0.60525, -1.2105}});
}

TEST_CASE("Adam with bias correction") {
  Tensor p = param();
  optim::Adam opt({p}, 0.1);
  run_and_check(opt, p,
                {{0.900000001, -1.9000000005},
                 {0.8004122297123382, -1.8001664866210927},
                 {0.701586274504415, -1.7006233928121137}});
}

TEST_CASE("Adam with L2 weight decay") {
  Tensor p = param();
  optim::Adam opt({p}, 0.1, {0.9, 0.999}, 1e-8, 0.1);
  run_and_check(opt, p,
                {{0.9000000009090909, -1.9000000004545454},
                 {0.8004122295267845, -1.8001664865292035},
                 {0.7015862742210723, -1.700623392672905}});
}

TEST_CASE("AdamW decouples weight decay (default 1e-2)") {
  Tensor p = param();
  optim::AdamW opt({p}, 0.1, {0.9, 0.999}, 1e-8, 0.1);
  run_and_check(opt, p,
                {{0.890000001, -1.8800000005},
                 {0.7815718569541611, -1.7614089510885826},
                 {0.6751012231892008, -1.6443686843220089}});
  optim::AdamW dflt({p});
  CHECK(dflt.weight_decay == 1e-2);
  CHECK(dflt.lr() == 1e-3);
}

TEST_CASE("parameters with undefined grad are skipped; zero_grad clears or zeroes") {
  Tensor a = param(), b = param();
  optim::SGD opt({a, b}, 0.1, 0.9);
  optim::Adam adam({a, b}, 0.1);
  backward_on(a);
  int64_t vb = b.version();
  opt.step();
  adam.step();
  CHECK(b.to_vector<double>() == std::vector<double>{1.0, -2.0});
  CHECK(b.version() == vb);
  CHECK(a.to_vector<double>() != std::vector<double>{1.0, -2.0});
  opt.zero_grad(false);
  REQUIRE(a.grad().defined());
  CHECK(a.grad().to_vector<double>() == std::vector<double>{0, 0});
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  Tensor nonleaf = a * 2;
  CHECK_THROWS_WITH(optim::SGD({nonleaf}, 0.1), Catch::Contains("non-leaf"));
}

TEST_CASE("learning rate get/set and schedulers") {
  Tensor p = param();
  optim::SGD opt({p}, 1.0);
  opt.set_lr(0.5);
  CHECK(opt.lr() == 0.5);
  opt.set_lr(1.0);
  optim::StepLR step(opt, 2, 0.5);
  std::vector<double> seen;
  for (int i = 0; i < 5; ++i) {
    step.step();
    seen.push_back(opt.lr());
  }
  CHECK(seen == std::vector<double>{1.0, 0.5, 0.5, 0.25, 0.25});

  optim::Adam adam({p}, 1.0);
  optim::CosineAnnealingLR cos(adam, 4, 0.1);
  cos.step();
  CHECK(adam.lr() == Approx(0.1 + 0.9 * (1 + std::cos(M_PI / 4)) / 2));
  cos.step();
  CHECK(adam.lr() == Approx(0.55));
  cos.step();
  cos.step();
  CHECK(adam.lr() == Approx(0.1));
  CHECK(cos.get_last_lr() == Approx(0.1));
  CHECK(cos.last_epoch() == 4);
}

TEST_CASE("WarmupCosineLR ramps linearly, then follows the cosine to eta_min, and never runs a step at 0") {
  Tensor p = param();
  optim::AdamW opt({p}, 2.0);
  optim::WarmupCosineLR sched(opt, 2, 6);
  std::vector<double> seen{opt.lr()};  // step 0's lr is set by the constructor
  for (int i = 0; i < 5; ++i) {
    sched.step();
    seen.push_back(opt.lr());
  }
  REQUIRE(seen.size() == 6);
  CHECK(seen[0] == Approx(1.0));  // 2 * 1/2
  CHECK(seen[1] == Approx(2.0));  // warmup done
  CHECK(seen[2] == Approx(1.0 + std::cos(M_PI / 4)));  // (1 + cos(pi * 1/4)) at base 2
  CHECK(seen[3] == Approx(1.0));
  CHECK(seen[4] == Approx(1.0 + std::cos(3 * M_PI / 4)));
  CHECK(seen[5] == Approx(0.0).margin(1e-12));
  CHECK_THROWS_WITH(optim::WarmupCosineLR(opt, 6, 6), Catch::Contains("warmup_steps < total_steps"));
}

TEST_CASE("training smoke test: a 2-layer MLP separates a 2-D linear problem") {
  manual_seed(42);
  const int64_t n = 256;
  Tensor x = randn({n, 2});
  auto xv = x.to_vector<float>();
  std::vector<int64_t> labels(n);
  for (int64_t i = 0; i < n; ++i) labels[i] = xv[2 * i] + 2 * xv[2 * i + 1] > 0 ? 1 : 0;
  Tensor y = tensor(labels, {n});

  auto model = std::make_shared<nn::Sequential>(std::initializer_list<std::shared_ptr<nn::Module>>{
      std::make_shared<nn::Linear>(2, 16), std::make_shared<nn::ReLU>(), std::make_shared<nn::Linear>(16, 2)});
  optim::SGD opt(model->parameters(), 0.1, 0.9);
  double first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(model->forward(x), y);
    loss.backward();
    opt.step();
    if (step == 0) first = loss.item<float>();
    last = loss.item<float>();
  }
  INFO("first loss " << first << ", last loss " << last);
  CHECK(first > 0.4);
  CHECK(last < 0.1);
  Tensor pred = model->forward(x).argmax(1);
  double acc = pred.eq(y).to(kFloat64).mean().item<double>();
  CHECK(acc > 0.97);
}

namespace {
// Five steps of `make(params)` on three parameters (a matrix, a vector, a scalar) with fixed
// pseudo-random gradients; returns the parameters' values after each step.
template <class Make>
std::vector<std::vector<double>> trajectory(DType dt, bool fused, Make make) {
  manual_seed(3);
  std::vector<Tensor> ps = {randn({7, 5}, dtype(dt)).requires_grad_(), randn({5}, dtype(dt)).requires_grad_(),
                            randn({}, dtype(dt)).requires_grad_()};
  std::vector<Tensor> grads;
  for (int s = 0; s < 5; ++s)
    for (const auto& p : ps) grads.push_back(randn(p.sizes(), dtype(dt)));
  auto opt = make(ps);
  opt->fused = fused;
  std::vector<std::vector<double>> out;
  for (int s = 0; s < 5; ++s) {
    for (size_t i = 0; i < ps.size(); ++i) ps[i].mutable_grad() = grads[s * ps.size() + i];
    opt->step();
    for (const auto& p : ps) out.push_back(p.to(kFloat64).to_vector<double>());
  }
  return out;
}

template <class Make>
void check_fused_equals_op_by_op(Make make) {
  for (DType dt : {kFloat32, kFloat64}) {
    INFO("dtype " << dt);
    auto fused = trajectory(dt, true, make), plain = trajectory(dt, false, make);
    REQUIRE(fused.size() == plain.size());
    for (size_t i = 0; i < fused.size(); ++i) CHECK(fused[i] == plain[i]);  // bit for bit
  }
}
}  // namespace

namespace {
// PyTorch's SGD on one element, each `x.add_(y, alpha=a)` one fused multiply-add (rounded once).
template <class T>
void sgd_reference(T& p, T& buf, T g, bool first, double lr, double mom, double damp, double wd, bool nest) {
  T d = g;
  if (wd != 0) d = std::fma(static_cast<T>(wd), p, d);
  if (mom != 0) {
    buf = first ? d : std::fma(static_cast<T>(1 - damp), d, buf * static_cast<T>(mom));
    d = nest ? std::fma(static_cast<T>(mom), buf, d) : buf;
  }
  p = std::fma(static_cast<T>(-lr), d, p);
}
}  // namespace

TEST_CASE("fused SGD rounds each x + a*y once, as PyTorch; the op-by-op path agrees to rounding") {
  for (auto [mom, damp, wd, nest] : std::vector<std::tuple<double, double, double, bool>>{
           {0, 0, 0, false}, {0, 0, 0.1, false}, {0.9, 0, 0, false}, {0.9, 0.3, 0.05, false}, {0.9, 0, 0.05, true}}) {
    INFO("momentum " << mom << " dampening " << damp << " weight_decay " << wd << " nesterov " << nest);
    auto make = [&](std::vector<Tensor> ps) { return std::make_unique<optim::SGD>(ps, 0.05, mom, damp, wd, nest); };
    for (DType dt : {kFloat32, kFloat64}) {
      INFO("dtype " << dt);
      auto fused = trajectory(dt, true, make), plain = trajectory(dt, false, make);
      // The reference replays trajectory()'s parameters and gradients element by element.
      manual_seed(3);
      std::vector<Tensor> ps = {randn({7, 5}, dtype(dt)), randn({5}, dtype(dt)), randn({}, dtype(dt))};
      std::vector<Tensor> grads;
      for (int s = 0; s < 5; ++s)
        for (const auto& p : ps) grads.push_back(randn(p.sizes(), dtype(dt)));
      auto replay = [&]<class T>() {
        std::vector<std::vector<T>> p, buf;
        for (const auto& t : ps) {
          p.push_back(t.to_vector<T>());
          buf.push_back(std::vector<T>(p.back().size()));
        }
        std::vector<std::vector<double>> out;
        for (int s = 0; s < 5; ++s)
          for (size_t i = 0; i < ps.size(); ++i) {
            auto g = grads[s * ps.size() + i].to_vector<T>();
            for (size_t e = 0; e < g.size(); ++e) sgd_reference<T>(p[i][e], buf[i][e], g[e], s == 0, 0.05, mom, damp, wd, nest);
            out.emplace_back(p[i].begin(), p[i].end());
          }
        return out;
      };
      auto ref = dt == kFloat32 ? replay.template operator()<float>() : replay.template operator()<double>();
      REQUIRE(fused.size() == ref.size());
      for (size_t i = 0; i < fused.size(); ++i) CHECK(fused[i] == ref[i]);  // bit for bit
      for (size_t i = 0; i < fused.size(); ++i)
        for (size_t e = 0; e < fused[i].size(); ++e)
          CHECK(plain[i][e] == Approx(fused[i][e]).epsilon(dt == kFloat32 ? 1e-5 : 1e-13).margin(1e-6));
    }
  }
}

TEST_CASE("fused Adam and AdamW updates give the op-by-op bits") {
  for (double wd : {0.0, 0.1}) {
    INFO("weight_decay " << wd);
    check_fused_equals_op_by_op([&](std::vector<Tensor> ps) {
      return std::make_unique<optim::Adam>(ps, 1e-2, std::make_pair(0.9, 0.999), 1e-8, wd);
    });
    check_fused_equals_op_by_op([&](std::vector<Tensor> ps) {
      return std::make_unique<optim::AdamW>(ps, 1e-2, std::make_pair(0.8, 0.99), 1e-6, wd);
    });
  }
}

TEST_CASE("fused updates bump the parameter's version once and keep it a leaf") {
  Tensor p = randn({4}).requires_grad_();
  optim::Adam opt({p}, 0.1);
  p.mutable_grad() = ones({4});
  auto v0 = p.version();
  opt.step();
  CHECK(p.version() == v0 + 1);
  CHECK(p.is_leaf());
  CHECK(p.requires_grad());
}

TEST_CASE("a strided gradient takes the op-by-op path with the same result") {
  manual_seed(5);
  Tensor g = randn({5, 4}).t();  // [4, 5], not contiguous
  Tensor a = randn({4, 5}).requires_grad_(), b = a.detach().clone().requires_grad_();
  optim::Adam fa({a}, 0.1), fb({b}, 0.1);
  fb.fused = false;
  a.mutable_grad() = g;
  b.mutable_grad() = g.contiguous();
  fa.step();
  fb.step();
  CHECK(a.to_vector<float>() == b.to_vector<float>());
}

TEST_CASE("a channels-last convolution weight steps fused, its gradient and state in its layout, with the op-by-op bits") {
  // The gradient layout contract (autograd/accumulate_grad.cpp) gives the weight a channels-last
  // .grad although the weight-gradient kernel writes OIHW; the state is made channels-last too, so
  // the fused kernel takes all four.
  // Both runs must get the same gradients: with the contention monitor on, a busy machine (the
  // suite's other tests) can run one of them on one thread, and oneDNN's weight gradient sums in
  // another order there.
  struct FixedThreads {
    ContentionPolicy before = contention_policy();
    FixedThreads() { set_contention_policy(ContentionPolicy::Fixed); }
    ~FixedThreads() { set_contention_policy(before); }
  } fixed_threads;
  manual_seed(9);
  auto run = [](bool fused, OpProfiler& prof) {
    manual_seed(9);
    nn::Conv2d conv(8, 16, 3, 1, 1);
    conv.to(MemoryFormat::ChannelsLast);
    Tensor x = randn({2, 8, 6, 6}).contiguous(MemoryFormat::ChannelsLast);
    optim::Adam opt(conv.parameters(), 1e-2);
    opt.fused = fused;
    for (int s = 0; s < 3; ++s) {
      opt.zero_grad(true);
      conv.forward(x).pow(2).sum().backward();
      const Tensor w = conv.parameters()[0];
      REQUIRE(w.is_contiguous(MemoryFormat::ChannelsLast));
      CHECK(w.grad().strides() == w.strides());
      OpProfiler::Scope on(prof);
      opt.step();
    }
    return conv.parameters()[0].to_vector<float>();
  };
  OpProfiler fused_prof, plain_prof;
  const std::vector<float> fused = run(true, fused_prof), plain = run(false, plain_prof);
  CHECK(fused == plain);
  int64_t fused_calls = 0, other = 0;
  std::string others;
  for (const OpProfiler::Row& r : fused_prof.rows()) {
    if (r.name == "_fused_adam_") fused_calls += r.calls;
    else if (r.name != "empty_strided" && r.name != "fill_" && r.name != "full") other += r.calls, others += r.name + " ";
  }
  INFO("update ops besides the fused kernel (the state's zeros aside): " << others);
  CHECK(fused_calls == 2 * 3);  // weight and bias, every step
  CHECK(other == 0);
  // A gradient in another layout than the weight still steps (op by op), and the kernel itself
  // names the layout it wants.
  Tensor p = randn({4, 3, 2, 2}).contiguous(MemoryFormat::ChannelsLast), m = zeros({4, 3, 2, 2}), v = zeros({4, 3, 2, 2});
  ops::FusedAdamArgs args{0.1, 0.9, 0.999, 0, 1e-8, 0.1, 0.001, false};
  CHECK_THROWS_WITH(ops::fused_adam_(p, m, v, randn({4, 3, 2, 2}), args),
                    Catch::Contains("_fused_adam_") && Catch::Contains("the parameter's strides [12, 1, 6, 3]"));
}

TEST_CASE("fused update kernels reject mismatched tensors with the op's name") {
  Tensor p = zeros({3}), m = zeros({3}), v = zeros({3}), g = zeros({4});
  ops::FusedAdamArgs args{0.1, 0.9, 0.999, 0, 1e-8, 0.1, 0.001, false};
  CHECK_THROWS_WITH(ops::fused_adam_(p, m, v, g, args),
                    Catch::Contains("_fused_adam_") && Catch::Contains("grad") && Catch::Contains("[4]"));
  Tensor m64 = zeros({3}, dtype(kFloat64));
  CHECK_THROWS_WITH(ops::fused_adam_(p, m64, v, zeros({3}), args), Catch::Contains("exp_avg") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(ops::fused_adam_(p, p, v, zeros({3}), args), Catch::Contains("share memory"));
  CHECK(p.to_vector<float>() == std::vector<float>{0, 0, 0});  // nothing written
}

namespace {
std::vector<float> values16(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

// `steps` steps of make(params) on a 16-bit model and on a float32 reference whose parameters are
// rounded to the 16-bit dtype after every step: with float32 state, the two must agree bit for bit
// (the 16-bit kernels compute the float32 update and round the parameter once). A second float32
// copy that is never rounded stays within 16-bit tolerance.
template <class Make>
void check_reduced_against_float(DType dt, bool fused, Make make) {
  INFO("dtype " << dt << " fused " << fused);
  manual_seed(11);
  const int steps = 6;
  std::vector<Tensor> low, ref, free_ref;
  for (Shape s : {Shape{33, 17}, Shape{600}, Shape{}}) {
    Tensor init = randn(s).to(dt).to(kFloat32);
    low.push_back(init.to(dt).requires_grad_());
    ref.push_back(init.clone().requires_grad_());
    free_ref.push_back(init.clone().requires_grad_());
  }
  auto o_low = make(low), o_ref = make(ref), o_free = make(free_ref);
  o_low->fused = o_ref->fused = o_free->fused = fused;
  for (int k = 0; k < steps; ++k) {
    for (size_t i = 0; i < low.size(); ++i) {
      Tensor g = randn(low[i].sizes()).to(dt);
      low[i].mutable_grad() = g;
      ref[i].mutable_grad() = g.to(kFloat32);
      free_ref[i].mutable_grad() = g.to(kFloat32);
    }
    o_low->step();
    o_ref->step();
    o_free->step();
    NoGradGuard ng;
    for (size_t i = 0; i < low.size(); ++i) {
      INFO("step " << k << " parameter " << i);
      ops::copy_(ref[i], ref[i].to(dt).to(kFloat32));
      CHECK(low[i].dtype() == dt);
      REQUIRE(values16(low[i]) == values16(ref[i]));
      test::check_close(low[i].to(kFloat32), free_ref[i], {.rtol = dt == kBFloat16 ? 3e-2 : 5e-3, .atol = 1e-2});
    }
  }
}
}  // namespace

TEST_CASE("SGD, Adam and AdamW step bfloat16 and float16 parameters with float32 state") {
  for (DType dt : {kBFloat16, kFloat16})
    for (bool fused : {true, false}) {
      check_reduced_against_float(dt, fused, [](std::vector<Tensor> ps) {
        return std::make_unique<optim::SGD>(ps, 0.05, 0.9, 0.1, 0.01);
      });
      check_reduced_against_float(dt, fused, [](std::vector<Tensor> ps) {
        return std::make_unique<optim::SGD>(ps, 0.05, 0.9, 0, 0.01, true);
      });
      check_reduced_against_float(dt, fused, [](std::vector<Tensor> ps) {
        return std::make_unique<optim::Adam>(ps, 1e-2, std::make_pair(0.9, 0.999), 1e-8, 0.01);
      });
      check_reduced_against_float(dt, fused, [](std::vector<Tensor> ps) {
        return std::make_unique<optim::AdamW>(ps, 1e-2, std::make_pair(0.8, 0.99), 1e-6, 0.05);
      });
    }
}

TEST_CASE("fused kernels take 16-bit parameters with float32 state only") {
  Tensor p = ones({3}, dtype(kBFloat16)), g = ones({3}, dtype(kBFloat16));
  Tensor m = zeros({3}), v = zeros({3});
  ops::FusedAdamArgs args{0.1, 0.9, 0.999, 0, 1e-8, 0.1, 0.001, false};
  ops::fused_adam_(p, m, v, g, args);
  CHECK(values16(m) == std::vector<float>(3, 0.1f));
  Tensor m16 = zeros({3}, dtype(kBFloat16));
  CHECK_THROWS_WITH(ops::fused_adam_(p, m16, v, g, args),
                    Catch::Contains("_fused_adam_") && Catch::Contains("exp_avg") && Catch::Contains("float32 state"));
  Tensor g32 = ones({3});
  CHECK_THROWS_WITH(ops::fused_adam_(p, m, v, g32, args), Catch::Contains("grad"));
  Tensor buf = zeros({3});
  ops::fused_sgd_(p, buf, g, {0.5, 0.9, 0, 0, false, true});
  CHECK(values16(buf) == std::vector<float>(3, 1.0f));
}

// Exact resume: an optimizer (and its scheduler) rebuilt from a state_dict taken mid-run continues
// bit for bit like the one that kept running, for SGD with momentum, Adam and AdamW, with
// float32, float64 and bfloat16 parameters (whose state is float32).
TEST_CASE("state_dict and load_state_dict resume SGD, Adam and AdamW and their schedule bit for bit") {
  enum Kind { Sgd, AdamK, AdamWK };
  auto make = [](Kind k, std::vector<Tensor> ps) -> std::unique_ptr<optim::Optimizer> {
    if (k == Sgd) return std::make_unique<optim::SGD>(ps, 0.1, 0.9, 0.1, 1e-2, false);
    if (k == AdamK) return std::make_unique<optim::Adam>(ps, 0.05, std::pair{0.8, 0.9}, 1e-6, 1e-3);
    return std::make_unique<optim::AdamW>(ps, 0.05);
  };
  for (Kind k : {Sgd, AdamK, AdamWK}) {
    for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
      INFO("optimizer " << k << " dtype " << dt);
      manual_seed(5);
      Tensor w0 = randn({4, 3}).to(dt), b0 = randn({3}).to(dt), x = randn({6, 4}).to(dt);
      auto fresh = [](const Tensor& t) { return t.detach().clone().requires_grad_(); };
      std::vector<Tensor> a = {fresh(w0), fresh(b0)};
      auto opt = make(k, a);
      optim::CosineAnnealingLR sched(*opt, 10, 1e-3);
      auto step = [&](std::vector<Tensor>& ps, optim::Optimizer& o, optim::LRScheduler& s) {
        o.zero_grad();
        ((x.matmul(ps[0]) + ps[1]).tanh().pow(2.0)).sum().to(kFloat32).backward();
        o.step();
        s.step();
      };
      for (int i = 0; i < 3; ++i) step(a, *opt, sched);
      optim::OptimizerState saved = opt->state_dict();
      std::map<std::string, double> saved_sched = sched.state_dict();
      std::vector<Tensor> b = {fresh(a[0]), fresh(a[1])};
      auto opt2 = make(k, b);
      opt2->set_lr(123.0);  // overwritten by the load
      optim::CosineAnnealingLR sched2(*opt2, 10, 1e-3);
      opt2->load_state_dict(saved);
      sched2.load_state_dict(saved_sched);
      CHECK(opt2->lr() == opt->lr());
      for (int i = 0; i < 3; ++i) {
        step(a, *opt, sched);
        step(b, *opt2, sched2);
      }
      for (int i = 0; i < 2; ++i) {
        Tensor d = (a[i].detach().to(kFloat64) - b[i].detach().to(kFloat64)).abs().max();
        CHECK(d.item<double>() == 0.0);
      }
      // The saved state is a copy: the 3 later steps did not change it.
      if (k != Sgd) CHECK(saved.values.at("state.0.step") == 3.0);
      for (auto& [key, t] : saved.tensors) CHECK(t.dtype() == (dt == kBFloat16 ? kFloat32 : dt));
    }
  }
}

TEST_CASE("load_state_dict refuses another optimizer's state, a wrong parameter count or shape, naming it") {
  Tensor p = tensor({1.0, -2.0}).requires_grad_(), q = tensor({3.0}).requires_grad_();
  optim::Adam adam({p});
  (p * p).sum().backward();
  adam.step();
  optim::OptimizerState s = adam.state_dict();
  optim::SGD sgd({p}, 0.1);
  CHECK_THROWS_WITH(sgd.load_state_dict(s), Catch::Contains("the state is of a 'adam' optimizer, this one is 'sgd'"));
  optim::Adam two({p, q});
  CHECK_THROWS_WITH(two.load_state_dict(s), Catch::Contains("holds 1 parameters, this optimizer has 2"));
  optim::Adam other({q});
  CHECK_THROWS_WITH(other.load_state_dict(s), Catch::Contains("'state.0.exp_avg' has shape [2] but parameter 0 has shape [1]"));
  optim::OptimizerState broken = s;
  broken.tensors.erase("state.0.exp_avg_sq");
  optim::Adam again({p});
  again.set_lr(0.5);
  CHECK_THROWS_WITH(again.load_state_dict(broken), Catch::Contains("has some state but no 'state.0.exp_avg_sq'"));
  CHECK(again.lr() == 0.5);  // a refused load changes nothing
}

TEST_CASE("state_bytes is what a stepped optimizer's state holds: float32 buffers per parameter element") {
  Tensor w = ops::ones({3, 4}).requires_grad_(), b = ops::ones({5}).requires_grad_();
  auto stepped_bytes = [&](optim::Optimizer& o) {
    w.mutable_grad() = ops::ones({3, 4});
    b.mutable_grad() = ops::ones({5});
    o.step();
    int64_t n = 0;
    for (const auto& [key, t] : o.state_dict().tensors) n += static_cast<int64_t>(t.nbytes());
    return n;
  };
  optim::Adam adam({w, b});
  CHECK(adam.state_bytes() == 2 * 17 * 4);
  CHECK(stepped_bytes(adam) == adam.state_bytes());
  optim::SGD plain({w, b}, 0.1);
  CHECK(plain.state_bytes() == 0);
  optim::SGD momentum({w, b}, 0.1, 0.9);
  CHECK(momentum.state_bytes() == 17 * 4);
  CHECK(stepped_bytes(momentum) == momentum.state_bytes());
}
