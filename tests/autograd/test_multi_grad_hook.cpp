// register_multi_grad_hook (API.md "graph features"): All and Any modes, per-graph-task state,
// concurrency, nested backwards and removal.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <thread>
#include <vector>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {

Tensor leaf(std::vector<double> v) { return tensor(v, {static_cast<int64_t>(v.size())}, dtype(kFloat64)).requires_grad_(); }

std::vector<bool> defined_mask(const std::vector<Tensor>& grads) {
  std::vector<bool> out;
  for (const auto& g : grads) out.push_back(g.defined());
  return out;
}

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

// Returns an undefined gradient for its input, so the nodes behind it receive none.
struct DropGrad : Function<DropGrad> {
  static Tensor forward(FunctionCtx*, const Tensor& x) { return x * 1; }
  static std::vector<Tensor> backward(FunctionCtx*, std::vector<Tensor>) { return {Tensor()}; }
};

}  // namespace

TEST_CASE("All mode: the API.md scenario c = a*b; d = a*b") {
  Tensor a = leaf({1, 2, 3}), b = leaf({4, 5, 6});
  Tensor c = a * b;
  Tensor d = a * b;
  std::vector<std::vector<bool>> calls;
  std::vector<std::vector<Tensor>> grads;
  std::vector<int64_t> task_ids;
  register_multi_grad_hook({a, b, c, d}, [&](const std::vector<Tensor>& g) {
    calls.push_back(defined_mask(g));
    grads.push_back(g);
    task_ids.push_back(current_graph_task_id());
  });

  c.sum().backward({}, /*retain_graph=*/true);
  REQUIRE(calls.size() == 1);
  CHECK(calls[0] == std::vector<bool>{true, true, true, false});
  CHECK(vals(grads[0][0]) == vals(b));
  CHECK(vals(grads[0][1]) == vals(a));
  CHECK(vals(grads[0][2]) == std::vector<double>{1, 1, 1});
  CHECK(task_ids[0] != -1);  // runs inside the backward

  c.sum().backward({}, /*retain_graph=*/true, false, /*inputs=*/{a});
  REQUIRE(calls.size() == 2);
  CHECK(calls[1] == std::vector<bool>{true, false, true, false});
  CHECK(task_ids[1] != task_ids[0]);

  // Both outputs: every tensor gets a gradient.
  backward({c.sum(), d.sum()}, {}, true);
  REQUIRE(calls.size() == 3);
  CHECK(calls[2] == std::vector<bool>{true, true, true, true});
  CHECK(vals(grads[2][0]) == std::vector<double>{8, 10, 12});

  // grad() counts too, and only what it computes.
  auto g = grad({d.sum()}, {b}, {}, true);
  REQUIRE(calls.size() == 4);
  CHECK(calls[3] == std::vector<bool>{false, true, false, true});
  CHECK(vals(g[0]) == vals(a));
}

TEST_CASE("All mode fires exactly once per backward, after the last gradient") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  Tensor c = (a * b).exp();
  int fired = 0;
  std::vector<Tensor> seen;
  register_multi_grad_hook({a, b, c}, [&](const std::vector<Tensor>& g) {
    ++fired;
    seen = g;
  });
  Tensor loss = c.sum() + (a * 3).sum();  // a receives two contributions
  for (int i = 1; i <= 3; ++i) {
    loss.backward({}, true);
    CHECK(fired == i);
  }
  REQUIRE(seen.size() == 3);
  // The grad passed for a is its full gradient, not one of its two contributions.
  auto ea = vals((a * b).exp());
  CHECK(vals(seen[0])[0] == Approx(ea[0] * 3 + 3));
}

