// Autocast (autograd/autocast.h) against PyTorch 2.15: the output dtype of every op of the fixture
// graft has, the CPU and CUDA op lists both ways, and the scope semantics (nesting, disabled
// scopes, the cast cache, backward, checkpoint recomputation, custom Functions, saved tensors).
// The fixture and the script that made it: tests/autograd/data/{autocast.json,make_autocast_fixture.py}.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using namespace graft::autograd;
using graft::autocast::AutocastGuard;
using graft::autocast::CastPolicy;
using graft::test::check_close;
using graft::test::Tolerance;
using json = nlohmann::json;

namespace {

const json& fixture() {
  static const json j = [] {
    std::ifstream in(GRAFT_AUTOCAST_FIXTURE);
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return j;
}

DType dtype_from(const std::string& s) {
  static const std::map<std::string, DType> m = {{"float32", kFloat32}, {"float64", kFloat64},
                                                 {"bfloat16", kBFloat16}, {"float16", kFloat16},
                                                 {"int64", kInt64}, {"bool", kBool}};
  auto it = m.find(s);
  REQUIRE(it != m.end());
  return it->second;
}

CastPolicy policy_from(const json& v) {
  if (v.is_null()) return CastPolicy::None;
  std::string s = v.get<std::string>();
  s = s.substr(0, s.find(' '));  // "fp32 (composite: ...)"
  if (s == "lower") return CastPolicy::Lower;
  if (s == "fp32") return CastPolicy::Fp32;
  REQUIRE(s == "promote");
  return CastPolicy::Promote;
}

Tensor input(const Shape& shape, DType d) { return rand(shape).to(d); }
Tensor idx(std::vector<int64_t> v, const Shape& s) { return tensor(v, s); }
Tensor mask4() { return tensor(std::vector<bool>{true, false, true, false}, {4}); }

// The fixture's ops (make_autocast_fixture.py's OPS, same shapes and argument order): each takes
// the dtypes of its floating inputs and returns its result's dtype.
using OpRun = std::function<DType(const std::vector<DType>&)>;
const std::map<std::string, OpRun>& graft_ops() {
  static const std::map<std::string, OpRun> ops = {
      {"matmul", [](auto d) { return matmul(input({2, 3}, d[0]), input({3, 4}, d[1])).dtype(); }},
      {"mm", [](auto d) { return mm(input({2, 3}, d[0]), input({3, 4}, d[1])).dtype(); }},
      {"bmm", [](auto d) { return bmm(input({2, 2, 3}, d[0]), input({2, 3, 4}, d[1])).dtype(); }},
      {"linear", [](auto d) { return linear(input({2, 3}, d[0]), input({4, 3}, d[1]), input({4}, d[2])).dtype(); }},
      {"conv2d",
       [](auto d) { return conv2d(input({1, 2, 5, 5}, d[0]), input({3, 2, 3, 3}, d[1]), input({3}, d[2])).dtype(); }},
      {"scaled_dot_product_attention",
       [](auto d) {
         return scaled_dot_product_attention(input({1, 2, 4, 8}, d[0]), input({1, 2, 4, 8}, d[1]),
                                             input({1, 2, 4, 8}, d[2]))
             .dtype();
       }},
      {"add", [](auto d) { return add(input({4}, d[0]), input({4}, d[1])).dtype(); }},
      {"mul", [](auto d) { return mul(input({4}, d[0]), input({4}, d[1])).dtype(); }},
      {"relu", [](auto d) { return relu(input({4}, d[0])).dtype(); }},
      {"gelu", [](auto d) { return gelu(input({4}, d[0])).dtype(); }},
      {"tanh", [](auto d) { return graft::tanh(input({4}, d[0])).dtype(); }},
      {"exp", [](auto d) { return graft::exp(input({4}, d[0])).dtype(); }},
      {"softmax", [](auto d) { return softmax(input({2, 4}, d[0]), -1).dtype(); }},
      {"log_softmax", [](auto d) { return log_softmax(input({2, 4}, d[0]), -1).dtype(); }},
      {"layer_norm",
       [](auto d) { return layer_norm(input({2, 4}, d[0]), {4}, input({4}, d[1]), input({4}, d[2])).dtype(); }},
      {"sum", [](auto d) { return sum(input({2, 4}, d[0])).dtype(); }},
      {"mean", [](auto d) { return mean(input({2, 4}, d[0])).dtype(); }},
      {"cat", [](auto d) { return cat({input({2, 3}, d[0]), input({2, 3}, d[1])}).dtype(); }},
      {"stack", [](auto d) { return stack({input({2, 3}, d[0]), input({2, 3}, d[1])}).dtype(); }},
      {"index_select", [](auto d) { return index_select(input({4, 3}, d[0]), 0, idx({2, 0}, {2})).dtype(); }},
      {"gather", [](auto d) { return gather(input({3, 4}, d[0]), 1, idx({0, 1, 2, 3, 1, 1}, {3, 2})).dtype(); }},
      {"embedding", [](auto d) { return embedding(input({10, 3}, d[0]), idx({1, 7, 7}, {3})).dtype(); }},
      {"cross_entropy",
       [](auto d) { return cross_entropy(input({3, 5}, d[0]), idx({0, 4, 2}, {3}), input({5}, d[1])).dtype(); }},
      {"nll_loss", [](auto d) { return nll_loss(input({3, 5}, d[0]), idx({0, 4, 2}, {3}), input({5}, d[1])).dtype(); }},
      {"mse_loss", [](auto d) { return mse_loss(input({4}, d[0]), input({4}, d[1])).dtype(); }},
      {"max_pool2d", [](auto d) { return max_pool2d(input({1, 1, 4, 4}, d[0]), {2, 2}).dtype(); }},
      {"avg_pool2d", [](auto d) { return avg_pool2d(input({1, 1, 4, 4}, d[0]), {2, 2}).dtype(); }},
      {"dropout", [](auto d) { return nn::functional::dropout(input({4}, d[0]), 0.5, false).dtype(); }},
      {"where", [](auto d) { return where(mask4(), input({4}, d[0]), input({4}, d[1])).dtype(); }},
      // graft's masked_fill takes a Scalar value: the fixture's mixed case (a 0-d tensor value)
      // has no graft form, so only the single-input cases run.
      {"masked_fill",
       [](auto d) {
         REQUIRE(d.size() >= 1);
         return masked_fill(input({4}, d[0]), mask4(), 0.5).dtype();
       }},
  };
  return ops;
}

// Fixture ops graft has no public function for (yet). Each must stay absent from graft's policy
// table, so the op that adds one also adds its case above.
const std::set<std::string> kNotInGraft = {"addmm", "baddbmm", "conv1d", "conv_transpose2d", "batch_norm",
                                           "binary_cross_entropy_with_logits"};
// Fixture ops graft has as a composition of declared ops rather than one declared function (no
// policy of their own, as in PyTorch).
const std::set<std::string> kNotDeclared = {"dropout"};
// Fixture ops whose mixed inputs graft's op does not take (the single-dtype cases still run).
const std::set<std::string> kNoMixedForm = {"masked_fill"};

// How many floating tensors each fixture op takes (the rest take one).
size_t floating_inputs(const std::string& key) {
  static const std::map<std::string, size_t> n = {
      {"matmul", 2}, {"mm", 2}, {"bmm", 2}, {"linear", 3}, {"conv2d", 3}, {"scaled_dot_product_attention", 3},
      {"add", 2}, {"mul", 2}, {"layer_norm", 3}, {"cat", 2}, {"stack", 2}, {"cross_entropy", 2},
      {"nll_loss", 2}, {"mse_loss", 2}, {"where", 2}};
  auto it = n.find(key);
  return it == n.end() ? 1 : it->second;
}

// PyTorch's name for a graft op in its autocast lists, where they differ.
std::string torch_list_name(const std::string& graft_name, const std::string& device) {
  if (graft_name == "cross_entropy" && device == "cpu") return "cross_entropy_loss";
  if (graft_name == "_sdpa_flash") return "_scaled_dot_product_flash_attention";
  std::string base = graft_name.substr(0, graft_name.find('.'));
  return base;
}

// Counts the _to_copy calls (the casts) on each source tensor.
struct CastCounter final : DispatchMode {
  std::map<const TensorImpl*, int> casts;
  int total = 0;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (op.schema.name == "_to_copy") {
      ++total;
      ++casts[std::get<Tensor>(args[0]).impl()];
    }
    return next(args);
  }
};

}  // namespace

