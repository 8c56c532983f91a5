// GradScaler against PyTorch 2.15's torch.amp.GradScaler (tests/optim/data/grad_scaler.json, made by
// make_grad_scaler_fixture.py: the same protocol is replayed here), and its two ops.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graft.h"
#include "ops/ops.h"

using namespace graft;
using json = nlohmann::json;

namespace {

const json& fixture() {
  static const json j = [] {
    std::ifstream in(std::string(GRAFT_OPTIM_DATA_DIR) + "/grad_scaler.json");
    REQUIRE(in.good());
    return json::parse(in);
  }();
  return j;
}

double number(const json& v) {
  if (v.is_number()) return v.get<double>();
  const std::string s = v.get<std::string>();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  REQUIRE(s == "nan");
  return std::numeric_limits<double>::quiet_NaN();
}

// The fixture's g(i): exact in float32, and so is its product with a power-of-two scale.
std::vector<double> g_of(int64_t i) { return {(i % 7 + 1) / 8.0, -0.25, (i % 3 - 1) / 16.0, 0.5}; }

std::vector<float> values(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }
std::vector<float> as_floats(const json& a) {
  std::vector<float> out;
  for (const auto& v : a) out.push_back(static_cast<float>(v.get<double>()));
  return out;
}

// One fixture step: scale(ones) as a loss would be, grad = scale * g (or the record's bad grad),
// step, update. Returns whether the optimizer stepped.
bool fixture_step(optim::GradScaler& scaler, optim::SGD& opt, Tensor& p, const std::vector<double>& grad) {
  scaler.scale(ones({}));
  const double s = scaler.get_scale();
  std::vector<float> scaled;
  for (double x : grad) scaled.push_back(static_cast<float>(s * x));
  p.mutable_grad() = tensor(scaled, {4});
  const bool stepped = scaler.step(opt);
  scaler.update();
  return stepped;
}

}  // namespace

TEST_CASE("GradScaler replays PyTorch's scales, skipped steps, tracker and SGD parameters") {
  const json& fx = fixture();
  const double lr = fx["lr"].get<double>();
  for (const json& seq : fx["sequences"]) {
    const int64_t G = seq["growth_interval"].get<int64_t>(), steps = seq["steps"].get<int64_t>();
    INFO("growth_interval " << G << " over " << steps << " steps");
    std::map<int64_t, const json*> records;
    for (const json& r : seq["records"]) records[r["step"].get<int64_t>()] = &r;

    Tensor p = tensor(as_floats(fx["init_param"]), {4}).requires_grad_();
    optim::SGD opt({p}, lr);
    optim::GradScaler scaler({.growth_interval = G});
    int64_t checked = 0;
    for (int64_t i = 0; i < steps; ++i) {
      auto it = records.find(i);
      std::vector<double> grad = g_of(i);
      if (it != records.end()) {
        grad.clear();
        for (const json& v : (*it->second)["grad"]) grad.push_back(number(v));
      }
      const double before_scale = scaler.get_scale();
      const auto before = values(p);
      const bool stepped = fixture_step(scaler, opt, p, grad);
      CHECK(stepped == (values(p) != before));
      if (it == records.end()) {
        // Compact sequences list every skipped step and every change of scale.
        REQUIRE(stepped);
        REQUIRE(scaler.get_scale() == before_scale);
        continue;
      }
      const json& r = *it->second;
      INFO("step " << i);
      CHECK(before_scale == r["scale_before"].get<double>());
      CHECK(!stepped == r["skipped"].get<bool>());
      CHECK(scaler.get_scale() == r["scale_after"].get<double>());
      CHECK(scaler.get_growth_tracker() == r["growth_tracker_after"].get<int64_t>());
      CHECK(values(p) == as_floats(r["param_after"]));  // bit for bit
      ++checked;
    }
    CHECK(checked == static_cast<int64_t>(records.size()));
    CHECK(values(p) == as_floats(seq["final_param"]));
    const auto sd = scaler.state_dict();
    REQUIRE(sd.size() == seq["state_dict"].size());
    for (const auto& [k, v] : seq["state_dict"].items()) {
      INFO("state_dict key " << k);
      REQUIRE(sd.count(k));
      CHECK(sd.at(k) == v.get<double>());
    }
  }
}

