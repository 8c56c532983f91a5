#include <catch2/catch.hpp>

#include <map>

#include "graft.h"
#include "autograd/checkpoint.h"
#include "nn/checkpoint_helpers.h"

using namespace graft;
using namespace graft::autograd;

namespace {

std::vector<double> v(const Tensor& t) { return t.to_vector<double>(); }

// Counts kernel calls per op name while alive.
struct OpCounter : DispatchMode {
  std::map<std::string, int> n;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    n[op.schema.name]++;
    return next(args);
  }
};

Tensor mlp_block(const Tensor& h, const Tensor& w1, const Tensor& w2) {
  return linear(linear(h, w1).tanh(), w2).sigmoid();
}

}  // namespace

TEST_CASE("checkpointed gradients are bit-identical to plain ones (MLP)") {
  manual_seed(1);
  Tensor x = randn({6, 8}).requires_grad_();
  Tensor w1 = randn({8, 8}).requires_grad_(), w2 = randn({8, 8}).requires_grad_();
  Tensor plain = mlp_block(mlp_block(x, w1, w2), w1, w2).sum();
  auto g0 = grad({plain}, {x, w1, w2});
  Tensor ck = checkpoint([&](const Tensor& h) { return mlp_block(checkpoint([&](const Tensor& a) { return mlp_block(a, w1, w2); }, h), w1, w2); }, x).sum();
  auto g1 = grad({ck}, {x, w1, w2});
  for (int i = 0; i < 3; ++i) CHECK(g0[i].to_vector<float>() == g1[i].to_vector<float>());
}

TEST_CASE("checkpointed gradients are bit-identical to plain ones (CNN block)") {
  manual_seed(2);
  Tensor x = randn({2, 3, 8, 8}).requires_grad_();
  Tensor k = randn({4, 3, 3, 3}).requires_grad_(), b = randn({4}).requires_grad_();
  auto block = [&](const Tensor& in) { return max_pool2d(conv2d(in, k, b, {1, 1}, {1, 1}).relu(), {2, 2}); };
  auto g0 = grad({block(x).pow(2).sum()}, {x, k, b});
  auto g1 = grad({checkpoint(block, x).pow(2).sum()}, {x, k, b});
  for (int i = 0; i < 3; ++i) CHECK(g0[i].to_vector<float>() == g1[i].to_vector<float>());
}

TEST_CASE("recomputation replays the RNG state of the original call") {
  manual_seed(3);
  Tensor x = randn({64}).requires_grad_();
  // Dropout-style: a random mask drawn inside the function.
  auto drop = [](const Tensor& in) { return (in * ops::to_dtype(ops::lt(rand({64}), 0.5), kFloat32) * 2).exp(); };
  manual_seed(10);
  auto g0 = grad({drop(x).sum()}, {x});
  manual_seed(10);
  Tensor y = checkpoint(drop, x);
  randn({100});  // the RNG moves on before backward
  auto g1 = grad({y.sum()}, {x});
  CHECK(v(g0[0]) == v(g1[0]));
}

TEST_CASE("early stop skips the code after the last saved tensor; without it the whole function reruns") {
  Tensor x = randn({4}).requires_grad_();
  for (bool early : {true, false}) {
    int before = 0, after = 0;
    auto fn = [&](const Tensor& in) {
      ++before;
      Tensor y = in.sin();  // saves in: the only saved tensor
      ++after;
      return y * 2;  // mul by a scalar saves nothing
    };
    CheckpointOptions o;
    o.early_stop = early;
    Tensor y = checkpoint(fn, x, o);
    CHECK(before == 1);
    CHECK(after == 1);
    y.sum().backward();
    CHECK(before == 2);
    CHECK(after == (early ? 1 : 2));
  }
}