TEST_CASE("every op of PyTorch's fixture graft has gives PyTorch's dtype under CPU bfloat16 autocast") {
  const json& ops = fixture()["ops"];
  size_t ran = 0;
  for (const auto& [key, rec] : ops.items()) {
    INFO("op " << key);
    auto it = graft_ops().find(key);
    if (it == graft_ops().end()) {
      CHECK(kNotInGraft.count(key) == 1);
      CHECK_FALSE(autocast::op_policy(key).has_value());
      continue;
    }
    const OpRun& run = it->second;
    size_t n = floating_inputs(key);
    AutocastGuard ac(kCPU, kBFloat16);
    CHECK(dtype_name(run(std::vector<DType>(n, kFloat32))) == rec["float32"].get<std::string>());
    CHECK(dtype_name(run(std::vector<DType>(n, kBFloat16))) == rec["bfloat16"].get<std::string>());
    if (!rec["mixed"].is_null() && !kNoMixedForm.count(key)) {
      std::vector<DType> mixed(n, kFloat32);
      mixed[0] = kBFloat16;
      INFO("mixed inputs: " << rec["mixed_inputs"].get<std::string>());
      CHECK(dtype_name(run(mixed)) == rec["mixed"].get<std::string>());
    }
    ++ran;
  }
  CHECK(ran == graft_ops().size());  // every case above is a fixture op
}

