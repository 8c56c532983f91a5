#include <catch2/catch.hpp>

#include <map>

#include "graft.h"
#include "autograd/checkpoint.h"
#include "nn/checkpoint_helpers.h"
#include "support/check_close.h"

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
  // With the check off the recomputed tensor is used as computed (as PyTorch): here the shapes no
  // longer fit the graph, so the backward op itself fails, not the saved-tensor check.
  CHECK_THROWS_WITH(z.backward(), !Catch::Contains("unpack hook must return"));
}

TEST_CASE("determinism_check = false uses a recomputed tensor of another shape as computed") {
  Tensor x = tensor({1.0, 2.0, 3.0, 4.0}, dtype(kFloat64)).requires_grad_();
  int calls = 0;
  // The forward multiplies by a [4] tensor of 2s, the recomputation by a broadcast [1] one: the saved
  // `other` of mul changes shape, the gradient does not.
  auto fn = [&](const Tensor& h) {
    Tensor w = ++calls == 1 ? full({4}, 2.0, dtype(kFloat64)) : full({1}, 2.0, dtype(kFloat64));
    return (h * w).sum();
  };
  Tensor y = checkpoint(fn, x);
  CHECK_THROWS_WITH(y.backward({}, true), Catch::Contains("different metadata") && Catch::Contains("set determinism_check=false"));
  CheckpointOptions off;
  off.determinism_check = false;
  calls = 0;
  Tensor z = checkpoint(fn, x, off);
  z.backward();
  CHECK(v(x.grad()) == std::vector<double>{2, 2, 2, 2});
}

namespace {
// Gradients of orders 1..3 of sum(f(x)) with respect to x (each order a grad() of the previous one's sum).
std::vector<std::vector<double>> grads_up_to_3(const Tensor& y, const Tensor& x) {
  std::vector<std::vector<double>> out;
  Tensor cur = y.sum();
  for (int order = 1; order <= 3; ++order) {
    auto g = grad({cur}, {x}, {}, std::nullopt, /*create_graph=*/order < 3);
    out.push_back(v(g[0]));
    cur = g[0].sum();
  }
  return out;
}
Tensor sin_exp_sin(const Tensor& h) { return h.sin().exp().sin(); }
}  // namespace

TEST_CASE("double and triple backward through a checkpoint are bit-identical to the plain graph") {
  Tensor x = tensor({0.3, -1.2, 2.0, 0.7}, dtype(kFloat64)).requires_grad_();
  auto plain = grads_up_to_3(sin_exp_sin(x), x);
  int calls = 0;
  auto counted = [&](const Tensor& h) {
    ++calls;
    return sin_exp_sin(h);
  };
  auto ck = grads_up_to_3(checkpoint(counted, x), x);
  for (int i = 0; i < 3; ++i) CHECK(ck[i] == plain[i]);
  CHECK(calls == 4);  // the forward, then once per backward (as PyTorch)

  // The smallest case: a checkpointed sin saves only the leaf x; its second derivative must reach x.
  auto p1 = grads_up_to_3(x.sin(), x);
  auto c1 = grads_up_to_3(checkpoint([](const Tensor& h) { return h.sin(); }, x), x);
  for (int i = 0; i < 3; ++i) CHECK(c1[i] == p1[i]);
}

TEST_CASE("double backward through nested checkpoints is bit-identical to the plain graph") {
  Tensor x = tensor({0.3, -1.2, 2.0, 0.7}, dtype(kFloat64)).requires_grad_();
  Tensor w = tensor({0.5, 1.5, -0.25, 2.0}, dtype(kFloat64)).requires_grad_();
  auto f = [&](const Tensor& h) { return (sin_exp_sin(h) * w).tanh() * h; };
  auto plain = grads_up_to_3(f(f(x)), x);
  auto nested = checkpoint([&](const Tensor& h) {
    Tensor a = checkpoint([&](const Tensor& i) { return checkpoint(f, i); }, h);
    return checkpoint(f, a);
  }, x);
  auto ck = grads_up_to_3(nested, x);
  for (int i = 0; i < 3; ++i) CHECK(ck[i] == plain[i]);
  // Mixed second derivatives reach the captured weight too.
  auto gx = grad({f(f(x)).sum()}, {x}, {}, std::nullopt, true);
  auto gxw = grad({gx[0].sum()}, {w});
  Tensor y = checkpoint([&](const Tensor& h) { return checkpoint(f, checkpoint(f, h)); }, x);
  auto cx = grad({y.sum()}, {x}, {}, std::nullopt, true);
  auto cxw = grad({cx[0].sum()}, {w});
  CHECK(v(cxw[0]) == v(gxw[0]));
}