TEST_CASE("nested checkpoints at depth 3 recompute each level as needed, with exact gradients") {
  manual_seed(4);
  Tensor x = randn({5}, dtype(kFloat64)).requires_grad_();
  int c1 = 0, c2 = 0, c3 = 0;
  auto l3 = [&](const Tensor& h) { ++c3; return h.tanh().sin(); };
  auto l2 = [&](const Tensor& h) { ++c2; return checkpoint(l3, h.exp()).cos(); };
  auto l1 = [&](const Tensor& h) { ++c1; return checkpoint(l2, h.sigmoid()) * h; };
  auto plain = [&](const Tensor& h) { return ((h.sigmoid().exp().tanh().sin()).cos()) * h; };
  auto g0 = grad({plain(x).sum()}, {x});
  Tensor y = checkpoint(l1, x);
  CHECK((c1 == 1 && c2 == 1 && c3 == 1));
  auto g1 = grad({y.sum()}, {x});
  CHECK(v(g0[0]) == v(g1[0]));
  // Level 1 reruns once; level 2 reruns inside it and again for its own tensors; level 3 likewise.
  CHECK(c1 == 2);
  CHECK(c2 >= 2);
  CHECK(c3 >= 2);
  INFO("calls per level: " << c1 << " " << c2 << " " << c3);
  CHECK(c2 <= 3);
  CHECK(c3 <= 4);
}

TEST_CASE("retain_graph makes a second backward recompute again; without it the usual error") {
  Tensor x = randn({3}).requires_grad_();
  int calls = 0;
  Tensor y = checkpoint([&](const Tensor& h) { ++calls; return h.exp().sum(); }, x);
  y.backward({}, true);
  CHECK(calls == 2);
  y.backward();
  CHECK(calls == 3);
  CHECK(v(x.grad()) == v(x.exp() * 2));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("Trying to backward through the graph a second time"));
}

TEST_CASE("a function that saves a different number of tensors when recomputed is detected") {
  Tensor x = randn({3}).requires_grad_();
  int calls = 0;
  CheckpointOptions o;
  o.early_stop = false;
  Tensor y = checkpoint([&](const Tensor& h) { return ++calls == 1 ? h.exp() : h.exp().sin(); }, x, o);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("different number of tensors"));
  calls = 0;
  Tensor z = checkpoint([&](const Tensor& h) { return ++calls == 1 ? h.exp().sin() : h.exp(); }, x, o);
  CHECK_THROWS_WITH(z.sum().backward(), Catch::Contains("different number of tensors"));
}

TEST_CASE("a function whose recomputed tensors change shape is detected with the index and shapes") {
  Tensor x = randn({4}).requires_grad_();
  int calls = 0;
  Tensor y = checkpoint([&](const Tensor& h) { return (++calls == 1 ? h : h.slice(0, 0, 2)).exp().sum(); }, x);
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("different metadata") && Catch::Contains("[4] float32 cpu before") &&
                                      Catch::Contains("[2] float32 cpu after"));
  CheckpointOptions off;
  off.determinism_check = false;
  calls = 0;
  Tensor z = checkpoint([&](const Tensor& h) { return (++calls == 1 ? h : h.slice(0, 0, 2)).exp().sum(); }, x, off);
  CHECK_THROWS(z.backward());  // the saved variable's own check still refuses a wrong shape
}

TEST_CASE("a MustSave policy keeps matmul outputs: exact gradients and the kernel does not rerun") {
  manual_seed(5);
  Tensor x = randn({4, 6}).requires_grad_(), w = randn({6, 6}).requires_grad_();
  auto fn = [&](const Tensor& h) { return h.mm(w).tanh().mm(w).sin(); };
  OpCounter plain_count;
  std::vector<Tensor> g0;
  {
    DispatchModeGuard g(&plain_count);
    g0 = grad({fn(x).sum()}, {x, w});
  }
  CheckpointOptions o;
  o.policy = [](std::string_view op) { return op == "mm" ? CheckpointPolicy::MustSave : CheckpointPolicy::PreferRecompute; };
  OpCounter ck_count;
  std::vector<Tensor> g1;
  int tanh_calls = 0;
  {
    DispatchModeGuard g(&ck_count);
    Tensor y = checkpoint(fn, x, o);
    tanh_calls = ck_count.n["tanh"];
    g1 = grad({y.sum()}, {x, w});
  }
  CHECK(g0[0].to_vector<float>() == g1[0].to_vector<float>());
  CHECK(g0[1].to_vector<float>() == g1[1].to_vector<float>());
  CHECK(ck_count.n["mm"] == plain_count.n["mm"]);        // no extra mm: outputs came from the cache
  CHECK(ck_count.n["tanh"] == 2 * tanh_calls);          // tanh was recomputed
}