TEST_CASE("Any mode gets the first gradient, once per backward") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  Tensor c = a * b;
  std::vector<std::vector<Tensor>> calls;
  register_multi_grad_hook({a, b, c}, [&](const std::vector<Tensor>& g) { calls.push_back(g); },
                           MultiGradMode::Any);
  c.sum().backward({}, true);
  REQUIRE(calls.size() == 1);
  REQUIRE(calls[0].size() == 1);
  CHECK(vals(calls[0][0]) == std::vector<double>{1, 1});  // c's gradient comes first
  c.sum().backward({}, true, false, {b});
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].size() == 1);
  // A backward that reaches only a: still fires once, with a's gradient.
  (a * 5).sum().backward();
  REQUIRE(calls.size() == 3);
  CHECK(vals(calls[2][0]) == std::vector<double>{5, 5});
}

TEST_CASE("All mode rejects tensors that do not require grad; Any mode ignores them") {
  Tensor a = leaf({1, 2});
  Tensor plain = tensor({1.0, 2.0}, dtype(kFloat64));
  int fired = 0;
  CHECK_THROWS_WITH(register_multi_grad_hook({a, plain}, [&](const std::vector<Tensor>&) { ++fired; }),
                    Catch::Contains("does not require grad"));
  register_multi_grad_hook({plain, a}, [&](const std::vector<Tensor>& g) {
    ++fired;
    CHECK(g.size() == 1);
  }, MultiGradMode::Any);
  (a * plain).sum().backward();
  CHECK(fired == 1);
}

TEST_CASE("HookHandle::remove removes every per-tensor hook") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  Tensor c = a * b;
  int all = 0, any = 0;
  HookHandle h_all = register_multi_grad_hook({a, b, c}, [&](const std::vector<Tensor>&) { ++all; });
  HookHandle h_any = register_multi_grad_hook({a, b, c}, [&](const std::vector<Tensor>&) { ++any; },
                                              MultiGradMode::Any);
  c.sum().backward({}, true);
  CHECK(all == 1);
  CHECK(any == 1);
  h_all.remove();
  h_all.remove();  // idempotent
  c.sum().backward({}, true);
  CHECK(all == 1);
  CHECK(any == 2);
  h_any.remove();
  // Gradients only through a or b, or through c: nothing fires any more.
  c.sum().backward({}, true);
  (a * 2).sum().backward();
  CHECK(any == 2);
  CHECK(all == 1);
  // Destroying a handle without remove() keeps the hook.
  int kept = 0;
  { HookHandle h = register_multi_grad_hook({a}, [&](const std::vector<Tensor>&) { ++kept; }); }
  (a * 2).sum().backward();
  CHECK(kept == 1);
}

TEST_CASE("8 threads x 100 backwards on their own graphs: each hook fires once per backward") {
  constexpr int kThreads = 8, kIters = 100;
  std::atomic<int> failures{0}, fires{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        Tensor a = leaf({1.0 + t, 2.0}), b = leaf({3.0, 4.0 + i});
        Tensor c = a * b;
        Tensor d = (a + b).exp();
        int local = 0;
        register_multi_grad_hook({a, b, c, d}, [&](const std::vector<Tensor>& g) {
          ++local;
          ++fires;
          if (defined_mask(g) != std::vector<bool>{true, true, true, true}) failures++;
          double want = 3.0 + std::exp(4.0 + t);
          if (std::abs(g[0].to_vector<double>()[0] - want) > 1e-12 * want) failures++;
        });
        (c.sum() + d.sum()).backward();
        if (local != 1) failures++;
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(fires == kThreads * kIters);
}

TEST_CASE("concurrent backwards through one shared retained graph each fire the hook once") {
  constexpr int kThreads = 8, kIters = 100;
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  Tensor c = a * b;
  Tensor d = c.exp();
  std::mutex mu;
  std::vector<int64_t> fired_tasks;
  std::atomic<int> bad_grads{0};
  register_multi_grad_hook({a, b, c, d}, [&](const std::vector<Tensor>& g) {
    if (defined_mask(g) != std::vector<bool>{true, true, true, true}) bad_grads++;
    std::lock_guard<std::mutex> lock(mu);
    fired_tasks.push_back(current_graph_task_id());
  });
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        if ((t + i) % 2 == 0) {
          d.sum().backward({}, /*retain_graph=*/true);  // accumulates into a.grad / b.grad
        } else {
          auto g = grad({d.sum()}, {a, b}, {}, /*retain_graph=*/true);
          auto ed = vals(d);
          if (vals(g[0])[1] != ed[1] * 4) failures++;
        }
      }
    });
  for (auto& th : threads) th.join();
  CHECK(failures == 0);
  CHECK(bad_grads == 0);
  REQUIRE(fired_tasks.size() == static_cast<size_t>(kThreads * kIters));
  std::sort(fired_tasks.begin(), fired_tasks.end());
  CHECK(std::adjacent_find(fired_tasks.begin(), fired_tasks.end()) == fired_tasks.end());  // once per task
  auto ed = vals(d);
  CHECK(vals(a.grad())[0] == Approx(ed[0] * 3 * kThreads * kIters / 2));
}

