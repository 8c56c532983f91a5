#include <catch2/catch.hpp>

#include <atomic>
#include <cmath>
#include <thread>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using namespace graft::autograd;

namespace {
Tensor leaf(std::vector<double> v, Shape s) { return tensor(v, s, dtype(kFloat64)).requires_grad_(); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
}  // namespace

TEST_CASE("backward computes gradients of a small graph") {
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor b = leaf({4, 5, 6}, {3});
  Tensor y = (a * b + a.sin()).sum();
  y.backward();
  CHECK(vals(a.grad())[0] == Approx(4 + std::cos(1.0)));
  CHECK(vals(a.grad())[2] == Approx(6 + std::cos(3.0)));
  CHECK(vals(b.grad()) == std::vector<double>{1, 2, 3});
}

TEST_CASE("gradients accumulate across backward calls and into shared leaves") {
  Tensor a = leaf({1, 2}, {2});
  (a * 3).sum().backward();
  (a * a).sum().backward();
  CHECK(vals(a.grad()) == std::vector<double>{3 + 2, 3 + 4});
}

TEST_CASE("nodes have names and next edges") {
  Tensor a = leaf({1, 2}, {2});
  Tensor y = a.sigmoid() * 2;
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->name() == "MulBackward");
  CHECK(y.grad_fn()->next_edges()[0].function->name() == "SigmoidBackward");
  CHECK(y.grad_fn()->next_edges()[0].function->next_edges()[0].function == grad_accumulator(a));
  CHECK(grad_accumulator(a)->name() == "AccumulateGrad");
  CHECK(a.is_leaf());
  CHECK_FALSE(y.is_leaf());
  CHECK(y.requires_grad());
}

TEST_CASE("backward twice without retain_graph fails with PyTorch's message") {
  Tensor a = leaf({1, 2}, {2});
  Tensor y = (a.exp() * a).sum();
  y.backward({}, true);
  y.backward();
  CHECK(vals(a.grad())[0] == Approx(2 * 2 * std::exp(1.0)));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("Trying to backward through the graph a second time"));
}

TEST_CASE("an in-place write to a saved tensor is detected with the node and versions") {
  Tensor a = leaf({1, 2, 3}, {3});
  Tensor s = a.to(kFloat32).sigmoid();
  Tensor y = s * 2;
  {
    NoGradGuard ng;
    s.mul_(2);
  }
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("modified by an inplace operation: [Float [3]], which is "
                                                        "output 0 of SigmoidBackward, is at version 1; expected "
                                                        "version 0 instead"));
}

TEST_CASE("an in-place op saves its result without a copy, and a later write to it is caught") {
  // As PyTorch: relu_ saves self as its output, so the save shares the activation's memory (a CNN's
  // in-place ReLU holds one buffer, not two), and the version check guards it.
  Tensor a = leaf({1, -2, 3}, {3});
  Tensor x = a.to(kFloat32) * 1;
  const void* data = x.data_ptr();
  std::vector<const void*> saved;
  {
    autograd::SavedTensorsHooks hooks([&](const Tensor& t) -> std::any { saved.push_back(t.data_ptr()); return t; },
                                      [](const std::any& p) { return std::any_cast<Tensor>(p); });
    x.relu_();
  }
  CHECK(saved == std::vector<const void*>{data});
  x.sum().backward();
  CHECK(vals(a.grad()) == std::vector<double>{1, 0, 1});
  Tensor y = a.to(kFloat32) * 1;
  y.relu_();
  y.mul_(2);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("modified by an inplace operation: [Float [3]], which is "
                                                        "output 0 of ReluBackward, is at version 2; expected "
                                                        "version 1 instead"));
}

TEST_CASE("an implicit gradient needs a scalar output") {
  Tensor a = leaf({1, 2}, {2});
  CHECK_THROWS_WITH((a * 2).backward(), Catch::Contains("grad can be implicitly created only for scalar outputs"));
  (a * 2).backward(ones({2}, dtype(kFloat64)));
  CHECK(vals(a.grad()) == std::vector<double>{2, 2});
  Tensor c = ones({2});
  CHECK_THROWS_WITH(c.sum().backward(), Catch::Contains("does not require grad and does not have a grad_fn"));
}