TEST_CASE("hooks around a checkpoint pack only its inputs") {
  Tensor x = randn({5}).requires_grad_();
  int packs = 0;
  Tensor y;
  {
    SavedTensorsHooks h([&](const Tensor& t) -> Packed { ++packs; return t; },
                        [](const Packed& p) { return std::any_cast<Tensor>(p); });
    y = checkpoint([](const Tensor& a) { return a.exp().sin().cos(); }, x);
  }
  CHECK(packs == 1);
  y.sum().backward();
  CHECK(x.grad().defined());
}

TEST_CASE("checkpoint inside SaveOnCpu and SaveOnCpu inside checkpoint give the plain gradients") {
  manual_seed(6);
  Tensor x = randn({7}).requires_grad_();
  auto f = [](const Tensor& a) { return a.exp().tanh() * a; };
  auto g0 = grad({f(x).sum()}, {x});
  Tensor y1;
  {
    SaveOnCpu s;
    y1 = checkpoint(f, x);
  }
  auto g1 = grad({y1.sum()}, {x});
  Tensor y2 = checkpoint([&](const Tensor& a) {
    SaveOnCpu s;
    return f(a);
  }, x);
  auto g2 = grad({y2.sum()}, {x});
  CHECK(v(g0[0]) == v(g1[0]));
  CHECK(v(g0[0]) == v(g2[0]));
}

TEST_CASE("checkpoint under allow_mutation: mutating an input after the forward keeps the saved value") {
  // Chosen behaviour: the checkpoint's inputs are ordinary saved tensors of the enclosing
  // context, so AllowMutationOnSavedTensors clones them before the write and the recomputation
  // runs on the values of the original forward.
  Tensor a = randn({4});
  Tensor x0 = a.clone().requires_grad_();
  auto g0 = grad({checkpoint([](const Tensor& t) { return t.exp(); }, x0 * 1).sum()}, {x0});
  Tensor x = a.clone().requires_grad_();
  {
    AllowMutationOnSavedTensors allow;
    Tensor m = x * 1;
    Tensor y = checkpoint([](const Tensor& t) { return t.exp(); }, m);
    m.mul_(100);
    auto g = grad({y.sum()}, {x});
    CHECK(v(g[0]) == v(g0[0]));
  }
}

TEST_CASE("multi-grad hooks over checkpointed parameters fire once per backward") {
  Tensor w1 = randn({3}).requires_grad_(), w2 = randn({3}).requires_grad_();
  int fired = 0;
  register_multi_grad_hook({w1, w2}, [&](const std::vector<Tensor>& g) {
    ++fired;
    CHECK(g[0].defined());
    CHECK(g[1].defined());
  });
  Tensor x = randn({3});
  Tensor y = checkpoint([&](const Tensor& h) { return (h * w1).exp() * w2; }, x);
  y.sum().backward();
  CHECK(fired == 1);
}

TEST_CASE("checkpoint of 8 chained tanh over 4 MiB holds at most 2 x 4 MiB after forward") {
  Tensor x = randn({1 << 20}).requires_grad_();
  auto chain = [](const Tensor& h) {
    Tensor t = h;
    for (int i = 0; i < 8; ++i) t = t.tanh();
    return t;
  };
  int64_t base = memory_stats(kCPU).allocated_bytes;
  Tensor plain = chain(x);
  int64_t plain_held = memory_stats(kCPU).allocated_bytes - base;
  plain = Tensor();
  base = memory_stats(kCPU).allocated_bytes;
  Tensor ck = checkpoint(chain, x);
  int64_t ck_held = memory_stats(kCPU).allocated_bytes - base;
  CHECK(plain_held >= 8 * (4 << 20));
  CHECK(ck_held <= 2 * (4 << 20));
  ck.sum().backward();
  CHECK(x.grad().defined());
}

