// Saved-tensor hooks (API.md "graph features"): SavedTensorsHooks, SaveOnCpu,
// DisableSavedTensorsHooks and the autograd thread-local state.
#include <catch2/catch.hpp>

#include <algorithm>
#include <any>
#include <optional>
#include <cmath>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "graft.h"
#include "ops/kernel_utils.h"
#include "support/fake_device.h"

using namespace graft;
using namespace graft::autograd;

namespace {

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

int64_t cpu_allocated() { return memory_stats(kCPU).allocated_bytes; }

// Pack/unpack pair that returns the tensor itself and records what it saw.
struct Recorder {
  std::vector<std::string> log;
  std::vector<Tensor> packed;
  int unpacks = 0;
  PackHook pack(std::string tag = "") {
    return [this, tag](const Tensor& t) -> Packed {
      log.push_back(tag + "pack");
      packed.push_back(t);
      return t;
    };
  }
  UnpackHook unpack(std::string tag = "") {
    return [this, tag](const Packed& p) -> Tensor {
      log.push_back(tag + "unpack");
      ++unpacks;
      return std::any_cast<Tensor>(p);
    };
  }
};

struct MyExp : Function<MyExp> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    Tensor y = x.exp();
    ctx->save_for_backward({y, x});
    return y;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    auto saved = ctx->saved_tensors();
    return {g[0] * saved[0]};
  }
};

}  // namespace

TEST_CASE("the reference's printing example: y = a * b packs a and b, backward unpacks them") {
  std::vector<std::string> out;
  auto pack = [&](const Tensor& x) -> Packed {
    out.push_back("Packing " + str(x));
    return x;
  };
  auto unpack = [&](const Packed& p) -> Tensor {
    const Tensor& x = std::any_cast<const Tensor&>(p);
    out.push_back("Unpacking " + str(x));
    return x;
  };
  Tensor a = ones({5}, requires_grad());
  Tensor b = ones({5}, requires_grad()) * 2;
  Tensor y;
  {
    SavedTensorsHooks hooks(pack, unpack);
    y = a * b;
  }
  REQUIRE(out == std::vector<std::string>{"Packing tensor([1., 1., 1., 1., 1.], requires_grad=True)",
                                          "Packing tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward>)"});
  out.clear();
  y.sum().backward();  // the hooks' scope has ended: the pair captured at save time still unpacks
  // PyTorch's MulBackward0 unpacks self then other; graft's rule reads `other` first. The set is
  // what the contract fixes.
  std::vector<std::string> sorted = out;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<std::string>{"Unpacking tensor([1., 1., 1., 1., 1.], requires_grad=True)",
                                           "Unpacking tensor([2., 2., 2., 2., 2.], grad_fn=<MulBackward>)"});
  CHECK(a.grad().to_vector<float>() == std::vector<float>(5, 2.f));
}

TEST_CASE("the pack hook receives the saved tensor itself, outputs as a history-free alias") {
  Recorder r;
  Tensor a = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Tensor h = a * 3;
  Tensor y, e;
  {
    SavedTensorsHooks hooks(r.pack(), r.unpack());
    y = h.sin();  // saves its input h
    e = a.exp();  // saves its output e
  }
  REQUIRE(r.packed.size() == 2);
  CHECK(r.packed[0].is_same(h));
  CHECK(r.packed[0].grad_fn() == h.grad_fn());
  // An output is handed over without its history (no tensor -> grad_fn -> node cycle).
  CHECK_FALSE(r.packed[1].is_same(e));
  CHECK(r.packed[1].data_ptr() == e.data_ptr());
  CHECK(r.packed[1].grad_fn() == nullptr);
  CHECK_FALSE(r.packed[1].requires_grad());
  CHECK(e.grad_fn() != nullptr);
}