TEST_CASE("second-order gradients through a checkpointed MLP block, repeated with retain_graph") {
  manual_seed(5);
  Tensor x = randn({3, 4}, dtype(kFloat64)).requires_grad_();
  Tensor w1 = randn({4, 4}, dtype(kFloat64)).requires_grad_(), w2 = randn({4, 4}, dtype(kFloat64)).requires_grad_();
  auto block = [&](const Tensor& h) { return linear(linear(h, w1).tanh(), w2).sigmoid(); };
  auto g0 = grad({block(x).sum()}, {x}, {}, std::nullopt, true);
  auto h0 = grad({g0[0].pow(2).sum()}, {x, w1, w2});
  Tensor y = checkpoint(block, x);
  auto g1 = grad({y.sum()}, {x}, {}, std::nullopt, true);
  Tensor gg = g1[0].pow(2).sum();
  for (int rep = 0; rep < 2; ++rep) {  // the second grad of a retained graph recomputes again
    auto h1 = grad({gg}, {x, w1, w2}, {}, /*retain_graph=*/true);
    for (int i = 0; i < 3; ++i) CHECK(v(h1[i]) == v(h0[i]));
  }
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

TEST_CASE("preserve_rng_state = false lets the recomputation draw fresh random numbers") {
  Tensor x = ones({256}).requires_grad_();
  auto fn = [](const Tensor& in) { return (in * rand({256})).exp(); };  // exp saves its (random) output
  manual_seed(11);
  auto g_plain = grad({fn(x).sum()}, {x});
  manual_seed(11);
  Tensor y = checkpoint(fn, x);
  auto g_kept = grad({y.sum()}, {x});
  CHECK(v(g_kept[0]) == v(g_plain[0]));
  CheckpointOptions o;
  o.preserve_rng_state = false;
  manual_seed(11);
  Tensor z = checkpoint(fn, x, o);
  auto g_fresh = grad({z.sum()}, {x});
  CHECK(v(g_fresh[0]) != v(g_plain[0]));
}

TEST_CASE("debug = true lists both op sequences and marks the first difference") {
  Tensor x = randn({4}).requires_grad_();
  int calls = 0;
  CheckpointOptions o;
  o.debug = true;
  // The recomputation slices first: sin then saves a [2] tensor where the forward saved a [4] one.
  auto fn = [&](const Tensor& h) { return ++calls == 1 ? h.sin().exp() : h.slice(0, 0, 2).sin().exp(); };
  Tensor y = checkpoint(fn, x, o);
  std::string msg;
  try {
    y.sum().backward();
  } catch (const Error& e) {
    msg = e.what();
  }
  INFO(msg);
  CHECK_THAT(msg, Catch::Contains("checkpoint debug: ops of the original forward and of the recomputation"));
  CHECK_THAT(msg, Catch::Contains("different metadata"));
  // sin saves its input before its kernel runs, so the recomputation's column ends at that save.
  CHECK_THAT(msg, Catch::Contains("sin([4] float32) -> [4]") && Catch::Contains("slice([4] float32) -> [2]") &&
                      Catch::Contains("SinBackward saves input [2] float32"));
  CHECK_THAT(msg, Catch::Contains(">>   0") && Catch::Contains("<-- first difference"));
  // Without debug the message has no table.
  calls = 0;
  Tensor z = checkpoint(fn, x);
  CHECK_THROWS_WITH(z.sum().backward(), !Catch::Contains("checkpoint debug"));
}

TEST_CASE("CheckpointEarlyStop overrides early_stop for checkpoints called in its scope") {
  Tensor x = randn({4}).requires_grad_();
  int after = 0;
  auto fn = [&](const Tensor& in) {
    Tensor y = in.sin();
    ++after;
    return y * 2;
  };
  Tensor y;
  {
    CheckpointEarlyStop off(false);
    y = checkpoint(fn, x);  // early_stop defaults to true; the scope turns it off
  }
  y.sum().backward();
  CHECK(after == 2);  // the recomputation ran to the end
  after = 0;
  CheckpointOptions o;
  o.early_stop = false;
  {
    CheckpointEarlyStop on(true);
    y = checkpoint(fn, x, o);
  }
  y.sum().backward();
  CHECK(after == 1);  // stopped right after the last saved tensor
}

TEST_CASE("op_policy sees the op's inputs; save_ops keeps the listed ops' outputs from the forward") {
  manual_seed(4);
  Tensor x = randn({8, 16}).requires_grad_();
  Tensor w = randn({16, 16}).requires_grad_();
  auto fn = [&](const Tensor& h) { return h.mm(w).tanh().mm(w).sigmoid(); };
  Tensor plain_y = fn(x);
  OpCounter plain_count;
  std::vector<Tensor> g0;
  {
    DispatchModeGuard guard(&plain_count);
    g0 = grad({plain_y.sum()}, {x, w});
  }
  CheckpointOptions o;
  o.op_policy = save_ops({"mm"});
  // The whole function re-runs: with an early stop, sin's save of its input (the last needed) would
  // end the recomputation before sin's kernel either way.
  o.early_stop = false;
  Tensor y = checkpoint(fn, x, o);
  OpCounter count;
  std::vector<Tensor> g1;
  {
    DispatchModeGuard guard(&count);
    g1 = grad({y.sum()}, {x, w});
  }
  CHECK(count.n["tanh"] == 1);  // recomputed
  // mm runs only in the backward rules, as often as without checkpoint: not in the recomputation.
  CHECK(count.n["mm"] == plain_count.n["mm"]);
  CHECK(plain_count.n["tanh"] == 0);
  for (int i = 0; i < 2; ++i) CHECK(v(g0[i]) == v(g1[i]));
  // The policy sees shapes: keep only products with a 16-wide left operand.
  std::vector<Shape> seen;
  CheckpointOptions by_shape;
  by_shape.op_policy = [&](const OpCall& call) {
    if (call.name == "mm") seen.push_back(call.inputs.at(0).sizes());
    return CheckpointPolicy::PreferRecompute;
  };
  Tensor z = checkpoint(fn, x, by_shape);
  CHECK(seen == std::vector<Shape>{{8, 16}, {8, 16}});
  z.sum().backward();
}

TEST_CASE("allow_cache_entry_mutation lets a kept output be written after the forward") {
  Tensor x = randn({4, 4}).requires_grad_();
  Tensor w = randn({4, 4});
  Tensor kept;
  auto fn = [&](const Tensor& h) {
    Tensor m = h.mm(w);
    kept = m;
    return m.sin();
  };
  CheckpointOptions o;
  o.op_policy = save_ops({"mm"});
  Tensor y = checkpoint(fn, x, o);
  {
    NoGradGuard ng;
    kept.add_(0);  // a write, even of nothing, bumps the version
  }
  CHECK_THROWS_WITH(y.sum().backward({}, true), Catch::Contains("modified in place after the forward") &&
                                                   Catch::Contains("allow_cache_entry_mutation"));
  o.allow_cache_entry_mutation = true;
  Tensor z = checkpoint(fn, x, o);
  {
    NoGradGuard ng;
    kept.add_(0);
  }
  z.sum().backward();
  CHECK(x.grad().defined());
}

TEST_CASE("op_policy takes precedence over policy when both are set") {
  Tensor x = randn({4, 4}).requires_grad_();
  Tensor w = randn({4, 4});
  auto fn = [&](const Tensor& h) { return h.mm(w).sin(); };
  CheckpointOptions o;
  o.policy = [](std::string_view) { return CheckpointPolicy::MustSave; };  // would keep sin's output too
  o.op_policy = save_ops({"mm"});
  // The whole function re-runs: with an early stop, sin's save of its input (the last needed) would
  // end the recomputation before sin's kernel either way.
  o.early_stop = false;
  Tensor y = checkpoint(fn, x, o);
  OpCounter count;
  {
    DispatchModeGuard guard(&count);
    y.sum().backward();
  }
  CHECK(count.n["sin"] == 1);  // recomputed: op_policy decided, not policy
}

TEST_CASE("checkpoint: an op-level offload policy is an error naming the op (offload is the planner's layer decision)") {
  Tensor x = randn({4, 4}).requires_grad_();
  auto fn = [](const Tensor& t) { return t.tanh() * 2.0; };
  CheckpointOptions o;
  o.policy = [](std::string_view op) {
    return op == "tanh" ? CheckpointPolicy::MustOffload : CheckpointPolicy::PreferRecompute;
  };
  CHECK_THROWS_WITH(checkpoint(fn, x, o),
                    Catch::Contains("checkpoint: op tanh got an offload policy") && Catch::Contains("nn::plan_checkpoint"));
  o.policy = [](std::string_view) { return CheckpointPolicy::PreferOffload; };
  CHECK_THROWS_WITH(checkpoint(fn, x, o), Catch::Contains("got an offload policy"));
  // Nothing was left behind: the same function checkpoints normally afterwards.
  Tensor g = grad({checkpoint(fn, x).sum()}, {x})[0];
  Tensor expect = grad({fn(x).sum()}, {x})[0];
  CHECK(g.to_vector<float>() == expect.to_vector<float>());
}

TEST_CASE("a checkpoint's forward frees each activation when the function drops it, as a plain forward does") {
  // tanh saves its result; in a checkpoint the graph holds placeholders only, so each result lives
  // as long as fn's own code keeps it: two at a time here, not all eight until fn returns.
  Tensor x = randn({256, 1024}).requires_grad_();  // 1 MiB
  auto fn = [](const Tensor& h) {
    Tensor y = h;
    for (int i = 0; i < 8; ++i) y = y.tanh();
    return y;
  };
  Allocator* a = get_allocator(kCPU);
  a->reset_peak_stats();
  const int64_t base = a->stats().allocated_bytes;
  Tensor y = checkpoint(fn, x);
  const int64_t forward_peak = a->stats().peak_allocated_bytes - base;
  CHECK(forward_peak <= 2 * static_cast<int64_t>(x.nbytes()));
  Tensor g = grad({y.sum()}, {x})[0];
  Tensor want = grad({fn(x).sum()}, {x})[0];
  CHECK(v(g) == v(want));
}

TEST_CASE("recompute_hooks: the re-run's tensors wait packed, and the gradients are a compressed forward's") {
  // Four mm + tanh layers on a [4096, 64] batch (1 MiB activations, 16 KiB weights): tanh's output
  // and the next mm's input are one tensor, a lossy slot for both, so int8 packs each boundary once
  // (deduplication within the re-run's one scope).
  manual_seed(3);
  std::vector<Tensor> w;
  for (int i = 0; i < 4; ++i) w.push_back(randn({64, 64}).mul(0.125).requires_grad_());
  Tensor x = randn({4096, 64}).requires_grad_();
  auto fn = [&](const Tensor& h) {
    Tensor y = h;
    for (const Tensor& wi : w) y = graft::mm(y, wi).tanh();
    return y;
  };
  std::vector<Tensor> wrt = w;
  wrt.push_back(x);
  // The reference: the same layers in a plain forward under CompressSaved.
  std::vector<Tensor> want;
  {
    Tensor y;
    {
      CompressSaved hooks(CompressOptions{.codec = SavedCodec::kInt8});
      y = fn(x);
    }
    want = grad({y.sum()}, wrt);
  }
  int made = 0;
  CheckpointOptions o;
  o.recompute_hooks = [&made] {
    ++made;
    return std::make_unique<CompressSaved>(CompressOptions{.codec = SavedCodec::kInt8});
  };
  // Backward's peak above what the forward left held, with and without the packing: the re-run's
  // activations at a quarter of their bytes instead of in full.
  Allocator* a = get_allocator(kCPU);
  auto backward_peak = [&](const CheckpointOptions& opts, std::vector<Tensor>& g) {
    Tensor y = checkpoint(fn, x, opts);
    Tensor loss = y.sum();
    y = Tensor();
    const int64_t base = a->stats().allocated_bytes;
    a->reset_peak_stats();
    g = grad({loss}, wrt);
    return a->stats().peak_allocated_bytes - base;
  };
  std::vector<Tensor> got, exact;
  const int64_t packed_peak = backward_peak(o, got);
  CHECK(made == 1);
  // To rounding: the weights' gradients sum over 4096 rows, which a loaded machine may order
  // differently from one run to the next (seen under ASan in CI: 1-ulp differences). One int8 code
  // packed differently would move them far more, and the exact gradients are far away.
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) test::check_close(got[i], want[i]);
  std::vector<Tensor> uncompressed = grad({fn(x).sum()}, wrt);
  CHECK_FALSE(test::close_mismatch(got[0], uncompressed[0]).empty());
  const int64_t plain_peak = backward_peak(CheckpointOptions{}, exact);
  INFO("backward peak: packed " << packed_peak << " bytes, plain " << plain_peak);
  // Plain holds the four recomputed activations (1 MiB each) at once, beside the gradients; packed,
  // their int8 copies and one decoded at a time (5 MiB against 4, measured).
  CHECK(packed_peak + static_cast<int64_t>(x.nbytes()) * 3 / 4 <= plain_peak);
  // A second backward through a retained graph re-runs, and packs, again.
  made = 0;
  Tensor y = checkpoint(fn, x, o);
  Tensor g1 = grad({y.sum()}, {x}, {}, /*retain_graph=*/true)[0];
  Tensor g2 = grad({y.sum()}, {x})[0];
  CHECK(made == 2);
  test::check_close(g1, g2);
  // A factory that makes nothing is an error that says so.
  CheckpointOptions bad;
  bad.recompute_hooks = [] { return std::unique_ptr<SavedTensorsHooks>(); };
  Tensor yb = checkpoint(fn, x, bad);
  CHECK_THROWS_WITH(grad({yb.sum()}, {x}), Catch::Contains("recompute_hooks returned no hooks"));
}