TEST_CASE("grad returns gradients without touching .grad, with allow_unused") {
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  Tensor y = (a * a).sum();
  auto g = grad({y}, {a}, {}, true);
  CHECK(vals(g[0]) == std::vector<double>{2, 4});
  CHECK_FALSE(a.grad().defined());
  CHECK_THROWS_WITH(grad({y}, {a, b}, {}, true), Catch::Contains("appears to not have been used in the graph"));
  auto g2 = grad({y}, {a, b}, {}, true, false, true);
  CHECK(g2[0].defined());
  CHECK_FALSE(g2[1].defined());
}

TEST_CASE("double backward through tanh, sigmoid and softmax is exact") {
  Tensor x = leaf({0.3, -0.7}, {2});
  auto g = grad({x.tanh().sum()}, {x}, {}, std::nullopt, true);
  auto gg = grad({g[0].sum()}, {x});
  for (int i = 0; i < 2; ++i) {
    double v = vals(x)[i], t = std::tanh(v);
    CHECK(vals(g[0])[i] == Approx(1 - t * t));
    CHECK(vals(gg[0])[i] == Approx(-2 * t * (1 - t * t)));
  }
  auto gs = grad({x.sigmoid().sum()}, {x}, {}, std::nullopt, true);
  auto ggs = grad({gs[0].sum()}, {x});
  for (int i = 0; i < 2; ++i) {
    double s = 1 / (1 + std::exp(-vals(x)[i]));
    CHECK(vals(ggs[0])[i] == Approx(s * (1 - s) * (1 - 2 * s)));
  }
  Tensor z = leaf({0.1, 0.5, -0.2}, {3});
  auto w = tensor(std::vector<double>{1, 2, 3}, {3});
  auto gsm = grad({(z.softmax(0) * w).sum()}, {z}, {}, std::nullopt, true);
  CHECK(gradcheck([&](const std::vector<Tensor>& in) { return (in[0].softmax(0) * w).sum(); }, {z}));
  CHECK(gradgradcheck([&](const std::vector<Tensor>& in) { return in[0].softmax(0) * w; }, {z}));
  CHECK(gsm[0].requires_grad());
}

TEST_CASE("backward with inputs accumulates only into the listed tensors") {
  Tensor a = leaf({1, 2}, {2});
  Tensor b = leaf({3, 4}, {2});
  Tensor y = (a * b).sum();
  y.backward({}, true, false, {a});
  CHECK(vals(a.grad()) == std::vector<double>{3, 4});
  CHECK_FALSE(b.grad().defined());
  // A non-leaf input gets its gradient in .grad as well.
  Tensor m = a * 2;
  Tensor z = (m * b).sum();
  z.backward({}, false, false, {m});
  CHECK(vals(m.grad()) == std::vector<double>{3, 4});
  CHECK(vals(a.grad()) == std::vector<double>{3, 4});
}

TEST_CASE("graph task ids are -1 outside, unique per backward and shared by hooks inside") {
  CHECK(current_graph_task_id() == -1);
  Tensor a = leaf({1, 2}, {2});
  Tensor m = a * 2;
  std::vector<int64_t> ids;
  m.register_hook([&](const Tensor&) {
    ids.push_back(current_graph_task_id());
    return Tensor();
  });
  a.register_hook([&](const Tensor&) {
    ids.push_back(current_graph_task_id());
    return Tensor();
  });
  Tensor y = m.sum();
  y.backward({}, true);
  y.backward({}, true);
  REQUIRE(ids.size() == 4);
  CHECK(ids[0] >= 0);
  CHECK(ids[0] == ids[1]);
  CHECK(ids[2] == ids[3]);
  CHECK(ids[0] != ids[2]);
  CHECK(current_graph_task_id() == -1);
}

TEST_CASE("will_engine_execute_node answers per graph task and throws outside backward") {
  Tensor a = leaf({1}, {1});
  Tensor b = leaf({2}, {1});
  Tensor c = a * b;
  Tensor d = a * b;
  CHECK_THROWS_WITH(will_engine_execute_node(c.grad_fn()), Catch::Contains("only be called during the backward pass"));
  std::vector<bool> seen;
  c.register_hook([&](const Tensor& g) {
    seen = {will_engine_execute_node(grad_accumulator(a)), will_engine_execute_node(grad_accumulator(b)),
            will_engine_execute_node(c.grad_fn()), will_engine_execute_node(d.grad_fn())};
    return Tensor();
  });
  c.sum().backward({}, true);
  CHECK(seen == std::vector<bool>{true, true, true, false});
  c.sum().backward({}, true, false, {a});
  CHECK(seen == std::vector<bool>{true, false, true, false});
}