TEST_CASE("a backward nested in another backward's hook: the multi-grad hook fires for both tasks") {
  Tensor a = leaf({1, 2}), b = leaf({3, 4});
  Tensor h = a * b;
  struct Call {
    int64_t task;
    std::vector<bool> mask;
    std::vector<Tensor> grads;
  };
  std::vector<Call> calls;
  auto record = [&](const std::vector<Tensor>& g) { calls.push_back({current_graph_task_id(), defined_mask(g), g}); };
  int64_t outer_id = -1, inner_id = -1;
  HookHandle multi;

  SECTION("registered before the outer backward, tracking a tensor of the outer graph") {
    // Registered first, so its hook on h runs before the nested backward starts: the outer task
    // has a partial count when the inner task runs.
    multi = register_multi_grad_hook({h, a, b}, record);
    h.register_hook([&](const Tensor&) {
      outer_id = current_graph_task_id();
      EnableGradGuard eg;  // hooks run with grad mode off, as in PyTorch
      Tensor inner = (a * b).sum();
      grad({inner}, {a, b});  // nested: a and b get gradients in a second task
      return Tensor();
    });
    (h * 3).sum().backward();
    REQUIRE(calls.size() == 2);
    // Inner task first: h is not part of it, so it is not waited for.
    CHECK(calls[0].task != outer_id);
    CHECK(calls[0].mask == std::vector<bool>{false, true, true});
    CHECK(vals(calls[0].grads[1]) == vals(b));
    CHECK(calls[1].task == outer_id);
    CHECK(calls[1].mask == std::vector<bool>{true, true, true});
    CHECK(vals(calls[1].grads[1]) == std::vector<double>{9, 12});
  }
  SECTION("registered from inside the outer backward's hook") {
    h.register_hook([&](const Tensor&) {
      outer_id = current_graph_task_id();
      multi = register_multi_grad_hook({a, b}, record);
      EnableGradGuard eg;
      Tensor inner = (a * b * 2).sum();
      inner.backward();
      return Tensor();
    });
    (h * 3).sum().backward();
    REQUIRE(calls.size() == 2);
    inner_id = calls[0].task;
    CHECK(inner_id != outer_id);
    CHECK(inner_id != -1);
    CHECK(calls[0].mask == std::vector<bool>{true, true});
    CHECK(vals(calls[0].grads[0]) == std::vector<double>{6, 8});
    CHECK(calls[1].task == outer_id);
    CHECK(vals(calls[1].grads[0]) == std::vector<double>{9, 12});
    CHECK(vals(a.grad()) == std::vector<double>{6 + 9, 8 + 12});
  }
  multi.remove();
}