TEST_CASE("the nested helper's peak memory grows logarithmically with depth") {
  auto peak_for = [](int layers) {
    std::vector<nn::Layer> fns(static_cast<size_t>(layers), [](const Tensor& h) { return h.tanh(); });
    Tensor x = randn({1 << 16}).requires_grad_();  // 256 KiB per activation
    int64_t base = memory_stats(kCPU).allocated_bytes;
    reset_peak_memory_stats(kCPU);
    Tensor y = nn::checkpoint_nested(fns, x);
    y.sum().backward();
    return memory_stats(kCPU).peak_allocated_bytes - base;
  };
  int64_t p16 = peak_for(16), p64 = peak_for(64);
  const int64_t act = 1 << 18;
  INFO("peak 16 layers " << p16 << ", 64 layers " << p64);
  CHECK(p64 < 16 * act);        // plain would hold 64 activations
  CHECK(p64 - p16 <= 6 * act);  // 4x the depth costs a few activations more, not 4x
}

TEST_CASE("checkpoint_sequential matches plain gradients and keeps fewer activations") {
  std::vector<nn::Layer> fns;
  Tensor w = randn({16, 16}).requires_grad_();
  for (int i = 0; i < 9; ++i) fns.push_back([w](const Tensor& h) { return h.mm(w).tanh(); });
  Tensor x = randn({4, 16}).requires_grad_();
  Tensor h = x;
  for (auto& f : fns) h = f(h);
  auto g0 = grad({h.sum()}, {x, w});
  auto g1 = grad({nn::checkpoint_sequential(fns, 3, x).sum()}, {x, w});
  CHECK(g0[0].to_vector<float>() == g1[0].to_vector<float>());
  CHECK(g0[1].to_vector<float>() == g1[1].to_vector<float>());
  CHECK_THROWS_WITH(nn::checkpoint_sequential(fns, 0, x), Catch::Contains("segments must be at least 1"));
}

namespace {
struct ReadTwice : Function<ReadTwice> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * 2;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    ctx->saved_tensors();
    return {g[0] * ctx->saved_tensors()[0] * 0 + g[0] * 2};
  }
};
}  // namespace

TEST_CASE("unpacking the same checkpointed tensor twice in one backward is a clear error") {
  Tensor x = randn({3}).requires_grad_();
  Tensor y = checkpoint([](const Tensor& h) { return ReadTwice::apply(h.exp()); }, x);
  CHECK_THROWS_WITH(y.sum().backward(), Catch::Contains("was unpacked twice in one backward"));
}

TEST_CASE("checkpoint works with grad() and backward(inputs=)") {
  Tensor x = randn({3}).requires_grad_(), w = randn({3}).requires_grad_();
  Tensor y = checkpoint([&](const Tensor& h) { return (h * w).exp(); }, x);
  auto g = grad({y.sum()}, {w}, {}, true);
  CHECK(v(g[0]) == v((x * w).exp() * x));
  y.sum().backward({}, false, false, {x});
  CHECK(x.grad().defined());
  CHECK_FALSE(w.grad().defined());
}

TEST_CASE("a checkpointed function may itself call grad()") {
  Tensor x = tensor({0.5, 1.5}, dtype(kFloat64)).requires_grad_();
  auto fn = [](const Tensor& h) {
    Tensor y = (h * h * h).sum();
    auto g = grad({y}, {h}, {}, std::nullopt, /*create_graph=*/true);  // 3 h^2
    return g[0].sin();
  };
  auto g0 = grad({fn(x).sum()}, {x});
  Tensor y = checkpoint(fn, x);
  auto g1 = grad({y.sum()}, {x});
  CHECK(v(g0[0]) == v(g1[0]));  // d/dh sin(3h^2) = cos(3h^2) 6h
  CHECK(v(g1[0])[0] == Approx(std::cos(0.75) * 3.0));
}