TEST_CASE("each unary op packs exactly the tensor its derivative reads: x, y, or nothing") {
  // What each declaration's formula reads (codegen/ops/unary.yaml) is visible through the hooks: an
  // op that saves its input packs x itself, one that saves its output packs an alias of y.
  Tensor a = tensor({0.5, 0.75, 1.5}, dtype(kFloat64)).requires_grad_();
  Tensor x = a * 1.0;  // a non-leaf with history, so "is x" is checkable
  auto check_packs = [&](const char* name, const std::function<Tensor(const Tensor&)>& op, char saves) {
    INFO(name);
    Recorder r;
    Tensor y;
    {
      SavedTensorsHooks hooks(r.pack(), r.unpack());
      y = op(x);
    }
    if (saves == '-') {
      CHECK(r.packed.empty());
    } else {
      REQUIRE(r.packed.size() == 1);
      if (saves == 'x') CHECK(r.packed[0].is_same(x));
      else CHECK(r.packed[0].data_ptr() == y.data_ptr());
    }
    y.sum().backward(Tensor(), /*retain_graph=*/true);  // unpacks through the same hooks
    CHECK(r.unpacks == static_cast<int>(r.packed.size()));
  };
  // What PyTorch saves for each: the output where the derivative is a function of it.
  check_packs("exp", [](const Tensor& t) { return graft::exp(t); }, 'y');
  check_packs("log", [](const Tensor& t) { return graft::log(t); }, 'x');
  check_packs("sin", [](const Tensor& t) { return graft::sin(t); }, 'x');
  check_packs("cos", [](const Tensor& t) { return graft::cos(t); }, 'x');
  check_packs("tanh", [](const Tensor& t) { return graft::tanh(t); }, 'y');
  check_packs("sigmoid", [](const Tensor& t) { return graft::sigmoid(t); }, 'y');
  check_packs("sqrt", [](const Tensor& t) { return graft::sqrt(t); }, 'y');
  check_packs("rsqrt", [](const Tensor& t) { return graft::rsqrt(t); }, 'y');
  check_packs("log1p", [](const Tensor& t) { return graft::log1p(t); }, 'x');
  check_packs("expm1", [](const Tensor& t) { return graft::expm1(t); }, 'y');
  check_packs("erf", [](const Tensor& t) { return graft::erf(t); }, 'x');
  check_packs("reciprocal", [](const Tensor& t) { return graft::reciprocal(t); }, 'y');
  check_packs("silu", [](const Tensor& t) { return graft::silu(t); }, 'x');
  check_packs("relu", [](const Tensor& t) { return graft::relu(t); }, 'y');
  check_packs("abs", [](const Tensor& t) { return graft::abs(t); }, 'x');
  // neg's and sign's derivatives read nothing, so they keep nothing (as PyTorch).
  check_packs("neg", [](const Tensor& t) { return graft::neg(t); }, '-');
  check_packs("sign", [](const Tensor& t) { return graft::sign(t); }, '-');
}

TEST_CASE("the innermost hooks pack, and unpack uses the pair from save time") {
  Recorder r;
  Tensor a = tensor({0.5, 1.5}, dtype(kFloat64)).requires_grad_();
  Tensor y;
  {
    SavedTensorsHooks outer(r.pack("outer "), r.unpack("outer "));
    Tensor s;
    {
      SavedTensorsHooks inner(r.pack("inner "), r.unpack("inner "));
      s = a.sin();  // saves a: inner only
    }
    y = s.cos().sum();  // saves s: outer
  }
  CHECK(r.log == std::vector<std::string>{"inner pack", "outer pack"});
  r.log.clear();
  {
    // Hooks alive at backward time do not matter for tensors saved earlier.
    SavedTensorsHooks late(r.pack("late "), r.unpack("late "));
    y.backward();
  }
  CHECK(r.log == std::vector<std::string>{"outer unpack", "inner unpack"});
  CHECK(a.grad().to_vector<double>()[1] == Approx(-std::sin(std::sin(1.5)) * std::cos(1.5)));
  // After every scope ended, nothing is packed any more.
  r.log.clear();
  Tensor z = a.sin();
  CHECK(r.log.empty());
}

TEST_CASE("pack hooks run with grad mode disabled, and grad mode is restored") {
  bool grad_in_pack = true;
  bool result_has_history = true;
  auto pack = [&](const Tensor& t) -> Packed {
    grad_in_pack = is_grad_enabled();
    Tensor doubled = t * 2;  // not recorded
    result_has_history = doubled.requires_grad() || doubled.grad_fn() != nullptr;
    return doubled;
  };
  auto unpack = [](const Packed& p) -> Tensor { return std::any_cast<Tensor>(p) / 2; };
  Tensor a = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Tensor y;
  {
    SavedTensorsHooks hooks(pack, unpack);
    y = a.sin().sum();
  }
  CHECK_FALSE(grad_in_pack);
  CHECK_FALSE(result_has_history);
  CHECK(is_grad_enabled());
  y.backward();
  CHECK(a.grad().to_vector<double>()[0] == Approx(std::cos(1.0)));
}

