// nn::utils::clip_grad_norm_ against torch.nn.utils.clip_grad_norm_ (torch 2.x). The expected
// totals and clipped gradients were printed by tests/nn/data/print_clip_grad_fixtures.py.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "graft.h"
#include "support/check_close.h"
#include "support/error_message.h"

using namespace graft;
using Catch::Contains;
using graft::test::check_close;

namespace {

const double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::numeric_limits<double>::quiet_NaN();

// Leaves of the gradients' shapes and dtypes whose .grad holds a copy of each gradient.
std::vector<Tensor> params_with_grads(const std::vector<Tensor>& grads) {
  std::vector<Tensor> ps;
  for (const Tensor& g : grads) {
    Tensor p = zeros_like(g).requires_grad_();
    p.mutable_grad() = g.clone();
    ps.push_back(p);
  }
  return ps;
}

// The fixture's two gradients: float32 [3] and float64 [2, 2].
std::vector<Tensor> mixed_grads() {
  return {tensor(std::vector<double>{3, 4, 0}, {3}, dtype(kFloat32)),
          tensor(std::vector<double>{1, -2, 0.5, 2.5}, {2, 2})};
}

}  // namespace

TEST_CASE("clip_grad_norm_ matches PyTorch for every norm type") {
  struct Case {
    double norm_type, total;
    std::vector<double> a, b;
  };
  const std::vector<Case> cases = {
      {2.0, 6.041522986797286, {0.4965634346008301, 0.6620845794677734, 0.0},
       {0.16552115032321785, -0.3310423006464357, 0.08276057516160892, 0.41380287580804465}},
      {1.0, 13.0, {0.23076921701431274, 0.307692289352417, 0.0},
       {0.07692307100591762, -0.15384614201183525, 0.03846153550295881, 0.19230767751479405}},
      {kInf, 4.0, {0.7499998211860657, 0.9999997615814209, 0.0},
       {0.24999993750001562, -0.49999987500003124, 0.12499996875000781, 0.624999843750039}},
      {3.0, 4.8734928913943145, {0.6155747771263123, 0.8207663893699646, 0.0},
       {0.20519159811933166, -0.4103831962386633, 0.10259579905966583, 0.5129789952983291}},
      {0.5, 71.14095941980716, {0.04216979816555977, 0.056226398795843124, 0.0},
       {0.014056599659309332, -0.028113199318618665, 0.007028299829654666, 0.03514149914827333}},
  };
  for (const Case& c : cases) {
    INFO("norm_type " << c.norm_type);
    std::vector<Tensor> ps = params_with_grads(mixed_grads());
    ps.push_back(zeros({2}).requires_grad_());  // no gradient: skipped
    Tensor total = nn::utils::clip_grad_norm_(ps, 1.0, c.norm_type);
    CHECK(total.dim() == 0);
    CHECK(total.dtype() == kFloat64);  // float32 and float64 norms promote, as torch.stack
    check_close(total, {c.total});
    check_close(ps[0].grad(), c.a, {.check_dtype = false});
    CHECK(ps[0].grad().dtype() == kFloat32);
    check_close(ps[1].grad(), c.b);
    CHECK_FALSE(ps[2].grad().defined());
  }
}

TEST_CASE("clip_grad_norm_ leaves gradients under max_norm as they are") {
  std::vector<Tensor> ps = params_with_grads(mixed_grads());
  Tensor total = nn::utils::clip_grad_norm_(ps, 100.0);
  check_close(total, {6.041522986797286});
  // Multiplied by the clamped coefficient 1: exactly the same values.
  check_close(ps[0].grad(), mixed_grads()[0], test::Tolerance::exact());
  check_close(ps[1].grad(), mixed_grads()[1], test::Tolerance::exact());
}

TEST_CASE("clip_grad_norm_ keeps 16-bit gradients and their dtype") {
  std::vector<Tensor> ps = params_with_grads({tensor(std::vector<double>{3, 4, 12}, {3}, dtype(kBFloat16))});
  Tensor total = nn::utils::clip_grad_norm_(ps, 1.0);
  CHECK(total.dtype() == kBFloat16);
  check_close(total, {13.0}, {.check_dtype = false});
  CHECK(ps[0].grad().dtype() == kBFloat16);
  check_close(ps[0].grad(), {0.2314453125, 0.30859375, 0.92578125}, {.check_dtype = false});
}

TEST_CASE("clip_grad_norm_ of no gradients is a float32 zero") {
  Tensor none = nn::utils::clip_grad_norm_({}, 1.0);
  CHECK(none.dim() == 0);
  CHECK(none.dtype() == kFloat32);
  CHECK(none.item<float>() == 0.0f);
  Tensor p = zeros({3}).requires_grad_();
  CHECK(nn::utils::clip_grad_norm_({p}, 1.0).item<float>() == 0.0f);
  CHECK_FALSE(p.grad().defined());
}

TEST_CASE("clip_grad_norm_ with a non-finite total") {
  // Without error_if_nonfinite the gradients are scaled anyway (by 10 / inf = 0), as PyTorch.
  std::vector<Tensor> ps = params_with_grads({tensor(std::vector<double>{3, kInf, 0.5}, {3}, dtype(kFloat32))});
  Tensor total = nn::utils::clip_grad_norm_(ps, 10.0);
  CHECK(std::isinf(total.item<double>()));
  check_close(ps[0].grad(), {0.0, kNaN, 0.0}, {.equal_nan = true, .check_dtype = false});
  // With it: PyTorch's message, naming the order as Python prints it, and the gradients untouched.
  for (double norm_type : {2.0, kInf, 0.5}) {
    std::vector<Tensor> qs = params_with_grads({tensor(std::vector<double>{kNaN}, {1}, dtype(kFloat32))});
    const std::string order = norm_type == 2.0 ? "2.0" : norm_type == 0.5 ? "0.5" : "inf";
    INFO("norm_type " << order);
    CHECK_THAT(test::error_message([&] { nn::utils::clip_grad_norm_(qs, 1.0, norm_type, true); }),
               Contains("clip_grad_norm_: The total norm of order " + order +
                        " for gradients from `parameters` is non-finite, so it cannot be clipped. To disable this "
                        "error and scale the gradients by the non-finite norm anyway, set `error_if_nonfinite=False`"));
    CHECK(std::isnan(qs[0].grad().item<float>()));
  }
}

TEST_CASE("clip_grad_norm_ records no autograd history") {
  // Gradients that themselves require grad (as after backward with create_graph).
  Tensor p = zeros({2}).requires_grad_();
  p.mutable_grad() = tensor(std::vector<double>{6, 8}, {2}, dtype(kFloat32)).requires_grad_();
  Tensor total = nn::utils::clip_grad_norm_({p}, 5.0);
  CHECK_FALSE(total.requires_grad());
  check_close(total, {10.0}, {.check_dtype = false});
  check_close(p.grad(), {3.0, 4.0}, {.check_dtype = false});
  CHECK(p.grad().grad_fn() == nullptr);
}