TEST_CASE("tensor hooks replace gradients and can be removed") {
  Tensor a = leaf({1, 2}, {2});
  Tensor m = a * 3;
  HookHandle h = m.register_hook([](const Tensor& g) { return g * 10; });
  m.sum().backward({}, true);
  CHECK(vals(a.grad()) == std::vector<double>{30, 30});
  h.remove();
  h.remove();  // idempotent
  a.mutable_grad() = Tensor();
  m.sum().backward();
  CHECK(vals(a.grad()) == std::vector<double>{3, 3});
  // Leaf hooks run before accumulation.
  Tensor b = leaf({1}, {1});
  b.register_hook([](const Tensor& g) { return g * 0.5; });
  (b * 4).sum().backward();
  CHECK(vals(b.grad()) == std::vector<double>{2});
  CHECK_THROWS_WITH(ones({1}).register_hook([](const Tensor& g) { return g; }),
                    Catch::Contains("doesn't require gradient"));
}

TEST_CASE("retain_grad keeps a non-leaf's gradient") {
  Tensor a = leaf({1, 2}, {2});
  Tensor m = a * 2;
  m.retain_grad();
  Tensor n = a * 2;
  (m * m + n).sum().backward();
  CHECK(vals(m.grad()) == std::vector<double>{4, 8});
  CHECK_FALSE(n.grad().defined());
}

TEST_CASE("grad mode guards are thread-local and stop recording") {
  Tensor a = leaf({1}, {1});
  {
    NoGradGuard ng;
    CHECK_FALSE(is_grad_enabled());
    Tensor y = a * 2;
    CHECK_FALSE(y.requires_grad());
    bool other_thread = false;
    std::thread([&] { other_thread = is_grad_enabled(); }).join();
    CHECK(other_thread);
    {
      EnableGradGuard eg;
      CHECK((a * 2).requires_grad());
    }
  }
  CHECK(is_grad_enabled());
}

TEST_CASE("in-place ops on a leaf that requires grad are errors outside NoGradGuard") {
  Tensor a = leaf({1, 2}, {2});
  CHECK_THROWS_WITH(a.add_(1), Catch::Contains("a leaf tensor that requires grad is being used in an in-place operation"));
  CHECK(a.version() == 0);
  CHECK_THROWS_WITH(a.select(0, 0).mul_(2), Catch::Contains("view of a leaf tensor that requires grad"));
  {
    NoGradGuard ng;
    a.add_(1);
  }
  CHECK(vals(a) == std::vector<double>{2, 3});
}

TEST_CASE("in-place ops on non-leaves rebase history") {
  Tensor a = leaf({1, 2}, {2});
  Tensor m = a * 1;
  m.mul_(3);
  CHECK(m.grad_fn()->name() == "MulBackward");
  m.exp_();
  m.sum().backward();
  CHECK(vals(a.grad())[0] == Approx(3 * std::exp(3.0)));
}

TEST_CASE("an in-place op on a view updates the base's history") {
  Tensor a = leaf({1, 2, 3, 4}, {4});
  Tensor base = a * 1;
  Tensor v = base.slice(0, 1, 3);
  v.mul_(10);
  CHECK(base.grad_fn()->name() == "CopySlices");
  base.sum().backward();
  CHECK(vals(a.grad()) == std::vector<double>{1, 10, 10, 1});
  // A base that did not require grad gets history from the in-place op's other input.
  Tensor w = leaf({2}, {1});
  Tensor z = zeros({3}, dtype(kFloat64));
  z.select(0, 1).copy_(w.squeeze());
  CHECK(z.requires_grad());
  (z * tensor(std::vector<double>{1, 5, 7}, {3})).sum().backward();
  CHECK(vals(w.grad()) == std::vector<double>{5});
  // Other views of the base see the new history too.
  Tensor b2 = leaf({1, 1}, {2}) * 1;
  Tensor v1 = b2.select(0, 0), v2 = b2.select(0, 0);
  v1.mul_(4);
  CHECK(v2.grad_fn()->name() == "AsStridedBackward");
}