TEST_CASE("graft's policy of each fixture op is PyTorch's on CPU and on CUDA") {
  for (const auto& [key, rec] : fixture()["ops"].items()) {
    if (kNotInGraft.count(key)) continue;
    INFO("op " << key);
    if (kNotDeclared.count(key)) {
      CHECK_FALSE(autocast::op_policy(key).has_value());
      CHECK(rec["policy"]["cpu"].is_null());
      CHECK(rec["policy"]["cuda"].is_null());
      continue;
    }
    auto p = autocast::op_policy(key);
    REQUIRE(p.has_value());
    CHECK(autocast::cast_policy_name(p->cpu) == std::string(autocast::cast_policy_name(policy_from(rec["policy"]["cpu"]))));
    const json& cuda = rec["policy"]["cuda"];
    if (cuda.is_string() && cuda.get<std::string>().find("composite") != std::string::npos) {
      // Not listed for CUDA in PyTorch either: it decomposes into listed ops, and so does graft's.
      CHECK(p->cuda == CastPolicy::None);
      continue;
    }
    CHECK(autocast::cast_policy_name(p->cuda) == std::string(autocast::cast_policy_name(policy_from(cuda))));
  }
}

TEST_CASE("PyTorch's CPU and CUDA autocast lists and graft's policies agree both ways") {
  const json& lists = fixture()["lists"];
  const std::map<std::string, CastPolicy> names = {
      {"lower", CastPolicy::Lower}, {"fp32", CastPolicy::Fp32}, {"promote", CastPolicy::Promote}};
  for (const std::string device : {"cpu", "cuda"}) {
    DeviceType type = device == "cpu" ? DeviceType::CPU : DeviceType::CUDA;
    std::map<std::string, CastPolicy> listed;
    for (const auto& [pol, ops] : lists[device].items())
      for (const auto& op : ops) listed[op.get<std::string>()] = names.at(pol);
    // Every graft function with a policy on this device is in PyTorch's list with that policy.
    for (const auto& np : autocast::op_policies()) {
      CastPolicy mine = np.policy.on(type);
      if (mine == CastPolicy::None) continue;
      std::string name = torch_list_name(std::string(np.name), device);
      INFO(device << ": " << np.name << " (PyTorch " << name << ")");
      REQUIRE(listed.count(name) == 1);
      CHECK(listed[name] == mine);
    }
    // Every listed op graft has carries the listed policy.
    size_t found = 0;
    for (const auto& [name, pol] : listed) {
      auto p = autocast::op_policy(name == "cross_entropy_loss" ? "cross_entropy" : name);
      if (!p) continue;
      INFO(device << ": " << name);
      CHECK(p->on(type) == pol);
      ++found;
    }
    CHECK(found >= (device == "cpu" ? 9u : 20u));  // the lists did match graft's names
  }
}