TEST_CASE("input_tolerance kLossy lets an enclosing codec pack the checkpoint's input; the re-run starts from its decoding") {
  manual_seed(4);
  Tensor w = randn({64, 64}).mul(0.125).requires_grad_();
  // An activation, not a leaf: a leaf that requires grad is a parameter to the codec, never packed.
  Tensor x0 = randn({32, 64}).requires_grad_();
  Tensor x = x0 * 2.0;
  auto fn = [&](const Tensor& h) { return graft::mm(h, w).tanh(); };
  CheckpointOptions o;
  o.input_tolerance = SaveTolerance::kLossy;
  Tensor y;
  CompressStats st;
  {
    CompressSaved hooks(CompressOptions{.codec = SavedCodec::kBf16});
    y = checkpoint(fn, x, o);
    st = hooks.stats();
  }
  CHECK(st.compressed == 1);  // the input; the checkpoint's own hooks took fn's saves
  // The forward's value is exact; backward re-runs on x rounded to bf16 and back.
  CHECK(v(y) == v(fn(x)));
  std::vector<Tensor> got = grad({y.sum()}, {w, x0});
  Tensor xq = x.detach().to(kBFloat16).to(kFloat32).requires_grad_();
  std::vector<Tensor> want = grad({fn(xq).sum()}, {w, xq});
  CHECK(v(got[0]) == v(want[0]));
  CHECK(v(got[1]) == v(want[1] * 2.0));  // through x = x0 * 2
  CHECK(v(got[0]) != v(grad({fn(x).sum()}, {w})[0]));  // the rounding is visible
  // kExact (the default): the same enclosing codec leaves the input as it is.
  {
    CompressSaved hooks(CompressOptions{.codec = SavedCodec::kBf16});
    y = checkpoint(fn, x);
    CHECK(hooks.stats().compressed == 0);
  }
  CHECK(v(grad({y.sum()}, {w})[0]) == v(grad({fn(x).sum()}, {w})[0]));
}

