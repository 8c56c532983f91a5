#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;

namespace {

// The float64 kernels against a float64 reference.
const Tolerance kTight{.rtol = 1e-10, .atol = 1e-12};

std::vector<double> random_values(int64_t n, unsigned seed, double mean = 0.0, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(mean, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

Tensor make(const std::vector<double>& v, const Shape& s, DType dt = kFloat64) {
  return graft::tensor(v, s, graft::dtype(dt));
}

struct Ref {
  std::vector<double> y, mean, rstd;
};

// Naive layer norm of rows of n elements; w/b empty = none.
Ref ref_layer_norm(const std::vector<double>& x, int64_t n, const std::vector<double>& w,
                   const std::vector<double>& b, double eps) {
  Ref r;
  int64_t m = static_cast<int64_t>(x.size()) / n;
  for (int64_t i = 0; i < m; ++i) {
    double mu = 0, var = 0;
    for (int64_t j = 0; j < n; ++j) mu += x[i * n + j];
    mu /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) var += (x[i * n + j] - mu) * (x[i * n + j] - mu);
    var /= static_cast<double>(n);
    double rs = 1 / std::sqrt(var + eps);
    r.mean.push_back(mu);
    r.rstd.push_back(rs);
    for (int64_t j = 0; j < n; ++j) {
      double h = (x[i * n + j] - mu) * rs;
      r.y.push_back(h * (w.empty() ? 1.0 : w[j]) + (b.empty() ? 0.0 : b[j]));
    }
  }
  return r;
}

std::vector<double> numeric_grad(const std::function<double(const std::vector<double>&)>& f,
                                 const std::vector<double>& xv, double h = 1e-6) {
  std::vector<double> g(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    auto plus = xv, minus = xv;
    plus[i] += h;
    minus[i] -= h;
    g[i] = (f(plus) - f(minus)) / (2 * h);
  }
  return g;
}

double dot(const Tensor& a, const std::vector<double>& b) {
  auto av = a.to_vector<double>();
  double s = 0;
  for (size_t i = 0; i < av.size(); ++i) s += av[i] * b[i];
  return s;
}

}  // namespace

TEST_CASE("layer_norm matches a naive float64 reference with and without weight and bias") {
  Shape s{2, 3, 4, 5};
  auto xv = random_values(120, 1, 2.0, 3.0);
  auto wv = random_values(20, 2);
  auto bv = random_values(20, 3);
  Tensor x = make(xv, s);
  for (bool with_w : {false, true}) {
    for (bool with_b : {false, true}) {
      INFO("weight " << with_w << " bias " << with_b);
      Tensor w = with_w ? make(wv, {4, 5}) : Tensor();
      Tensor b = with_b ? make(bv, {4, 5}) : Tensor();
      auto out = ops::native_layer_norm(x, {4, 5}, w, b, 1e-5);
      REQUIRE(out.size() == 3);
      Ref r = ref_layer_norm(xv, 20, with_w ? wv : std::vector<double>{}, with_b ? bv : std::vector<double>{}, 1e-5);
      CHECK(out[0].sizes() == s);
      CHECK(out[1].sizes() == Shape{2, 3});
      CHECK(out[2].sizes() == Shape{2, 3});
      CHECK(out[1].dtype() == kFloat64);
      check_close(out[0], r.y, kTight);
      check_close(out[1], r.mean, kTight);
      check_close(out[2], r.rstd, kTight);
    }
  }
  // Normalising the last dim only, with a larger eps.
  auto out = ops::native_layer_norm(x, {5}, {}, {}, 0.5);
  CHECK(out[1].sizes() == Shape{2, 3, 4});
  check_close(out[0], ref_layer_norm(xv, 5, {}, {}, 0.5).y, kTight);
}

TEST_CASE("layer_norm in float32 and on non-contiguous input") {
  Shape s{6, 8};
  auto xv = random_values(48, 4, 1.0, 2.0);
  auto wv = random_values(8, 5);
  Ref r = ref_layer_norm(xv, 8, wv, {}, 1e-5);
  auto out = ops::native_layer_norm(make(xv, s, kFloat32), {8}, make(wv, {8}, kFloat32), {}, 1e-5);
  CHECK(out[0].dtype() == kFloat32);
  CHECK(out[2].dtype() == kFloat32);
  check_close(out[0], r.y, {.rtol = 1e-4, .atol = 1e-5});
  check_close(out[2], r.rstd, {.rtol = 1e-5, .atol = 1e-12});
  // x^T of a [8, 6] tensor holds the same values as x but is not contiguous.
  std::vector<double> tv(48);
  for (int64_t i = 0; i < 6; ++i)
    for (int64_t j = 0; j < 8; ++j) tv[j * 6 + i] = xv[i * 8 + j];
  Tensor xt = ops::transpose(make(tv, {8, 6}), 0, 1);
  REQUIRE_FALSE(xt.is_contiguous());
  check_close(ops::native_layer_norm(xt, {8}, make(wv, {8}), {}, 1e-5)[0], r.y, kTight);
}

TEST_CASE("layer_norm_backward matches finite differences in float64, with and without weight and bias") {
  Shape s{3, 2, 4};
  Shape ns{2, 4};
  auto xv = random_values(24, 6, 0.5, 1.5);
  auto wv = random_values(8, 7);
  auto bv = random_values(8, 8);
  auto gv = random_values(24, 9);
  Tensor g = make(gv, s);
  for (bool with_w : {false, true}) {
    for (bool with_b : {false, true}) {
      INFO("weight " << with_w << " bias " << with_b);
      Tensor w = with_w ? make(wv, ns) : Tensor();
      Tensor b = with_b ? make(bv, ns) : Tensor();
      Tensor x = make(xv, s);
      auto fwd = ops::native_layer_norm(x, ns, w, b, 1e-5);
      auto grads = ops::native_layer_norm_backward(g, x, ns, fwd[1], fwd[2], w, b);
      REQUIRE(grads.size() == 3);
      auto loss_x = [&](const std::vector<double>& v) { return dot(ops::native_layer_norm(make(v, s), ns, w, b)[0], gv); };
      check_close(grads[0], numeric_grad(loss_x, xv), {.rtol = 1e-6, .atol = 1e-8});
      CHECK(grads[1].defined() == with_w);
      CHECK(grads[2].defined() == with_b);
      if (with_w) {
        CHECK(grads[1].sizes() == ns);
        auto loss_w = [&](const std::vector<double>& v) {
          return dot(ops::native_layer_norm(x, ns, make(v, ns), b)[0], gv);
        };
        check_close(grads[1], numeric_grad(loss_w, wv), {.rtol = 1e-6, .atol = 1e-8});
      }
      if (with_b) {
        auto loss_b = [&](const std::vector<double>& v) {
          return dot(ops::native_layer_norm(x, ns, w, make(v, ns))[0], gv);
        };
        check_close(grads[2], numeric_grad(loss_b, bv), {.rtol = 1e-6, .atol = 1e-8});
      }
    }
  }
}

TEST_CASE("layer_norm_backward sums weight and bias gradients over many rows") {
  // Enough rows that the rows are split into several pieces whose partial sums are added.
  int64_t m = 700, n = 96;
  auto xv = random_values(m * n, 10);
  auto gv = random_values(m * n, 11);
  auto wv = random_values(n, 12);
  Tensor x = make(xv, {m, n});
  Tensor w = make(wv, {n});
  Tensor b = ops::zeros({n}, kFloat64);
  auto fwd = ops::native_layer_norm(x, {n}, w, b);
  auto grads = ops::native_layer_norm_backward(make(gv, {m, n}), x, {n}, fwd[1], fwd[2], w, b);
  Ref r = ref_layer_norm(xv, n, {}, {}, 1e-5);  // r.y is xhat
  std::vector<double> dw(n, 0.0), db(n, 0.0), dx;
  for (int64_t i = 0; i < m; ++i) {
    double a = 0, c = 0;
    for (int64_t j = 0; j < n; ++j) {
      double gg = gv[i * n + j] * wv[j];
      a += gg;
      c += gg * r.y[i * n + j];
      dw[j] += gv[i * n + j] * r.y[i * n + j];
      db[j] += gv[i * n + j];
    }
    a /= static_cast<double>(n);
    c /= static_cast<double>(n);
    for (int64_t j = 0; j < n; ++j) dx.push_back(r.rstd[i] * (gv[i * n + j] * wv[j] - a - r.y[i * n + j] * c));
  }
  check_close(grads[0], dx, {.rtol = 1e-9, .atol = 1e-11});
  check_close(grads[1], dw, {.rtol = 1e-9, .atol = 1e-11});
  check_close(grads[2], db, {.rtol = 1e-9, .atol = 1e-11});
}

TEST_CASE("layer_norm rejects a normalized_shape that does not match the input") {
  Tensor x = ops::zeros({2, 3});
  CHECK_THROWS_WITH(ops::native_layer_norm(x, {4}),
                    Catch::Contains("layer_norm") && Catch::Contains("[4]") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(ops::native_layer_norm(x, {2, 3, 1}), Catch::Contains("[2, 3, 1]"));
  CHECK_THROWS_WITH(ops::native_layer_norm(x, {}), Catch::Contains("normalized_shape"));
  CHECK_THROWS_WITH(ops::native_layer_norm(x, {3}, ops::ones({4})), Catch::Contains("weight") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(ops::native_layer_norm(x, {3}, {}, ops::ones({3}, kFloat64)),
                    Catch::Contains("bias") && Catch::Contains("float64"));
  CHECK_THROWS_WITH(ops::native_layer_norm(graft::tensor(std::vector<int64_t>{1, 2}, {2}), {2}),
                    Catch::Contains("layer_norm") && Catch::Contains("int64"));
  auto fwd = ops::native_layer_norm(x, {3});
  CHECK_THROWS_WITH(ops::native_layer_norm_backward(ops::zeros({3, 2}), x, {3}, fwd[1], fwd[2], {}, {}),
                    Catch::Contains("layer_norm_backward") && Catch::Contains("grad_output"));
}