TEST_CASE("a pack hook that writes its input in place throws") {
  Tensor a = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Tensor x = a * 1;
  SavedTensorsHooks hooks(
      [](const Tensor& t) -> Packed {
        Tensor w = t;
        w.mul_(2);
        return w;
      },
      [](const Packed& p) -> Tensor { return std::any_cast<Tensor>(p); });
  CHECK_THROWS_AS(x.sin(), Error);
  CHECK_THROWS_WITH(x.sin(), Catch::Contains("pack hook must not modify its input in place"));
}

TEST_CASE("an unpack hook returning another shape, dtype or device makes backward throw") {
  const char* msg = "the unpack hook must return a tensor with the same shape, dtype and device";
  Tensor a = tensor({1.0, 2.0, 3.0, 4.0}, dtype(kFloat64)).requires_grad_();
  auto run = [&](UnpackHook unpack) {
    Tensor y;
    {
      SavedTensorsHooks hooks([](const Tensor& t) -> Packed { return t; }, std::move(unpack));
      y = a.sin().sum();
    }
    y.backward();
  };
  SECTION("shape") {
    CHECK_THROWS_WITH(run([](const Packed& p) { return std::any_cast<Tensor>(p).reshape({2, 2}); }),
                      Catch::Contains(msg) && Catch::Contains("[2, 2]"));
  }
  SECTION("dtype") {
    CHECK_THROWS_WITH(run([](const Packed& p) { return std::any_cast<Tensor>(p).to(kFloat32); }),
                      Catch::Contains(msg) && Catch::Contains("float32"));
  }
  SECTION("device") {
    testing::FakeCudaGuard fake;
    CHECK_THROWS_WITH(run([](const Packed&) { return kernels::new_tensor({4}, kFloat64, Device("cuda:0")); }),
                      Catch::Contains(msg) && Catch::Contains("cuda:0"));
  }
  SECTION("undefined") {
    CHECK_THROWS_WITH(run([](const Packed&) { return Tensor(); }), Catch::Contains("undefined"));
  }
}

TEST_CASE("with hooks the version check is the hooks' business") {
  Tensor a = tensor({0.5, 1.0}, dtype(kFloat64)).requires_grad_();
  SECTION("without hooks an in-place write to a saved tensor is an error") {
    Tensor x = a * 1;
    Tensor y = x.sin().sum();
    x.mul_(2);
    CHECK_THROWS_WITH(y.backward(), Catch::Contains("modified by an inplace operation"));
  }
  SECTION("identity hooks see the written value and do not throw") {
    Tensor x = a * 1;
    Tensor y;
    {
      SavedTensorsHooks hooks([](const Tensor& t) -> Packed { return t; },
                              [](const Packed& p) { return std::any_cast<Tensor>(p); });
      y = x.sin().sum();
    }
    x.mul_(2);
    y.backward();
    CHECK(a.grad().to_vector<double>()[1] == Approx(std::cos(2.0)));
  }
}

TEST_CASE("saved tensors read after the graph freed them throw, and packed values are released") {
  Recorder r;
  std::weak_ptr<int> alive;
  auto pack = [&](const Tensor& t) -> Packed {
    auto token = std::make_shared<int>(0);
    alive = token;
    return std::make_pair(token, t);
  };
  auto unpack = [&](const Packed& p) -> Tensor {
    ++r.unpacks;
    return std::any_cast<const std::pair<std::shared_ptr<int>, Tensor>&>(p).second;
  };
  Tensor a = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Tensor y;
  {
    SavedTensorsHooks hooks(pack, unpack);
    y = a.sin().sum();
  }
  y.backward({}, /*retain_graph=*/true);
  CHECK(r.unpacks == 1);
  CHECK_FALSE(alive.expired());
  y.backward();
  CHECK(r.unpacks == 2);
  CHECK(alive.expired());  // the graph dropped what the pack hook returned
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("Trying to backward through the graph a second time"));
  CHECK(r.unpacks == 2);  // the unpack hook is not called for a freed saved tensor
}