TEST_CASE("GradScaler state_dict round trip continues the same sequence") {
  auto run = [](optim::GradScaler& s, optim::SGD& opt, Tensor& p, int64_t from, int64_t to) {
    std::vector<double> scales;
    for (int64_t i = from; i < to; ++i) {
      auto g = g_of(i);
      if (i % 5 == 4) g[1] = std::numeric_limits<double>::infinity();
      fixture_step(s, opt, p, g);
      scales.push_back(s.get_scale());
    }
    return scales;
  };
  Tensor p = tensor({1.0, -2.0, 0.5, 3.0}).requires_grad_();
  optim::SGD opt({p}, 0.1);
  optim::GradScaler a({.init_scale = 1024, .growth_factor = 4, .backoff_factor = 0.25, .growth_interval = 3});
  run(a, opt, p, 0, 7);
  const auto sd = a.state_dict();
  CHECK(sd.at("growth_factor") == 4);
  CHECK(sd.at("backoff_factor") == 0.25);
  CHECK(sd.at("growth_interval") == 3);

  optim::GradScaler b;  // defaults, replaced by the state dict before its scale exists
  b.load_state_dict(sd);
  CHECK(b.get_scale() == a.get_scale());
  CHECK(b.get_growth_tracker() == a.get_growth_tracker());
  CHECK(b.state_dict() == sd);
  Tensor q = p.detach().clone().requires_grad_();
  optim::SGD opt_b({q}, 0.1);
  CHECK(run(b, opt_b, q, 7, 20) == run(a, opt, p, 7, 20));
  CHECK(values(q) == values(p));

  // Loading into a scaler whose scale already exists overwrites it in place.
  b.load_state_dict({{"scale", 8.0}, {"growth_factor", 2.0}, {"backoff_factor", 0.5}, {"growth_interval", 10.0},
                     {"_growth_tracker", 3.0}});
  CHECK(b.get_scale() == 8.0);
  CHECK(b.get_growth_tracker() == 3);
  CHECK_THROWS_WITH(b.load_state_dict({}), Catch::Contains("state dict is empty"));
  CHECK_THROWS_WITH(b.load_state_dict({{"scale", 1.0}}), Catch::Contains("missing key 'growth_factor'"));
}

TEST_CASE("a disabled GradScaler is a pass-through") {
  Tensor p = tensor({1.0, 2.0}).requires_grad_();
  optim::SGD opt({p}, 0.5);
  optim::GradScaler s({.enabled = false});
  Tensor loss = (p * p).sum();
  CHECK(s.scale(loss).is_same(loss));
  loss.backward();
  s.unscale_(opt);
  s.unscale_(opt);  // no stage checks either
  CHECK(values(p.grad()) == std::vector<float>{2, 4});
  CHECK(s.step(opt));
  CHECK(values(p) == std::vector<float>{0, 0});
  s.update();
  CHECK(s.get_scale() == 1.0);
  CHECK(s.state_dict().empty());
  s.load_state_dict({});
  CHECK_FALSE(s.is_enabled());
}

TEST_CASE("GradScaler: unscale_ before clipping, then step does not unscale again") {
  Tensor p = tensor({1.0, -2.0}).requires_grad_();
  optim::SGD opt({p}, 1.0);
  optim::GradScaler s({.init_scale = 256});
  Tensor loss = (p * p).sum();  // grad 2p
  s.scale(loss).backward();
  CHECK(values(p.grad()) == std::vector<float>{512, -1024});
  s.unscale_(opt);
  CHECK(values(p.grad()) == std::vector<float>{2, -4});
  p.mutable_grad() = ops::mul(p.grad(), 0.5);  // "clipping"
  CHECK(s.step(opt));
  CHECK(values(p) == std::vector<float>{0, 0});
  s.update();
  CHECK(s.get_scale() == 256);
  CHECK(s.get_growth_tracker() == 1);
}

TEST_CASE("GradScaler's errors say what was called out of order, in PyTorch's words") {
  Tensor p = tensor({1.0}).requires_grad_();
  optim::SGD opt({p}, 0.1);
  optim::GradScaler s;
  CHECK_THROWS_WITH(s.step(opt), Catch::Contains("step()") && Catch::Contains("scale(loss)"));
  s.scale((p * p).sum()).backward();
  s.unscale_(opt);
  CHECK_THROWS_WITH(s.unscale_(opt),
                    Catch::Contains("unscale_() has already been called on this optimizer since the last update()"));
  s.step(opt);
  CHECK_THROWS_WITH(s.unscale_(opt), Catch::Contains("unscale_() is being called after step()"));
  CHECK_THROWS_WITH(s.step(opt), Catch::Contains("step() has already been called since the last update()"));
  s.update();
  s.unscale_(opt);  // a new step may unscale again

  optim::GradScaler fresh;
  fresh.scale(ones({}));
  CHECK_THROWS_WITH(fresh.update(), Catch::Contains("no inf checks were recorded prior to update()"));
  Tensor none = tensor({1.0}).requires_grad_();
  optim::SGD no_grads({none}, 0.1);
  CHECK_THROWS_WITH(fresh.step(no_grads), Catch::Contains("no inf checks were recorded for this optimizer"));

  Tensor h = tensor({1.0}, dtype(kFloat16)).requires_grad_();
  optim::SGD half_opt({h}, 0.1);
  h.mutable_grad() = ones({1}, dtype(kFloat16));
  optim::GradScaler hs;
  hs.scale(ones({}));
  CHECK_THROWS_WITH(hs.unscale_(half_opt), Catch::Contains("FP16 gradients"));
  CHECK_THROWS_WITH(optim::GradScaler({.growth_factor = 1.0}), Catch::Contains("growth factor must be > 1.0"));
  CHECK_THROWS_WITH(optim::GradScaler({.backoff_factor = 1.0}), Catch::Contains("backoff factor must be < 1.0"));
}