TEST_CASE("the CUDA float16 decisions give the dtypes PyTorch's CUDA lists imply") {
  // No CUDA kernel runs: the decision function is what a CUDA op calls, so this pins the CUDA
  // list's effect on the dtypes wherever the tests run.
  for (const auto& [key, rec] : fixture()["cuda_fp16"].items()) {
    if (kNotInGraft.count(key) || kNotDeclared.count(key)) continue;
    INFO("op " << key);
    auto p = autocast::op_policy(key);
    REQUIRE(p.has_value());
    if (p->cuda == CastPolicy::None) continue;  // runs on what its inputs are: the op's own rule
    size_t n = floating_inputs(key);
    auto decide = [&](std::vector<DType> in) { return dtype_name(*autocast::cast_dtype(p->cuda, kFloat16, in)); };
    CHECK(decide(std::vector<DType>(n, kFloat32)) == rec["float32"].get<std::string>());
    CHECK(decide(std::vector<DType>(n, kFloat16)) == rec["float16"].get<std::string>());
    if (!rec["mixed"].is_null()) {
      std::vector<DType> mixed(n, kFloat32);
      mixed[0] = kFloat16;
      CHECK(decide(mixed) == rec["mixed"].get<std::string>());
    }
  }
  // The promote rule itself: float64 is ignored (never cast), float32 wins, the lower type alone stays.
  CHECK(*autocast::cast_dtype(CastPolicy::Promote, kFloat16, {kFloat16, kFloat64}) == kFloat16);
  CHECK(*autocast::cast_dtype(CastPolicy::Promote, kBFloat16, {kBFloat16, kFloat32}) == kFloat32);
  CHECK_THROWS_WITH(autocast::cast_dtype(CastPolicy::Promote, kBFloat16, {kFloat16, kBFloat16}, "cat"),
                    Catch::Contains("cat: under bfloat16 autocast its inputs are float16 and bfloat16"));
  CHECK_FALSE(autocast::cast_dtype(CastPolicy::None, kFloat16, {kFloat32}).has_value());
}

TEST_CASE("autocast state: defaults, nesting, a disabled inner scope and other device types") {
  CHECK_FALSE(autocast::is_autocast_enabled(DeviceType::CPU));
  CHECK_FALSE(autocast::is_autocast_enabled(DeviceType::CUDA));
  CHECK(autocast::get_autocast_dtype(DeviceType::CPU) == kBFloat16);
  CHECK(autocast::get_autocast_dtype(DeviceType::CUDA) == kFloat16);
  Tensor a = rand({2, 3}), b = rand({3, 4});
  {
    AutocastGuard outer(kCPU, kBFloat16);
    CHECK(autocast::is_autocast_enabled(DeviceType::CPU));
    CHECK(mm(a, b).dtype() == kBFloat16);
    {
      AutocastGuard inner(kCPU, kFloat16);
      CHECK(autocast::get_autocast_dtype(DeviceType::CPU) == kFloat16);
      CHECK(mm(a, b).dtype() == kFloat16);
      {
        AutocastGuard off(kCPU, false);  // keeps the dtype, turns casting off
        CHECK_FALSE(autocast::is_autocast_enabled(DeviceType::CPU));
        CHECK(autocast::get_autocast_dtype(DeviceType::CPU) == kFloat16);
        CHECK(mm(a, b).dtype() == kFloat32);
        AutocastGuard again(kCPU);  // re-enabled with the current dtype
        CHECK(mm(a, b).dtype() == kFloat16);
      }
      CHECK(mm(a, b).dtype() == kFloat16);
    }
    CHECK(autocast::get_autocast_dtype(DeviceType::CPU) == kBFloat16);
    CHECK(mm(a, b).dtype() == kBFloat16);
  }
  CHECK_FALSE(autocast::is_autocast_enabled(DeviceType::CPU));
  CHECK(mm(a, b).dtype() == kFloat32);
  {
    // A CUDA scope does not touch CPU ops.
    AutocastGuard cuda(kCUDA, kBFloat16);
    CHECK(autocast::is_autocast_enabled(DeviceType::CUDA));
    CHECK(autocast::get_autocast_dtype(DeviceType::CUDA) == kBFloat16);
    CHECK(mm(a, b).dtype() == kFloat32);
  }
  CHECK(autocast::get_autocast_dtype(DeviceType::CUDA) == kFloat16);
  CHECK_THROWS_WITH(AutocastGuard(kCPU, kFloat32),
                    Catch::Contains("AutocastGuard: autocast on cpu runs ops in bfloat16 or float16, got float32"));
}