TEST_CASE("DisableSavedTensorsHooks makes hook scopes throw its exact message") {
  const std::string msg = "saved tensors default hooks are disabled";
  Recorder r;
  {
    DisableSavedTensorsHooks off(msg);
    CHECK_THROWS_AS(SavedTensorsHooks(r.pack(), r.unpack()), Error);
    CHECK_THROWS_WITH(SavedTensorsHooks(r.pack(), r.unpack()), msg);
    CHECK_THROWS_WITH(SaveOnCpu(), msg);
    CHECK_THROWS_WITH(SaveOnCpu(true), msg);
    // Autograd itself still works, without hooks.
    Tensor a = tensor({1.0}, dtype(kFloat64)).requires_grad_();
    a.sin().sum().backward();
    CHECK(a.grad().item<double>() == Approx(std::cos(1.0)));
  }
  // Enabled again after the scope.
  SavedTensorsHooks ok(r.pack(), r.unpack());
  Tensor b = tensor({1.0}, dtype(kFloat64)).requires_grad_();
  Tensor y = b.sin();
  CHECK(r.packed.size() == 1);
}

TEST_CASE("DisableSavedTensorsHooks cannot start while hooks are active") {
  Recorder r;
  {
    SavedTensorsHooks hooks(r.pack(), r.unpack());
    CHECK_THROWS_AS(DisableSavedTensorsHooks("x"), Error);
  }
  {
    SaveOnCpu cpu;
    CHECK_THROWS_AS(DisableSavedTensorsHooks("x"), Error);
  }
  // The failed attempts left nothing disabled.
  SavedTensorsHooks fine(r.pack(), r.unpack());
}

TEST_CASE("nested DisableSavedTensorsHooks keep the innermost message and restore the outer one") {
  Recorder r;
  {
    DisableSavedTensorsHooks outer("outer message");
    CHECK_THROWS_WITH(SavedTensorsHooks(r.pack(), r.unpack()), "outer message");
    {
      DisableSavedTensorsHooks inner("inner message");
      CHECK_THROWS_WITH(SavedTensorsHooks(r.pack(), r.unpack()), "inner message");
      CHECK_THROWS_WITH(SaveOnCpu(), "inner message");
    }
    CHECK_THROWS_WITH(SavedTensorsHooks(r.pack(), r.unpack()), "outer message");
  }
  CHECK_NOTHROW(SavedTensorsHooks(r.pack(), r.unpack()));
}

namespace {
// The reference's save_on_cpu example: prod_1 and c are saved under SaveOnCpu, the rest normally.
Tensor reference_f(const Tensor& a, const Tensor& b, const Tensor& c, bool use_hooks) {
  Tensor prod_1 = a * b;
  Tensor prod_2;
  if (use_hooks) {
    SaveOnCpu cpu;
    prod_2 = prod_1 * c;
  } else {
    prod_2 = prod_1 * c;
  }
  return prod_2 * a;
}
}  // namespace

TEST_CASE("SaveOnCpu on CPU tensors: the reference's nesting example, no copy, identical results") {
  const int64_t n = 4096;
  manual_seed(7);
  Tensor a = randn({n}, requires_grad()), b = randn({n}, requires_grad()), c = randn({n}, requires_grad());
  auto run = [&](bool use_hooks, int64_t& held, int64_t& allocs) {
    for (Tensor* t : {&a, &b, &c}) t->mutable_grad() = Tensor();
    int64_t before = cpu_allocated();
    int64_t allocs_before = memory_stats(kCPU).num_allocs;
    Tensor y = reference_f(a, b, c, use_hooks);
    held = cpu_allocated() - before;
    allocs = memory_stats(kCPU).num_allocs - allocs_before;
    y.sum().backward();
    return std::vector<std::vector<float>>{y.to_vector<float>(), a.grad().to_vector<float>(),
                                           b.grad().to_vector<float>(), c.grad().to_vector<float>()};
  };
  int64_t held_plain = 0, held_cpu = 0, allocs_plain = 0, allocs_cpu = 0;
  auto plain = run(false, held_plain, allocs_plain);
  auto with_hooks = run(true, held_cpu, allocs_cpu);
  CHECK(with_hooks == plain);  // bit-identical
  // Saved CPU tensors are kept as they are: the graph holds exactly the same bytes.
  CHECK(held_cpu == held_plain);
  CHECK(allocs_cpu == allocs_plain);
  CHECK(held_plain >= 3 * n * 4);  // y, prod_1 and prod_2
}

