// GradScaler's ops and the 16-bit fused optimizer kernels on CUDA against the CPU. Needs a GPU:
// linked with tests/support/gpu_main.cpp, which exits with 77 (meson's SKIPPED) without one.
#include <catch2/catch.hpp>

#include <limits>
#include <memory>
#include <vector>

#include "graft.h"
#include "ops/ops.h"

using namespace graft;

namespace {
std::vector<float> values(const Tensor& t) { return t.to(kCPU).to(kFloat32).to_vector<float>(); }
}  // namespace

TEST_CASE("CUDA _amp_non_finite_check_and_unscale_ and _amp_update_scale_ give the CPU's values") {
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO("dtype " << dt);
    std::vector<float> v(5000);
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % 41) - 20) * 4.0f;
    for (bool bad : {false, true}) {
      if (bad) v[4321] = std::numeric_limits<float>::infinity();
      Tensor c = tensor(v, {5000}, dtype(dt)), g = c.to(kCUDA);
      Tensor fc = zeros({}), fg = zeros({}, TensorOptions{}.device(kCUDA));
      Tensor inv = scalar_tensor(1.0 / 1024, dtype(kFloat32));
      Tensor inv_g = inv.to(kCUDA);
      ops::_amp_non_finite_check_and_unscale_(c, fc, inv);
      ops::_amp_non_finite_check_and_unscale_(g, fg, inv_g);
      CHECK(values(g) == values(c));
      CHECK(fg.item<float>() == fc.item<float>());
      CHECK(fc.item<float>() == (bad ? 1.0f : 0.0f));
    }
  }
  Tensor sc = scalar_tensor(65536.0, dtype(kFloat32)), tc = zeros({}, dtype(kInt32));
  Tensor sg = sc.to(kCUDA), tg = tc.to(kCUDA);
  for (int i = 0; i < 12; ++i) {
    const float f = i % 5 == 3 ? 1.0f : 0.0f;
    ops::_amp_update_scale_(sc, tc, scalar_tensor(f, dtype(kFloat32)), 2.0, 0.5, 3);
    ops::_amp_update_scale_(sg, tg, scalar_tensor(f, TensorOptions{}.dtype(kFloat32).device(kCUDA)), 2.0, 0.5, 3);
    CHECK(sg.item<float>() == sc.item<float>());
    CHECK(tg.to(kInt64).item<int64_t>() == tc.to(kInt64).item<int64_t>());
  }
}

TEST_CASE("CUDA GradScaler keeps the scale on the device and skips a step with inf") {
  Tensor p = tensor({1.0, -2.0}, TensorOptions{}.device(kCUDA)).requires_grad_();
  optim::SGD opt({p}, 0.5);
  optim::GradScaler s({.init_scale = 8, .growth_interval = 1});
  s.scale((p * p).sum()).backward();
  CHECK(s.step(opt));
  s.update();
  CHECK(values(p) == std::vector<float>{0, 0});
  CHECK(s.get_scale() == 16);
  p.mutable_grad() = tensor({std::numeric_limits<double>::infinity(), 1.0}, TensorOptions{}.device(kCUDA));
  s.scale(ones({}, TensorOptions{}.device(kCUDA)));
  CHECK_FALSE(s.step(opt));
  s.update();
  CHECK(s.get_scale() == 8);
}

TEST_CASE("CUDA fused SGD/Adam on bfloat16 and float16 parameters match the CPU to rounding") {
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO("dtype " << dt);
    manual_seed(4);
    Tensor init = randn({3000}).to(dt);
    std::vector<Tensor> grads;
    for (int k = 0; k < 4; ++k) grads.push_back(randn({3000}).to(dt));
    auto run = [&](Device d, bool adam) {
      Tensor p = init.to(d).requires_grad_();
      std::unique_ptr<optim::Optimizer> o;
      if (adam) o = std::make_unique<optim::AdamW>(std::vector<Tensor>{p}, 1e-2);
      else o = std::make_unique<optim::SGD>(std::vector<Tensor>{p}, 0.05, 0.9, 0, 0.01, true);
      for (const Tensor& g : grads) {
        p.mutable_grad() = g.to(d);
        o->step();
      }
      return values(p);
    };
    for (bool adam : {false, true}) {
      auto c = run(kCPU, adam), g = run(kCUDA, adam);
      REQUIRE(c.size() == g.size());
      // SGD's formula is fma for fma on both devices; Adam's may contract differently on the device.
      for (size_t i = 0; i < c.size(); ++i) REQUIRE(g[i] == Approx(c[i]).epsilon(dt == kBFloat16 ? 1e-2 : 2e-3).margin(1e-3));
    }
  }
}