// checkpoint_rows (autograd/checkpoint_rows.h): a stretch of per-row layers run by slices of the
// batch, in forward and backward.
namespace {

struct RowsBlock {
  Tensor w, b;
  Tensor operator()(const Tensor& x) const {
    return max_pool2d(relu(conv2d(x, w, b, {1, 1}, {1, 1})), {2, 2}, {2, 2});
  }
};

RowsBlock rows_block() {
  manual_seed(7);
  return {randn({4, 3, 3, 3}).mul(0.3).requires_grad_(), randn({4}).requires_grad_()};
}

}  // namespace

TEST_CASE("checkpoint_rows: the output and every gradient are the unsliced ones, for even, uneven and oversized slicings") {
  RowsBlock f = rows_block();
  for (bool channels_last : {false, true}) {
    manual_seed(3);
    Tensor x0 = randn({10, 3, 8, 8});
    if (channels_last) x0 = x0.contiguous(MemoryFormat::ChannelsLast);
    Tensor x = x0.detach().requires_grad_();
    Tensor probe = randn({10, 4, 4, 4});
    Tensor y0 = f(x);
    std::vector<Tensor> g0 = grad({(y0 * probe).sum()}, {x, f.w, f.b});
    for (int64_t chunks : {1, 3, 10, 25}) {
      INFO("chunks " << chunks << (channels_last ? ", channels-last" : ""));
      Tensor y = checkpoint_rows(f, x, {f.w, f.b}, chunks);
      test::check_close(y, y0);
      std::vector<Tensor> g = grad({(y * probe).sum()}, {x, f.w, f.b});
      for (size_t i = 0; i < g.size(); ++i) test::check_close(g[i], g0[i]);
      // The input's gradient keeps the input's layout.
      CHECK((g[0].suggest_memory_format() == MemoryFormat::ChannelsLast) == channels_last);
    }
  }
}