TEST_CASE("autocast is per thread") {
  AutocastGuard ac(kCPU, kBFloat16);
  bool other_enabled = true;
  DType other_dtype = kBFloat16;
  std::thread t([&] {
    other_enabled = autocast::is_autocast_enabled(DeviceType::CPU);
    other_dtype = mm(rand({2, 2}), rand({2, 2})).dtype();
  });
  t.join();
  CHECK_FALSE(other_enabled);
  CHECK(other_dtype == kFloat32);
}

TEST_CASE("autocast casts only eligible tensors: float64 and integers pass through") {
  AutocastGuard ac(kCPU, kBFloat16);
  CHECK(mm(rand({2, 3}, dtype(kFloat64)), rand({3, 2}, dtype(kFloat64))).dtype() == kFloat64);
  // float16 is eligible: a Lower op casts it to the scope's dtype (as PyTorch).
  CHECK(mm(rand({2, 3}).to(kFloat16), rand({3, 2})).dtype() == kBFloat16);
  // fp32 ops leave float64 alone; targets stay int64.
  CHECK(mse_loss(rand({4}, dtype(kFloat64)), rand({4}, dtype(kFloat64))).dtype() == kFloat64);
  CHECK(nll_loss(rand({3, 5}).to(kBFloat16), tensor(std::vector<int64_t>{0, 4, 2}, {3})).dtype() == kFloat32);
  // Promote ignores float64 for the decision, and the op's own promotion then widens.
  CHECK(cat({rand({2}, dtype(kFloat64)), rand({2}).to(kBFloat16)}).dtype() == kFloat64);
  CHECK_THROWS_WITH(cat({rand({2}).to(kFloat16), rand({2}).to(kBFloat16)}),
                    Catch::Contains("cat: under bfloat16 autocast its inputs are"));
}

namespace {
// Records, for each dispatched op, whether autocast was active and the dtype of its first tensor.
struct ActiveRecorder final : DispatchMode {
  std::vector<std::tuple<std::string, bool, DType>> calls;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    const Tensor* t = args.empty() ? nullptr : std::get_if<Tensor>(&args[0]);
    calls.emplace_back(op.schema.name, autocast::detail::active(), t && t->defined() ? t->dtype() : kBool);
    return next(args);
  }
  std::pair<bool, DType> first(const std::string& name) const {
    for (const auto& [n, a, d] : calls)
      if (n == name) return {a, d};
    FAIL("no call of " << name);
    return {false, kBool};
  }
};
}  // namespace

TEST_CASE("a listed op runs its inner ops with autocast suspended; an unlisted composite does not") {
  AutocastGuard ac(kCPU, kBFloat16);
  {
    // cross_entropy is fp32 on CPU: its log_softmax runs on the float32 cast, autocast suspended.
    ActiveRecorder rec;
    DispatchModeGuard g(&rec);
    CHECK(cross_entropy(rand({3, 5}).to(kBFloat16), tensor(std::vector<int64_t>{0, 4, 2}, {3})).dtype() == kFloat32);
    CHECK(rec.first("log_softmax") == std::pair<bool, DType>{false, kFloat32});
  }
  {
    // The composed attention is not listed: its matmul casts to bfloat16 and its softmax, not
    // listed on CPU, runs on that with autocast still active.
    ActiveRecorder rec;
    DispatchModeGuard g(&rec);
    Tensor q = rand({2, 4, 8});
    CHECK(scaled_dot_product_attention_math(q, q, q).dtype() == kBFloat16);
    CHECK(rec.first("softmax") == std::pair<bool, DType>{true, kBFloat16});
  }
  CHECK(autocast::detail::active());  // every op restored the state it suspended
}