TEST_CASE("a pack hook that stores float64 as float32 shrinks the memory the graph holds") {
  const int64_t n = 1 << 16;
  Tensor a = (arange(static_cast<double>(n), dtype(kFloat64)) / (7.0 * n)).requires_grad_();  // in [0, 1/7), not float32-exact
  auto build = [&](bool use_hooks) {
    Tensor y;
    Tensor h = a * 2;  // scalar mul saves nothing
    if (use_hooks) {
      SavedTensorsHooks hooks([](const Tensor& t) -> Packed { return t.to(kFloat32); },
                              [](const Packed& p) { return std::any_cast<Tensor>(p).to(kFloat64); });
      y = h.sin().sum();  // SinBackward saves h
    } else {
      y = h.sin().sum();
    }
    return y;  // h goes out of scope: only the graph keeps it (or its float32 copy)
  };
  int64_t before = cpu_allocated();
  Tensor y_plain = build(false);
  int64_t held_plain = cpu_allocated() - before;
  y_plain.backward();
  auto grad_plain = a.grad().to_vector<double>();
  a.mutable_grad() = Tensor();
  int64_t before_hooks = cpu_allocated();
  Tensor y_hooks = build(true);
  int64_t held_hooks = cpu_allocated() - before_hooks;
  CHECK(held_plain >= n * 8);
  CHECK(held_plain - held_hooks == n * 4);  // a float64 tensor replaced by its float32 copy
  y_hooks.backward();
  auto grad_hooks = a.grad().to_vector<double>();
  REQUIRE(grad_hooks.size() == grad_plain.size());
  double max_err = 0;
  for (size_t i = 0; i < grad_plain.size(); ++i) max_err = std::max(max_err, std::abs(grad_plain[i] - grad_hooks[i]));
  CHECK(max_err < 1e-6);
  CHECK(max_err > 0);  // it really went through float32
  // Backward released the packed copy as well: only the new a.grad and y remain.
  a.mutable_grad() = Tensor();
  y_hooks = Tensor();
  CHECK(cpu_allocated() == before_hooks);
}

TEST_CASE("hooks are thread-local: a new thread sees them only through AutogradTlsGuard") {
  Recorder r;
  Tensor a = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  SavedTensorsHooks hooks(r.pack(), r.unpack());
  AutogradTls state = capture_autograd_tls();
  REQUIRE(state.hooks.size() == 1);
  size_t in_plain_thread = 99, in_guarded_thread = 99, after_guard = 99;
  std::thread plain([&] {
    Tensor y = a.sin();
    in_plain_thread = r.packed.size();
  });
  plain.join();
  CHECK(in_plain_thread == 0);
  std::thread guarded([&] {
    Tensor y;
    {
      AutogradTlsGuard guard(state);
      y = a.sin();
      in_guarded_thread = r.packed.size();
    }
    Tensor z = a.cos();  // the thread's own (empty) state is back
    after_guard = r.packed.size();
    y.sum().backward();  // the pair captured at save time unpacks, in this thread too
  });
  guarded.join();
  CHECK(in_guarded_thread == 1);
  CHECK(after_guard == 1);
  CHECK(r.unpacks == 1);
  CHECK(a.grad().to_vector<double>()[0] == Approx(std::cos(1.0)));
}

TEST_CASE("AutogradTlsGuard carries grad mode and the disabled-hooks message") {
  AutogradTls state;
  {
    NoGradGuard ng;
    DisableSavedTensorsHooks off("no hooks in workers");
    state = capture_autograd_tls();
  }
  CHECK_FALSE(state.grad_enabled);
  REQUIRE(state.disabled_message);
  bool grad_inside = true, grad_after = false;
  std::string error;
  std::thread t([&] {
    {
      AutogradTlsGuard guard(state);
      grad_inside = is_grad_enabled();
      try {
        SaveOnCpu cpu;
      } catch (const Error& e) {
        error = e.what();
      }
    }
    grad_after = is_grad_enabled();
  });
  t.join();
  CHECK_FALSE(grad_inside);
  CHECK(grad_after);
  CHECK(error == "no hooks in workers");
}