TEST_CASE("saved tensors are freed after backward without retain_graph") {
  Tensor a = leaf(std::vector<double>(1 << 16, 1.0), {1 << 16});
  int64_t before = memory_stats(kCPU).allocated_bytes;
  Tensor y;
  {
    Tensor h = a.exp();     // saved by ExpBackward (output) and by the mul below
    y = (h * h).sum();
  }
  int64_t held = memory_stats(kCPU).allocated_bytes - before;
  CHECK(held >= (1 << 16) * 8);
  y.backward();
  int64_t after = memory_stats(kCPU).allocated_bytes - before;
  // Only a.grad remains (one buffer of the input's size).
  CHECK(after <= (1 << 16) * 8 + 1024);
}

TEST_CASE("printing shows requires_grad and grad_fn") {
  std::ostringstream os;
  Tensor a = tensor({1, 2}).requires_grad_();
  os << a << '\n' << a * 2;
  CHECK(os.str() == "tensor([1., 2.], requires_grad=True)\ntensor([2., 4.], grad_fn=<MulBackward>)");
}

TEST_CASE("requires_grad_ only on floating leaves") {
  CHECK_THROWS_WITH(arange(3).requires_grad_(), Catch::Contains("only Tensors of floating point dtype can require gradients"));
  Tensor a = leaf({1}, {1});
  Tensor m = a * 2;
  CHECK_THROWS_WITH(m.requires_grad_(false), Catch::Contains("only change requires_grad flags of leaf variables"));
  CHECK(zeros({2}, TensorOptions{}.requires_grad()).requires_grad());
}

TEST_CASE("four threads run backward 100 times each on their own graphs") {
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        Tensor x = tensor(std::vector<double>{1.0 + t, 2.0 + i}, {2}, dtype(kFloat64)).requires_grad_();
        Tensor y = (x * x * x).sum();
        y.backward();
        auto g = x.grad().to_vector<double>();
        if (g[0] != 3 * (1.0 + t) * (1.0 + t) || g[1] != 3 * (2.0 + i) * (2.0 + i)) failures++;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
}

TEST_CASE("destroying a hook handle does not remove the hook") {
  Tensor a = leaf({1, 2}, {2});
  int calls = 0;
  {
    HookHandle h = a.register_hook([&](const Tensor&) {
      ++calls;
      return Tensor();
    });
  }  // h is gone; the hook stays, as with torch's RemovableHandle
  (a * 2).sum().backward();
  CHECK(calls == 1);
}

TEST_CASE("a weight's gradient is added straight into an existing .grad, without a weight-sized temporary") {
  const int64_t n = 512;  // weight 512 x 512 float32 = 1 MiB
  Tensor w = (randn({n, n}) * 0.05).requires_grad_();
  Tensor b = zeros({n}).requires_grad_();
  Tensor x = randn({4, n});
  auto step = [&] { linear(x, w, b).tanh().sum().backward(); };
  auto expected_grad = [&] {  // g^T x computed by hand, g = 1 - tanh^2
    NoGradGuard ng;
    Tensor y = linear(x, w.detach(), b.detach()).tanh();
    return (1 - y * y).t().mm(x);
  };
  step();  // first backward: .grad is created (the product's buffer is stolen)
  Tensor g1 = w.grad().clone();
  check_close(g1, expected_grad(), {.rtol = 1e-5, .atol = 1e-6});

  int64_t base = memory_stats(kCPU).allocated_bytes;
  reset_peak_memory_stats(kCPU);
  Tensor grad_before = w.grad();
  step();  // second: accumulated in place, no [512, 512] temporary
  int64_t peak = memory_stats(kCPU).peak_allocated_bytes - base;
  INFO("peak above the step's start " << peak << " bytes");
  CHECK(peak < n * n * 4);
  CHECK(w.grad().is_same(grad_before));
  check_close(w.grad(), g1 * 2, {.rtol = 1e-5, .atol = 1e-6});

  SECTION("a hook on the weight sees its gradient as a tensor of its own") {
    int calls = 0;
    w.register_hook([&](const Tensor& g) {
      ++calls;
      check_close(g, g1, {.rtol = 1e-5, .atol = 1e-6});
      return Tensor();
    });
    step();
    CHECK(calls == 1);
    check_close(w.grad(), g1 * 3, {.rtol = 1e-5, .atol = 1e-6});
  }
  SECTION("grad() captures instead of accumulating") {
    Tensor before = w.grad().clone();
    auto gs = grad({linear(x, w, b).tanh().sum()}, {w});
    check_close(gs[0], g1, {.rtol = 1e-5, .atol = 1e-6});
    CHECK(w.grad().to_vector<float>() == before.to_vector<float>());
  }
  SECTION("backward(inputs=) that skips the weight leaves its .grad alone") {
    Tensor before = w.grad().clone();
    backward({linear(x, w, b).tanh().sum()}, {}, std::nullopt, false, {b});
    CHECK(w.grad().to_vector<float>() == before.to_vector<float>());
  }
  SECTION("create_graph keeps the usual out-of-place accumulation with history") {
    linear(x, w, b).tanh().sum().backward({}, std::nullopt, true);
    CHECK(w.grad().requires_grad());
    check_close(w.grad().detach(), g1 * 3, {.rtol = 1e-5, .atol = 1e-6});
    // A grad with history refers back to the leaf through its AccumulateGrad (the cycle PyTorch
    // warns about for create_graph=True); drop it so the test does not leak.
    w.mutable_grad() = Tensor();
    b.mutable_grad() = Tensor();
  }
}