TEST_CASE("_amp_non_finite_check_and_unscale_ in every floating dtype") {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO("dtype " << dt);
    Tensor inv = scalar_tensor(0.125, dtype(kFloat32));
    Tensor found = zeros({});
    // 1500 elements: several of the 16-bit chunks, and a bad element only in the last one.
    std::vector<float> v(1500);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 37) - 18) * 8.0f;
    Tensor x = tensor(v, {1500}, dtype(dt));
    ops::_amp_non_finite_check_and_unscale_(x, found, inv);
    CHECK(found.item<float>() == 0.0f);
    auto got = values(x);
    for (size_t i = 0; i < v.size(); ++i) REQUIRE(got[i] == v[i] * 0.125f);
    v[1400] = dt == kFloat64 ? nan : inf;
    x = tensor(v, {1500}, dtype(dt));
    ops::_amp_non_finite_check_and_unscale_(x, found, inv);
    CHECK(found.item<float>() == 1.0f);
    CHECK(values(x)[0] == v[0] * 0.125f);  // unscaled even when an element is bad
    // found_inf is never cleared: a later clean gradient leaves it at 1.
    Tensor clean = ones({3}, dtype(dt));
    ops::_amp_non_finite_check_and_unscale_(clean, found, inv);
    CHECK(found.item<float>() == 1.0f);
    // A strided gradient is unscaled in place.
    Tensor t = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, dtype(dt)).t();
    Tensor f2 = zeros({});
    ops::_amp_non_finite_check_and_unscale_(t, f2, inv);
    CHECK(values(t.contiguous()) == std::vector<float>{0.125f, 0.5f, 0.25f, 0.625f, 0.375f, 0.75f});
  }
  Tensor x = ones({2});
  Tensor bad_found = zeros({}, dtype(kFloat64)), inv = scalar_tensor(1.0, dtype(kFloat32));
  CHECK_THROWS_WITH(ops::_amp_non_finite_check_and_unscale_(x, bad_found, inv),
                    Catch::Contains("_amp_non_finite_check_and_unscale_") && Catch::Contains("found_inf"));
  Tensor found = zeros({}), inv2 = ones({2});
  CHECK_THROWS_WITH(ops::_amp_non_finite_check_and_unscale_(x, found, inv2),
                    Catch::Contains("inv_scale") && Catch::Contains("1-element"));
}

TEST_CASE("_amp_update_scale_ follows PyTorch's growth and backoff") {
  Tensor scale = scalar_tensor(4.0, dtype(kFloat32)), tracker = zeros({}, dtype(kInt32));
  Tensor clean = zeros({}), bad = ones({});
  ops::_amp_update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
  CHECK(scale.item<float>() == 4.0f);
  CHECK(tracker.to(kInt64).item<int64_t>() == 1);
  ops::_amp_update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
  CHECK(scale.item<float>() == 8.0f);
  CHECK(tracker.to(kInt64).item<int64_t>() == 0);
  ops::_amp_update_scale_(scale, tracker, clean, 2.0, 0.5, 2);
  ops::_amp_update_scale_(scale, tracker, bad, 2.0, 0.5, 2);
  CHECK(scale.item<float>() == 4.0f);
  CHECK(tracker.to(kInt64).item<int64_t>() == 0);
  // A growth that would overflow float32 keeps the scale and restarts the tracker.
  Tensor big = scalar_tensor(3e38, dtype(kFloat32));
  ops::_amp_update_scale_(big, tracker, clean, 2.0, 0.5, 1);
  CHECK(big.item<float>() == 3e38f);
  CHECK(tracker.to(kInt64).item<int64_t>() == 0);
  // The new scale is float32(double(scale) * factor): 0.1 backoff rounds once.
  Tensor s3 = scalar_tensor(3.0, dtype(kFloat32));
  ops::_amp_update_scale_(s3, tracker, bad, 2.0, 0.1, 5);
  CHECK(s3.item<float>() == static_cast<float>(3.0 * 0.1));
  Tensor t64 = zeros({}, dtype(kInt64));
  CHECK_THROWS_WITH(ops::_amp_update_scale_(scale, t64, clean, 2.0, 0.5, 2),
                    Catch::Contains("_amp_update_scale_") && Catch::Contains("growth_tracker"));
}
