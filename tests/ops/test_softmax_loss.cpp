#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;

namespace {

// The float64 kernels against a float64 reference.
const Tolerance kTight{.rtol = 1e-10, .atol = 1e-12};

std::vector<double> random_values(int64_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

Tensor make(const std::vector<double>& v, const Shape& s, DType dt = kFloat64) {
  return graft::tensor(v, s, graft::dtype(dt));
}
Tensor make_index(const std::vector<int64_t>& v, const Shape& s) { return graft::tensor(v, s); }

// Row-major strides of a shape, for the naive loops.
Shape strides_of(const Shape& s) { return contiguous_strides(s); }

// Naive softmax of a row-major array along dim.
std::vector<double> ref_softmax(const std::vector<double>& x, const Shape& s, int64_t dim, bool log) {
  Shape st = strides_of(s);
  std::vector<double> y(x.size());
  int64_t D = s[dim], stride = st[dim];
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    if ((i / stride) % D != 0) continue;  // i is the start of a lane along dim
    double m = -INFINITY, z = 0;
    for (int64_t d = 0; d < D; ++d) m = std::max(m, x[i + d * stride]);
    for (int64_t d = 0; d < D; ++d) z += std::exp(x[i + d * stride] - m);
    for (int64_t d = 0; d < D; ++d) {
      double v = x[i + d * stride] - m;
      y[i + d * stride] = log ? v - std::log(z) : std::exp(v) / z;
    }
  }
  return y;
}

// Central differences of a scalar function of one float64 tensor.
std::vector<double> numeric_grad(const std::function<double(const Tensor&)>& f, const std::vector<double>& xv,
                                 const Shape& s, double h = 1e-6) {
  std::vector<double> g(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    auto plus = xv, minus = xv;
    plus[i] += h;
    minus[i] -= h;
    g[i] = (f(make(plus, s)) - f(make(minus, s))) / (2 * h);
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

// ---- softmax ----

TEST_CASE("softmax and log_softmax match a naive reference along every dim") {
  Shape s{3, 4, 5};
  auto xv = random_values(60, 1, 3.0);
  for (DType dt : {kFloat64, kFloat32}) {
    Tensor x = make(xv, s, dt);
    const Tolerance tol = Tolerance::within(dt == kFloat64 ? 1e-12 : 1e-5);
    for (int64_t dim : {0, 1, 2, -1, -3}) {
      INFO("dim " << dim << " dtype " << dt);
      int64_t d = (dim + 3) % 3;
      Tensor y = ops::softmax(x, dim);
      CHECK(y.dtype() == dt);
      CHECK(y.sizes() == s);
      check_close(y, ref_softmax(xv, s, d, false), tol);
      check_close(ops::log_softmax(x, dim), ref_softmax(xv, s, d, true), tol);
    }
  }
}

TEST_CASE("softmax rows sum to one, including wide inner blocks") {
  // [2, 7, 150]: softmax over dim 1 has 150 lanes per outer index (more than one lane block).
  Shape s{2, 7, 150};
  auto xv = random_values(2 * 7 * 150, 2, 5.0);
  Tensor y = ops::softmax(make(xv, s), 1);
  auto yv = y.to_vector<double>();
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t j = 0; j < 150; ++j) {
      double sum = 0;
      for (int64_t d = 0; d < 7; ++d) sum += yv[(o * 7 + d) * 150 + j];
      CHECK(sum == Approx(1.0).epsilon(1e-12));
    }
  check_close(y, ref_softmax(xv, s, 1, false), {.rtol = 1e-12, .atol = 1e-15});
  // A big last-dim softmax goes through the threaded row loop.
  Shape big{300, 1000};
  auto bv = random_values(300 * 1000, 3);
  Tensor yb = ops::softmax(make(bv, big, kFloat32), -1);
  auto ybv = yb.to_vector<double>();
  for (int64_t r = 0; r < 300; r += 37) {
    double sum = 0;
    for (int64_t c = 0; c < 1000; ++c) sum += ybv[r * 1000 + c];
    CHECK(sum == Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("softmax is stable for large logits and reads non-contiguous input") {
  Tensor x = make({1000, 1001, 1002, -1000, -1001, -1002}, {2, 3});
  auto y = ops::softmax(x, 1).to_vector<double>();
  double z = 1 + std::exp(1.0) + std::exp(2.0);
  check_close(ops::softmax(x, 1), {1 / z, std::exp(1.0) / z, std::exp(2.0) / z, std::exp(2.0) / z,
                                   std::exp(1.0) / z, 1 / z}, kTight);
  check_close(ops::log_softmax(x, 1), {-std::log(z), 1 - std::log(z), 2 - std::log(z), 2 - std::log(z),
                                       1 - std::log(z), -std::log(z)}, kTight);
  Tensor f = make({1000, 1001, 1002}, {3}, kFloat32);
  auto fv = ops::softmax(f, 0).to_vector<float>();
  for (float v : fv) CHECK(std::isfinite(v));
  // Transposed input: softmax over dim 0 of x^T equals softmax over dim 1 of x.
  Tensor xt = ops::transpose(x, 0, 1);
  REQUIRE_FALSE(xt.is_contiguous());
  auto yt = ops::softmax(xt, 0).to_vector<double>();  // [3, 2]
  for (int64_t r = 0; r < 2; ++r)
    for (int64_t c = 0; c < 3; ++c) CHECK(yt[c * 2 + r] == Approx(y[r * 3 + c]));
}

TEST_CASE("softmax of a 0-d tensor is 1 and of an empty tensor is empty") {
  Tensor x = graft::scalar_tensor(3.0, graft::dtype(kFloat64));
  CHECK(ops::softmax(x, 0).item<double>() == 1.0);
  CHECK(ops::log_softmax(x, -1).item<double>() == 0.0);
  CHECK(ops::softmax(ops::zeros({0, 4}), 1).sizes() == Shape{0, 4});
}

TEST_CASE("softmax rejects integer input and bad dims") {
  CHECK_THROWS_WITH(ops::softmax(graft::tensor(std::vector<int64_t>{1, 2}, {2}), 0),
                    Catch::Contains("softmax") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(ops::log_softmax(ops::zeros({2, 3}), 2),
                    Catch::Contains("log_softmax") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ops::softmax_backward(ops::zeros({2, 3}), ops::zeros({3, 2}), 1),
                    Catch::Contains("softmax_backward") && Catch::Contains("[3, 2]"));
}

TEST_CASE("softmax_backward and log_softmax_backward match finite differences in float64") {
  Shape s{2, 3, 4};
  auto xv = random_values(24, 4);
  auto gv = random_values(24, 5);
  Tensor g = make(gv, s);
  for (int64_t dim : {0, 1, 2}) {
    for (bool log : {false, true}) {
      INFO("dim " << dim << " log " << log);
      auto fwd = [&](const Tensor& x) { return log ? ops::log_softmax(x, dim) : ops::softmax(x, dim); };
      auto f = [&](const Tensor& x) { return dot(fwd(x), gv); };
      Tensor out = fwd(make(xv, s));
      Tensor analytic = log ? ops::log_softmax_backward(g, out, dim) : ops::softmax_backward(g, out, dim);
      check_close(analytic, numeric_grad(f, xv, s), {.rtol = 1e-6, .atol = 1e-8});
    }
  }
}

// ---- nll_loss ----

TEST_CASE("nll_loss matches hand-computed values for each reduction") {
  Tensor lp = make({-1, -2, -3, -0.5, -1.5, -2.5}, {2, 3});
  Tensor t = make_index({2, 0}, {2});
  Tensor none = ops::nll_loss(lp, t, {}, "none");
  CHECK(none.sizes() == Shape{2});
  check_close(none, {3, 0.5}, kTight);
  Tensor sum = ops::nll_loss(lp, t, {}, "sum");
  CHECK(sum.dim() == 0);
  CHECK(sum.item<double>() == Approx(3.5));
  CHECK(ops::nll_loss(lp, t).item<double>() == Approx(1.75));
  // Weights: mean divides by the weights of the targets (3 + 1), not by N.
  Tensor w = make({1, 2, 3}, {3});
  check_close(ops::nll_loss(lp, t, w, "none"), {9, 0.5}, kTight);
  CHECK(ops::nll_loss(lp, t, w, "sum").item<double>() == Approx(9.5));
  CHECK(ops::nll_loss(lp, t, w, "mean").item<double>() == Approx(9.5 / 4));
  Tensor lpf = make({-1, -2, -3, -0.5, -1.5, -2.5}, {2, 3}, kFloat32);
  Tensor mf = ops::nll_loss(lpf, t);
  CHECK(mf.dtype() == kFloat32);
  CHECK(mf.item<float>() == Approx(1.75f));
}

TEST_CASE("nll_loss skips ignore_index targets in the loss and in the mean's denominator") {
  Tensor lp = make({-1, -2, -3, -0.5, -1.5, -2.5, -4, -5, -6}, {3, 3});
  Tensor t = make_index({2, -100, 1}, {3});
  check_close(ops::nll_loss(lp, t, {}, "none"), {3, 0, 5}, kTight);
  CHECK(ops::nll_loss(lp, t).item<double>() == Approx(4.0));
  Tensor w = make({1, 2, 3}, {3});
  CHECK(ops::nll_loss(lp, t, w).item<double>() == Approx((9.0 + 10.0) / 5.0));
  // A custom ignore_index inside the class range.
  Tensor t2 = make_index({2, 0, 1}, {3});
  CHECK(ops::nll_loss(lp, t2, {}, "mean", 1).item<double>() == Approx((3 + 0.5) / 2));
  // Everything ignored: mean is 0 / 0 = NaN, sum is 0, as PyTorch.
  Tensor all = make_index({-100, -100, -100}, {3});
  CHECK(std::isnan(ops::nll_loss(lp, all).item<double>()));
  CHECK(ops::nll_loss(lp, all, {}, "sum").item<double>() == 0.0);
}

TEST_CASE("nll_loss accepts [C] inputs with a 0-d target and [N, C, d...] inputs") {
  Tensor lp1 = make({-1, -2, -3}, {3});
  Tensor t0 = graft::scalar_tensor(1);
  REQUIRE(t0.dtype() == kInt64);
  CHECK(ops::nll_loss(lp1, t0).item<double>() == Approx(2.0));
  Tensor n1 = ops::nll_loss(lp1, t0, {}, "none");
  CHECK(n1.dim() == 0);
  CHECK(n1.item<double>() == Approx(2.0));
  // [N=2, C=3, 2, 2]: classes are 4 elements apart in memory.
  Shape s{2, 3, 2, 2};
  auto lv = random_values(24, 6);
  Tensor lp = make(lv, s);
  std::vector<int64_t> tv{0, 2, 1, 1, 2, 0, -100, 1};
  Tensor t = make_index(tv, {2, 2, 2});
  Tensor w = make({0.5, 1.0, 2.0}, {3});
  std::vector<double> expect;
  double total = 0, wsum = 0;
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t k = 0; k < 4; ++k) {
      int64_t c = tv[n * 4 + k];
      if (c == -100) {
        expect.push_back(0);
        continue;
      }
      double wc = w.to_vector<double>()[c];
      double l = -wc * lv[(n * 3 + c) * 4 + k];
      expect.push_back(l);
      total += l;
      wsum += wc;
    }
  Tensor none = ops::nll_loss(lp, t, w, "none");
  CHECK(none.sizes() == Shape{2, 2, 2});
  check_close(none, expect, kTight);
  CHECK(ops::nll_loss(lp, t, w, "sum").item<double>() == Approx(total));
  CHECK(ops::nll_loss(lp, t, w, "mean").item<double>() == Approx(total / wsum));
  // A non-contiguous (transposed) input gives the same numbers.
  Tensor lpt = ops::transpose(ops::contiguous(ops::transpose(lp, 2, 3)), 2, 3);
  REQUIRE_FALSE(lpt.is_contiguous());
  check_close(ops::nll_loss(lpt, t, w, "none"), expect, kTight);
}

TEST_CASE("nll_loss reports bad targets, shapes, weights and reductions") {
  Tensor lp = make({-1, -2, -3, -0.5, -1.5, -2.5}, {2, 3});
  CHECK_THROWS_WITH(ops::nll_loss(lp, make_index({5, 0}, {2})),
                    Catch::Contains("nll_loss") && Catch::Contains("target 5") && Catch::Contains("C = 3"));
  CHECK_THROWS_WITH(ops::nll_loss(lp, make_index({0, -1}, {2})), Catch::Contains("target -1"));
  CHECK_THROWS_WITH(ops::nll_loss(lp, make_index({0, 1, 2}, {3})),
                    Catch::Contains("nll_loss") && Catch::Contains("[2]") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(ops::nll_loss(lp, make({0, 1}, {2})), Catch::Contains("int64"));
  CHECK_THROWS_WITH(ops::nll_loss(lp, make_index({0, 1}, {2}), make({1, 1}, {2})),
                    Catch::Contains("weight") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(ops::nll_loss(lp, make_index({0, 1}, {2}), {}, "avg"),
                    Catch::Contains("reduction") && Catch::Contains("avg"));
  CHECK_THROWS_WITH(ops::nll_loss_backward(ops::zeros({3}, kFloat64), lp, make_index({0, 1}, {2}), {}, "none", -100),
                    Catch::Contains("nll_loss_backward") && Catch::Contains("grad_output"));
}

TEST_CASE("nll_loss_backward matches finite differences for each reduction, with weights and ignored targets") {
  Shape s{4, 3};
  auto lv = random_values(12, 7);
  Tensor t = make_index({2, -100, 0, 1}, {4});
  Tensor w = make({0.3, 1.7, 2.2}, {3});
  auto gv = random_values(4, 8);
  for (const char* red : {"none", "sum", "mean"}) {
    for (bool weighted : {false, true}) {
      INFO(red << " weighted " << weighted);
      Tensor wt = weighted ? w : Tensor();
      bool none = std::string(red) == "none";
      Tensor g = none ? make(gv, {4}) : graft::scalar_tensor(1.5, graft::dtype(kFloat64));
      std::vector<double> gvec = none ? gv : std::vector<double>{1.5};
      auto f = [&](const Tensor& lp) { return dot(ops::nll_loss(lp, t, wt, red), gvec); };
      Tensor analytic = ops::nll_loss_backward(g, make(lv, s), t, wt, red, -100);
      CHECK(analytic.sizes() == s);
      check_close(analytic, numeric_grad(f, lv, s), {.rtol = 1e-6, .atol = 1e-8});
    }
  }
  // The [N, C, d] layout.
  Shape s3{2, 3, 2};
  auto l3 = random_values(12, 9);
  Tensor t3 = make_index({1, 2, 0, 0}, {2, 2});
  auto f3 = [&](const Tensor& lp) { return ops::nll_loss(lp, t3, w).item<double>(); };
  check_close(ops::nll_loss_backward(graft::scalar_tensor(1.0, graft::dtype(kFloat64)), make(l3, s3), t3, w, "mean",
                                     -100), numeric_grad(f3, l3, s3), {.rtol = 1e-6, .atol = 1e-8});
}

// ---- cross_entropy ----

TEST_CASE("cross_entropy is log_softmax followed by nll_loss") {
  auto xv = random_values(12, 10);
  Tensor x = make(xv, {4, 3});
  Tensor t = make_index({0, 2, 1, 2}, {4});
  auto lp = ref_softmax(xv, {4, 3}, 1, true);
  double expect = -(lp[0] + lp[5] + lp[7] + lp[11]) / 4;
  CHECK(ops::cross_entropy(x, t).item<double>() == Approx(expect));
  check_close(ops::cross_entropy(x, t, {}, "none"), {-lp[0], -lp[5], -lp[7], -lp[11]}, kTight);
  // 1-D logits: the class dim is 0.
  Tensor x1 = make({1, 2, 3}, {3});
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(ops::cross_entropy(x1, graft::scalar_tensor(2)).item<double>() == Approx(lse - 3));
}

TEST_CASE("cross_entropy with label smoothing matches hand-computed numbers") {
  // logits [1, 2, 3], target 0, ls = 0.1:
  //   lp = x - lse, nll = lse - 1, smooth = -sum(lp) = 3 lse - 6
  //   loss = 0.9 * nll + 0.1 / 3 * smooth
  double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  double expect = 0.9 * (lse - 1) + 0.1 / 3 * (3 * lse - 6);
  Tensor x = make({1, 2, 3}, {1, 3});
  Tensor t = make_index({0}, {1});
  CHECK(ops::cross_entropy(x, t, {}, "mean", -100, 0.1).item<double>() == Approx(expect).epsilon(1e-12));
  CHECK(expect == Approx(2.3076059644).epsilon(1e-9));  // torch.nn.functional.cross_entropy gives 2.3076

  // Two samples, weights, an ignored one and each reduction, against the formula
  //   loss_i = (1 - ls) * (-w[t] lp[t]) + ls / C * (-sum_c w[c] lp[c]),  mean = sum / sum(w[t]).
  auto xv = random_values(9, 11);
  Tensor x3 = make(xv, {3, 3});
  Tensor t3 = make_index({2, 0, -100}, {3});
  std::vector<double> w{0.5, 1.0, 2.0};
  Tensor wt = make(w, {3});
  double ls = 0.25;
  auto lp = ref_softmax(xv, {3, 3}, 1, true);
  std::vector<double> per;
  double total = 0, wsum = 0;
  std::vector<int64_t> tv{2, 0, -100};
  for (int64_t n = 0; n < 3; ++n) {
    if (tv[n] == -100) {
      per.push_back(0);
      continue;
    }
    double smooth = 0;
    for (int64_t c = 0; c < 3; ++c) smooth -= w[c] * lp[n * 3 + c];
    double l = (1 - ls) * (-w[tv[n]] * lp[n * 3 + tv[n]]) + ls / 3 * smooth;
    per.push_back(l);
    total += l;
    wsum += w[tv[n]];
  }
  check_close(ops::cross_entropy(x3, t3, wt, "none", -100, ls), per, kTight);
  CHECK(ops::cross_entropy(x3, t3, wt, "sum", -100, ls).item<double>() == Approx(total));
  CHECK(ops::cross_entropy(x3, t3, wt, "mean", -100, ls).item<double>() == Approx(total / wsum));
  // Without weights the mean divides by the number of counted targets.
  double total_nw = 0;
  for (int64_t n = 0; n < 2; ++n) {
    double smooth = 0;
    for (int64_t c = 0; c < 3; ++c) smooth -= lp[n * 3 + c];
    total_nw += (1 - ls) * (-lp[n * 3 + tv[n]]) + ls / 3 * smooth;
  }
  CHECK(ops::cross_entropy(x3, t3, {}, "mean", -100, ls).item<double>() == Approx(total_nw / 2));
  CHECK_THROWS_WITH(ops::cross_entropy(x3, t3, {}, "mean", -100, 1.5), Catch::Contains("label_smoothing"));
  CHECK_THROWS_WITH(ops::cross_entropy(x3, make_index({3, 0, 0}, {3}), {}, "mean", -100, 0.1),
                    Catch::Contains("target 3") && Catch::Contains("C = 3"));
}

TEST_CASE("cross_entropy accepts class-probability targets") {
  Tensor x = make({1, 2, 3, 0, 0, 0}, {2, 3});
  Tensor y = make({0.2, 0.3, 0.5, 1, 0, 0}, {2, 3});
  auto lp = ref_softmax({1, 2, 3, 0, 0, 0}, {2, 3}, 1, true);
  double l0 = -(0.2 * lp[0] + 0.3 * lp[1] + 0.5 * lp[2]), l1 = -lp[3];
  check_close(ops::cross_entropy(x, y, {}, "none"), {l0, l1}, kTight);
  CHECK(ops::cross_entropy(x, y).item<double>() == Approx((l0 + l1) / 2));
  // Smoothing mixes the targets with the uniform distribution; mean still divides by N.
  double ls = 0.3;
  double s0 = 0, s1 = 0;
  std::vector<double> yv{0.2, 0.3, 0.5, 1, 0, 0};
  for (int c = 0; c < 3; ++c) {
    s0 -= ((1 - ls) * yv[c] + ls / 3) * lp[c];
    s1 -= ((1 - ls) * yv[3 + c] + ls / 3) * lp[3 + c];
  }
  CHECK(ops::cross_entropy(x, y, {}, "mean", -100, ls).item<double>() == Approx((s0 + s1) / 2));
  CHECK_THROWS_WITH(ops::cross_entropy(x, make({1, 0, 0}, {3})), Catch::Contains("cross_entropy"));
}

// ---- mse_loss ----

TEST_CASE("mse_loss computes each reduction and rejects shape mismatches") {
  Tensor a = make({1, 2, 3}, {3});
  Tensor b = make({1, 0, 5}, {3});
  check_close(ops::mse_loss(a, b, "none"), {0, 4, 4}, kTight);
  CHECK(ops::mse_loss(a, b, "sum").item<double>() == Approx(8.0));
  CHECK(ops::mse_loss(a, b).item<double>() == Approx(8.0 / 3));
  Tensor af = make({1, 2, 3}, {3}, kFloat32);
  CHECK(ops::mse_loss(af, ops::to_dtype(b, kFloat32)).dtype() == kFloat32);
  // Non-contiguous operands.
  Tensor m = make({1, 2, 3, 4}, {2, 2});
  Tensor mt = ops::transpose(m, 0, 1);  // [[1, 3], [2, 4]]
  check_close(ops::mse_loss(mt, m, "none"), {0, 1, 1, 0}, kTight);
  CHECK_THROWS_WITH(ops::mse_loss(a, make({1, 2}, {2})),
                    Catch::Contains("mse_loss") && Catch::Contains("[3]") && Catch::Contains("[2]"));
  CHECK_THROWS_WITH(ops::mse_loss(a, b, "mean_"), Catch::Contains("reduction"));
  // A large input goes through several pieces.
  int64_t n = 100000;
  Tensor big = ops::full({n}, 0.5, kFloat32);
  CHECK(ops::mse_loss(big, ops::zeros({n}, kFloat32), "sum").item<float>() == Approx(0.25 * n));
}