TEST_CASE("the cast cache casts a parameter once per scope and never caches non-leaves") {
  Tensor w = rand({4, 4}, requires_grad());
  Tensor x = rand({2, 4}).to(kBFloat16), y = rand({2, 4}).to(kBFloat16);
  CastCounter count;
  Tensor out1, out2;
  {
    DispatchModeGuard g(&count);
    AutocastGuard ac(kCPU, kBFloat16);
    out1 = mm(x, w);
    out2 = mm(y, w);
    CHECK(count.casts[w.impl()] == 1);
    CHECK(autocast::cast_cache_size() == 1);
    {
      AutocastGuard nested(kCPU, kBFloat16);  // an inner scope shares the outer one's cache
      mm(x, w);
      CHECK(count.casts[w.impl()] == 1);
    }
    CHECK(autocast::cast_cache_size() == 1);
    // A non-leaf is a new tensor each forward: cast at each use.
    Tensor h = w * 2;
    mm(x, h);
    mm(y, h);
    CHECK(count.casts[h.impl()] == 2);
    // A float32 input that does not require grad is not cached either.
    Tensor c = rand({4, 4});
    mm(x, c);
    mm(x, c);
    CHECK(count.casts[c.impl()] == 2);
  }
  CHECK(autocast::cast_cache_size() == 0);  // cleared with the outermost enabled scope
  {
    DispatchModeGuard g(&count);
    AutocastGuard ac(kCPU, kBFloat16);
    mm(x, w);
    CHECK(count.casts[w.impl()] == 2);  // a new scope casts again
  }
  // Both uses reach w's gradient through the one cast: float32, the sum of both products.
  sum(out1.to(kFloat32) + out2.to(kFloat32)).backward();
  REQUIRE(w.grad().defined());
  CHECK(w.grad().dtype() == kFloat32);
  Tensor expect = mm(transpose(x.to(kFloat32) + y.to(kFloat32), 0, 1), ones({2, 4}));
  check_close(w.grad(), expect, Tolerance::within(2e-2));
}

TEST_CASE("the cast cache recasts after an in-place update and after a cast made without history") {
  Tensor w = rand({4, 4}, requires_grad());
  Tensor x = rand({2, 4}).to(kBFloat16);
  CastCounter count;
  DispatchModeGuard g(&count);
  AutocastGuard ac(kCPU, kBFloat16);
  {
    NoGradGuard ng;
    mm(x, w);  // cast without history
  }
  Tensor out = mm(x, w);  // must not reuse it: w would get no gradient
  CHECK(count.casts[w.impl()] == 2);
  {
    NoGradGuard ng;
    mm(x, w);  // a recorded cast serves no-grad use too
    CHECK(count.casts[w.impl()] == 2);
    w.mul_(2);  // an optimizer step inside the scope
  }
  Tensor out2 = mm(x, w);
  CHECK(count.casts[w.impl()] == 3);
  sum(out.to(kFloat32)).backward();
  CHECK(w.grad().defined());
}

TEST_CASE("backward runs each op in its forward's dtype, without autocast, and saved tensors are the cast ones") {
  Tensor w = rand({4, 3}, requires_grad()), b = rand({4}, requires_grad());
  Tensor x = rand({2, 3}, requires_grad());
  std::vector<DType> saved;
  Tensor loss, h;
  {
    SavedTensorsHooks hooks([&](const Tensor& t) -> Packed { saved.push_back(t.dtype()); return Packed{t}; },
                            [](const Packed& p) { return std::any_cast<Tensor>(p); });
    AutocastGuard ac(kCPU, kBFloat16);
    h = linear(x, w, b);
    CHECK(h.dtype() == kBFloat16);
    loss = mse_loss(h, zeros({2, 4}));
  }
  CHECK(loss.dtype() == kFloat32);
  // linear saved its bfloat16 input and weight; the loss's ops computed in float32.
  REQUIRE(saved.size() >= 2);
  CHECK(saved[0] == kBFloat16);
  CHECK(saved[1] == kBFloat16);
  DType grad_of_h = kFloat32;
  h.register_hook([&](const Tensor& g) {
    grad_of_h = g.dtype();
    return Tensor();
  });
  loss.backward();
  CHECK(grad_of_h == kBFloat16);  // linear's backward ran in bfloat16
  CHECK(w.grad().dtype() == kFloat32);
  CHECK(b.grad().dtype() == kFloat32);
}