TEST_CASE("queue_callback runs once the graph task has run its last node", "[engine]") {
  Tensor a = ones({2}, requires_grad());
  std::vector<std::string> events;
  int64_t task = -2, cb_task = -3;
  a.register_hook([&](const Tensor& g) {
    task = autograd::current_graph_task_id();
    autograd::queue_callback([&] {
      cb_task = autograd::current_graph_task_id();
      events.push_back(a.grad().defined() ? "first: grad in place" : "first: no grad");
      autograd::queue_callback([&] { events.push_back("queued by a callback"); });
    });
    events.push_back("hook");
    return Tensor();
  });
  (a * 2).sum().backward();
  CHECK(events == std::vector<std::string>{"hook", "first: grad in place", "queued by a callback"});
  CHECK(cb_task == task);
  CHECK_THROWS_WITH(autograd::queue_callback([] {}), Catch::Contains("only be installed during the backward pass"));
  // A task that throws runs none of its callbacks.
  bool ran = false;
  Tensor b = ones({2}, requires_grad());
  b.register_hook([&](const Tensor&) -> Tensor {
    autograd::queue_callback([&] { ran = true; });
    throw Error("boom");
  });
  CHECK_THROWS_WITH((b * 2).sum().backward(), Catch::Contains("boom"));
  CHECK_FALSE(ran);
}

TEST_CASE("a leaf's gradient has the leaf's strides where the leaf is dense, as PyTorch's layout contract") {
  // Channels-last and transposed leaves get gradients in their own layout, whatever layout the
  // backward wrote; a leaf that is not dense gets a contiguous one. Values are unchanged.
  manual_seed(2);
  Tensor cl = randn({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast).requires_grad_();
  Tensor tr = randn({5, 4}).t().requires_grad_();  // dense, transposed
  Tensor gapped = randn({4, 10}).narrow(1, 0, 5).detach().requires_grad_();  // not dense
  // Gradients written contiguous by a contiguous upstream: x * c for a contiguous c.
  Tensor c4 = randn({2, 3, 4, 5}), c2 = randn({4, 5}), c3 = randn({4, 5});
  (graft::mul(cl, c4).sum() + graft::mul(tr, c2).sum() + graft::mul(gapped, c3).sum()).backward();
  CHECK(cl.grad().strides() == cl.strides());
  CHECK(tr.grad().strides() == tr.strides());
  CHECK(gapped.grad().is_contiguous());
  CHECK(cl.grad().contiguous().to_vector<float>() == c4.to_vector<float>());
  CHECK(tr.grad().contiguous().to_vector<float>() == c2.to_vector<float>());
  CHECK(gapped.grad().contiguous().to_vector<float>() == c3.to_vector<float>());
  // Accumulation keeps the layout.
  graft::mul(cl, c4).sum().backward();
  CHECK(cl.grad().strides() == cl.strides());
  CHECK(cl.grad().contiguous().to_vector<float>() == (c4 * 2.0).to_vector<float>());
}