TEST_CASE("checkpoint_rows: parameters get one gradient per backward through the node, and .grad accumulates once") {
  RowsBlock f = rows_block();
  Tensor x = randn({6, 3, 8, 8});  // needs no gradient
  int hook_calls = 0;
  f.w.register_hook([&](const Tensor& g) {
    ++hook_calls;
    return g;
  });
  Tensor y = checkpoint_rows(f, x, {f.w, f.b}, 3);
  y.sum().backward();
  CHECK(hook_calls == 1);
  Tensor expected = grad({f(x).sum()}, {f.w})[0];
  test::check_close(f.w.grad(), expected);
  // The input is the only tensor it saves: enclosing hooks pack exactly one.
  int packs = 0;
  {
    SavedTensorsHooks count([&](const Tensor& t) -> Packed { ++packs; return t; },
                            [](const Packed& p) { return std::any_cast<Tensor>(p); });
    Tensor z = checkpoint_rows(f, x, {f.w, f.b}, 2);
    CHECK(packs == 1);
    z.sum().backward();
  }
  CHECK(packs == 1);  // the re-run saves in a fresh context
}

TEST_CASE("checkpoint_rows: a function that returns a view of its input (flatten) gives a fresh output") {
  Tensor x = randn({4, 2, 3}).requires_grad_();
  auto flat = [](const Tensor& t) { return t.flatten(1); };
  for (int64_t chunks : {1, 2}) {
    Tensor y = checkpoint_rows(flat, x, {}, chunks);
    CHECK(y.impl()->storage() != x.impl()->storage());
    std::vector<Tensor> g = grad({(y * y).sum()}, {x});
    test::check_close(g[0], x.detach() * 2);
  }
}