namespace {
// y = x @ w; records what autocast looked like inside forward and backward.
struct MatmulFn : Function<MatmulFn> {
  static inline bool forward_autocast = false, backward_autocast = true;
  static inline DType grad_dtype = kFloat32;
  static Tensor forward(FunctionCtx* ctx, const Tensor& x, const Tensor& w) {
    forward_autocast = autocast::is_autocast_enabled(DeviceType::CPU);
    Tensor y = mm(x, w);  // cast by autocast inside forward, as in PyTorch
    ctx->save_for_backward({x, w});
    return y;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    backward_autocast = autocast::is_autocast_enabled(DeviceType::CPU);
    grad_dtype = g[0].dtype();
    // Autocast is off here, so mm would refuse bfloat16 with float32: cast by hand.
    Tensor g32 = g[0].to(kFloat32);
    auto s = ctx->saved_tensors();
    return {mm(g32, transpose(s[1], 0, 1)), mm(transpose(s[0], 0, 1), g32)};
  }
};
}  // namespace

TEST_CASE("a custom Function under autocast: forward ops are cast, backward runs without autocast") {
  Tensor x = rand({2, 3}, requires_grad()), w = rand({3, 4}, requires_grad());
  Tensor y;
  {
    AutocastGuard ac(kCPU, kBFloat16);
    y = MatmulFn::apply(x, w);
  }
  CHECK(MatmulFn::forward_autocast);
  CHECK(y.dtype() == kBFloat16);
  {
    AutocastGuard ac(kCPU, kBFloat16);  // backward called inside the scope still runs without it
    sum(y.to(kFloat32)).backward();
  }
  CHECK_FALSE(MatmulFn::backward_autocast);
  CHECK(MatmulFn::grad_dtype == kBFloat16);
  CHECK(x.grad().dtype() == kFloat32);
  CHECK(w.grad().dtype() == kFloat32);
  check_close(x.grad(), mm(ones({2, 4}), transpose(w.detach(), 0, 1)), Tolerance::within(2e-2));
}

namespace {
struct Mlp {
  Tensor w1 = randn({16, 8}) * 0.3, b1 = randn({16}) * 0.1, w2 = randn({4, 16}) * 0.3, b2 = randn({4}) * 0.1;
  Mlp() {
    for (Tensor* p : {&w1, &b1, &w2, &b2}) p->requires_grad_(true);
  }
  std::vector<Tensor> params() { return {w1, b1, w2, b2}; }
  Tensor layer1(const Tensor& x) { return relu(linear(x, w1, b1)); }
  Tensor layer2(const Tensor& h) { return linear(h, w2, b2); }
};

std::vector<Tensor> grads_of(Mlp& m, const Tensor& x, const Tensor& t, bool autocast_on, bool checkpointed) {
  for (Tensor& p : m.params()) p.mutable_grad() = Tensor();
  Tensor loss;
  {
    AutocastGuard ac(kCPU, kBFloat16, autocast_on);
    Tensor h = checkpointed ? checkpoint([&](const Tensor& in) { return m.layer1(in); }, x) : m.layer1(x);
    loss = cross_entropy(m.layer2(h), t);
  }
  CHECK(loss.dtype() == kFloat32);
  loss.backward();
  std::vector<Tensor> g;
  for (Tensor& p : m.params()) g.push_back(p.grad());
  return g;
}
}  // namespace

TEST_CASE("an MLP's gradients under bfloat16 autocast are float32 and close to float32's") {
  manual_seed(3);
  Mlp m;
  Tensor x = randn({32, 8}), t = randint(0, 4, {32});
  auto ref = grads_of(m, x, t, false, false);
  auto ac = grads_of(m, x, t, true, false);
  for (size_t i = 0; i < ref.size(); ++i) {
    INFO("parameter " << i);
    CHECK(ac[i].dtype() == kFloat32);
    // bfloat16 keeps 8 bits: products of bf16-rounded operands, accumulated in float.
    check_close(ac[i], ref[i], Tolerance{.rtol = 1.6e-2, .atol = 1e-3});
  }
}

TEST_CASE("checkpoint recomputation under autocast replays the forward's autocast state") {
  manual_seed(4);
  Mlp m;
  Tensor x = randn({16, 8}), t = randint(0, 4, {16});
  auto plain = grads_of(m, x, t, true, false);
  // Recomputation runs in the engine (autocast off); without the forward's state it would save
  // float32 tensors where the forward saved bfloat16, and the determinism check would refuse.
  auto ckpt = grads_of(m, x, t, true, true);
  for (size_t i = 0; i < plain.size(); ++i) {
    INFO("parameter " << i);
    check_close(ckpt[i], plain[i], Tolerance::exact());
  }
}