TEST_CASE("tensors saved during a create_graph backward use the hooks of the backward's caller") {
  Recorder r;
  Tensor x = tensor({1.0, 2.0}, dtype(kFloat64)).requires_grad_();
  Tensor y = (x * x * x).sum();  // saved without hooks
  std::vector<Tensor> g;
  {
    SavedTensorsHooks hooks(r.pack(), r.unpack());
    g = grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  }
  CHECK(r.packed.size() > 0);   // the backward's own ops saved through the caller's hooks
  CHECK(r.unpacks == 0);
  auto gg = grad({g[0].sum()}, {x});
  CHECK(r.unpacks > 0);
  CHECK(gg[0].to_vector<double>()[0] == Approx(6.0));
  CHECK(gg[0].to_vector<double>()[1] == Approx(12.0));
}

TEST_CASE("unpacked outputs get their history back for double backward") {
  Recorder r;
  Tensor x = tensor({0.5, 1.0}, dtype(kFloat64)).requires_grad_();
  Tensor y;
  {
    SavedTensorsHooks hooks(r.pack(), r.unpack());
    y = x.exp().sum();  // ExpBackward saves its output
  }
  auto g = grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true);
  auto gg = grad({g[0].sum()}, {x});
  CHECK(gg[0].to_vector<double>()[1] == Approx(std::exp(1.0)));
}

TEST_CASE("a graph saved through hooks is freed completely when dropped") {
  const int64_t n = 1 << 12;
  Tensor x = randn({n}, requires_grad());
  int64_t before = cpu_allocated();
  {
    SavedTensorsHooks hooks([](const Tensor& t) -> Packed { return t; },
                            [](const Packed& p) { return std::any_cast<Tensor>(p); });
    Tensor y = x.exp().sigmoid().tanh().sum();  // every node saves its output
    CHECK(cpu_allocated() - before > 0);
  }
  CHECK(cpu_allocated() == before);  // no node keeps itself alive through its saved output
}

TEST_CASE("custom Function::save_for_backward tensors go through the hooks") {
  Recorder r;
  Tensor x = tensor({0.5, 1.0}, dtype(kFloat64)).requires_grad_();
  Tensor y;
  {
    SavedTensorsHooks hooks(r.pack(), r.unpack());
    y = MyExp::apply(x);
  }
  REQUIRE(r.packed.size() == 2);
  CHECK(r.packed[0].to_vector<double>() == y.to_vector<double>());
  CHECK(r.packed[1].is_same(x));
  CHECK(r.unpacks == 0);
  y.sum().backward();
  CHECK(r.unpacks == 2);
  CHECK(x.grad().to_vector<double>()[1] == Approx(std::exp(1.0)));
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("backward through the graph a second time"));
}

TEST_CASE("an unpacked tensor gets back the history it had when saved, so double backward through data-only hooks is exact") {
  // The pack hook keeps a detached copy (as a disk or compression hook would); under create_graph
  // the unpacked value must still lead back to x (a leaf), to y (a non-leaf) and to the node itself.
  Tensor x = tensor({0.3, -1.1, 2.0}, dtype(kFloat64)).requires_grad_();
  auto f = [](const Tensor& in) {
    Tensor y = in * 2;              // non-leaf, saved by sin as its input
    return y.sin() * in + y.exp();  // in (a leaf) saved by mul; exp saves its own output
  };
  auto second = [&](bool hooked) {
    std::optional<SavedTensorsHooks> hooks;
    if (hooked)
      hooks.emplace([](const Tensor& t) -> Packed { return t.detach().clone(); },
                    [](const Packed& p) { return std::any_cast<Tensor>(p); });
    Tensor out = f(x).sum();
    hooks.reset();
    auto g = grad({out}, {x}, {}, std::nullopt, /*create_graph=*/true);
    return grad({g[0].sum()}, {x})[0].to_vector<double>();
  };
  CHECK(second(true) == second(false));
}