TEST_CASE("checkpoint_rows: bad arguments and a function that mixes rows give errors that say so") {
  RowsBlock f = rows_block();
  Tensor x = randn({4, 3, 8, 8}).requires_grad_();
  CHECK_THROWS_WITH(checkpoint_rows(f, x, {f.w, f.b}, 0), Catch::Contains("chunks must be at least 1, got 0"));
  CHECK_THROWS_WITH(checkpoint_rows(f, randn({}), {}, 2), Catch::Contains("batch dimension"));
  auto mixes = [](const Tensor& t) { return t.sum({0}, /*keepdim=*/true); };
  CHECK_THROWS_WITH(checkpoint_rows(mixes, x, {}, 2),
                    Catch::Contains("fn must keep the batch dimension: a slice of 2 rows, shape [2, 3, 8, 8], gave [1, 3, 8, 8]"));
  // Differentiating its backward is refused (once-differentiable).
  Tensor y = checkpoint_rows(f, x, {f.w, f.b}, 2);
  std::vector<Tensor> g = grad({y.pow(2).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
  CHECK_THROWS(grad({g[0].sum()}, {f.w}));
}

TEST_CASE("checkpoint_rows without recompute: the re-run's gradients bit for bit, the slices' saves kept under the caller's hooks") {
  RowsBlock f = rows_block();
  for (bool channels_last : {false, true}) {
    INFO((channels_last ? "channels-last" : "NCHW"));
    manual_seed(5);
    Tensor x0 = randn({10, 3, 8, 8});
    if (channels_last) x0 = x0.contiguous(MemoryFormat::ChannelsLast);
    Tensor x = x0.detach().requires_grad_();
    Tensor probe = randn({10, 4, 4, 4});
    for (int64_t chunks : {1, 3, 10}) {
      INFO("chunks " << chunks);
      Tensor yr = checkpoint_rows(f, x, {f.w, f.b}, chunks);
      std::vector<Tensor> gr = grad({(yr * probe).sum()}, {x, f.w, f.b});
      // The same slices, differentiated from their forward graphs instead of a re-run.
      int fn_calls = 0;
      auto counted = [&](const Tensor& t) {
        ++fn_calls;
        return f(t);
      };
      Tensor yk = checkpoint_rows(counted, x, {f.w, f.b}, chunks, RowsOptions{.recompute = false});
      CHECK(v(yk) == v(yr));
      std::vector<Tensor> gk = grad({(yk * probe).sum()}, {x, f.w, f.b});
      CHECK(fn_calls == static_cast<int>(std::min<int64_t>(chunks, 10)));  // forward only
      for (size_t i = 0; i < gk.size(); ++i) CHECK(v(gk[i]) == v(gr[i]));
      CHECK((gk[0].suggest_memory_format() == MemoryFormat::ChannelsLast) == channels_last);
    }
  }
  // What the slices save goes through the hooks open at the call: masks only here (no lossy
  // codec), so relu's results are saved as 1-bit masks and the gradients stay exact; the node saves
  // nothing of its own.
  Tensor x = randn({6, 3, 8, 8});
  CompressStats st;
  Tensor y;
  {
    CompressSaved hooks(CompressOptions{.codec = SavedCodec::kNone});
    y = checkpoint_rows(f, x, {f.w, f.b}, 3, RowsOptions{.recompute = false});
    st = hooks.stats();
  }
  CHECK(st.masks == 3);  // one relu result per slice
  std::vector<Tensor> g = grad({y.sum()}, {f.w, f.b});
  std::vector<Tensor> want = grad({f(x).sum()}, {f.w, f.b});
  for (size_t i = 0; i < g.size(); ++i) test::check_close(g[i], want[i]);
}

TEST_CASE("checkpoint_rows without recompute: each slice's graph is freed by its backward, or kept by retain_graph") {
  RowsBlock f = rows_block();
  Tensor x = randn({8, 3, 8, 8}).requires_grad_();
  int hook_calls = 0;
  f.w.register_hook([&](const Tensor& g) {
    ++hook_calls;
    return g;
  });
  Tensor y = checkpoint_rows(f, x, {f.w, f.b}, 4, RowsOptions{.recompute = false});
  Tensor loss = y.sum();
  Tensor g1 = grad({loss}, {f.w}, {}, /*retain_graph=*/true)[0];
  Tensor g2 = grad({loss}, {f.w}, {}, /*retain_graph=*/false)[0];
  CHECK(v(g1) == v(g2));
  CHECK(hook_calls == 2);  // once per backward, on the sum
  CHECK_THROWS_WITH(grad({loss}, {f.w}), Catch::Contains("backward through the graph a second time"));
  // No grad mode: nothing is kept, the output is the plain one.
  NoGradGuard ng;
  Tensor z = checkpoint_rows(f, x, {f.w, f.b}, 4, RowsOptions{.recompute = false});
  CHECK_FALSE(z.requires_grad());
  test::check_close(z, f(x));
}

TEST_CASE("an early stop skips the kernel of the op whose input save is the last one needed") {
  // Ops save their inputs before their kernel runs, as PyTorch's do. The second linear's save of
  // tanh's output is the last tensor the graph needs, so an early-stopping recomputation ends there
  // and that linear's kernel never runs again; without the early stop it does.
  Tensor x = randn({3, 4}).requires_grad_();
  Tensor w1 = randn({5, 4}).requires_grad_(), w2 = randn({2, 5}).requires_grad_();
  auto fn = [&](const Tensor& h) { return linear(linear(h, w1).tanh(), w2); };
  for (bool early : {true, false}) {
    CheckpointOptions o;
    o.early_stop = early;
    Tensor y = checkpoint(fn, x, o);
    OpCounter count;
    std::vector<Tensor> g;
    {
      DispatchModeGuard guard(&count);
      g = grad({y.sum()}, {x, w1, w2});
    }
    CHECK(count.n["tanh"] == 1);
    CHECK(count.n["linear"] == (early ? 1 : 2));
    std::vector<Tensor> plain = grad({fn(x).sum()}, {x, w1, w2});
    for (size_t i = 0; i < g.size(); ++i) CHECK(g[i].to_vector<float>() == plain[i].to_vector<float>());
  }
}