TEST_CASE("per-task state is dropped when some gradients never arrive") {
  const int64_t n = 1 << 14;
  Tensor a = (arange(static_cast<double>(n), dtype(kFloat64)) / n).requires_grad_();
  Tensor b = (ones({n}, dtype(kFloat64))).requires_grad_();
  int fired = 0;
  std::vector<Tensor> last;
  auto fn = [&](const std::vector<Tensor>& g) {
    ++fired;
    last = g;
  };

  SECTION("backward with inputs= : the tensors it does not reach are not waited for") {
    Tensor c = a * b;
    register_multi_grad_hook({a, b, c}, fn);
    c.sum().backward({}, true, false, {a});
    CHECK(fired == 1);
    CHECK(defined_mask(last) == std::vector<bool>{true, false, true});
    c.sum().backward({}, true);
    CHECK(fired == 2);
    CHECK(defined_mask(last) == std::vector<bool>{true, true, true});
  }
  SECTION("a backward that throws midway frees the state and the next backward fires") {
    Tensor c = a * 2;
    Tensor d = b.exp();
    bool fail = true;
    // Registered before the multi-grad hook, so it runs first on c: the multi-grad hook never
    // sees c's gradient in the failing task, after d's gradient (a big tensor) was buffered.
    c.register_hook([&](const Tensor&) -> Tensor {
      if (fail) throw Error("injected failure");
      return Tensor();
    });
    register_multi_grad_hook({c, d}, fn);
    Tensor loss = c.sum() + d.sum();
    last.clear();
    int64_t before = memory_stats(kCPU).allocated_bytes;
    CHECK_THROWS_WITH(loss.backward({}, true), Catch::Contains("injected failure"));
    CHECK(fired == 0);
    b.mutable_grad() = Tensor();
    // Nothing of the failed task is kept (d's buffered gradient included).
    CHECK(memory_stats(kCPU).allocated_bytes <= before);
    fail = false;
    loss.backward({}, true);
    CHECK(fired == 1);
    CHECK(defined_mask(last) == std::vector<bool>{true, true});
  }
  SECTION("a tracked node that runs without receiving a gradient") {
    // DropGrad returns no gradient, so c's node runs with an undefined gradient; c's tensor hook
    // sees it undefined (as libtorch's hooks do) and the multi-grad hook fires once, c's entry
    // undefined.
    Tensor c = a * 2;
    Tensor e = DropGrad::apply(c);
    register_multi_grad_hook({c, b}, fn);
    Tensor loss = e.sum() + (b * 2).sum();
    loss.backward({}, true);
    CHECK(fired == 1);
    CHECK(defined_mask(last) == std::vector<bool>{false, true});
    int after_first = fired;
    // The state of that task died with it; a backward where both arrive fires normally.
    (c.sum() + (b * 2).sum()).backward();
    CHECK(fired == after_first + 1);
    CHECK(defined_mask(last) == std::vector<bool>{true, true});
  }
}

TEST_CASE("All mode on the outputs of one node where one output gets no gradient fires once, that entry undefined") {
  Tensor x = leaf({1, 2, 3, 4});
  auto parts = graft::split(x, 2, 0);
  REQUIRE(parts.size() == 2);
  int fired = 0;
  std::vector<Tensor> last;
  register_multi_grad_hook({parts[0], parts[1]}, [&](const std::vector<Tensor>& g) {
    ++fired;
    last = g;
  });
  (parts[0] * 3).sum().backward();
  CHECK(fired == 1);
  REQUIRE(defined_mask(last) == std::vector<bool>{true, false});
  CHECK(vals(last[0]) == std::vector<double>{3, 3});
  CHECK(vals(x.grad()) == std::vector<double>{3, 3, 0, 0});
}

TEST_CASE("tensor hooks see an undefined gradient for an output that got none, and may replace it") {
  Tensor x = leaf({1, 2, 3, 4});
  auto parts = graft::split(x, 2, 0);
  std::vector<bool> seen;
  parts[1].register_hook([&](const Tensor& g) {
    seen.push_back(g.defined());
    return Tensor();
  });
  parts[0].sum().backward({}, true);
  CHECK(seen == std::vector<bool>{false});
  CHECK(vals(x.grad()) == std::vector<double>{1, 1, 0, 0});
  // A hook may supply the missing gradient.
  parts[1].register_hook([](const Tensor& g) { return g.defined() ? g : ops::full({2}, 5.0, kFloat64); });
  x.mutable_grad() = Tensor();
  parts[0].sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{1, 1, 5, 5});
}
