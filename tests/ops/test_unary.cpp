// Elementwise unary ops: values against std:: math in double, PyTorch's dtype rules, strided
// inputs, in-place versions and the fused activation derivatives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;
using Catch::Contains;

namespace {

// n values evenly spread over [lo, hi].
std::vector<double> spread(double lo, double hi, int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = lo + (hi - lo) * i / (n - 1);
  return v;
}

Tensor make(const std::vector<double>& v, const Shape& shape, DType d) {
  return graft::tensor(v, shape, graft::dtype(d));
}

// NaN where the reference has NaN.
const Tolerance kExact{.rtol = 0, .atol = 0, .equal_nan = true};

// Applies `ref` to the values a tensor actually holds (float32-rounded for float32 tensors).
std::vector<double> reference(const Tensor& x, const std::function<double(double)>& ref) {
  std::vector<double> in = x.to_vector<double>(), out(in.size());
  for (size_t i = 0; i < in.size(); ++i) out[i] = ref(in[i]);
  return out;
}

double sigmoid_ref(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double gelu_ref(double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); }
double gelu_tanh_ref(double v) {
  return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
}

struct UnaryCase {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> ref;
  double lo, hi;
};

std::vector<UnaryCase> floating_cases() {
  return {
      {"exp", [](const Tensor& x) { return graft::exp(x); }, [](double v) { return std::exp(v); }, -5, 5},
      {"log", [](const Tensor& x) { return graft::log(x); }, [](double v) { return std::log(v); }, 0.01, 50},
      {"sin", [](const Tensor& x) { return graft::sin(x); }, [](double v) { return std::sin(v); }, -7, 7},
      {"cos", [](const Tensor& x) { return graft::cos(x); }, [](double v) { return std::cos(v); }, -7, 7},
      {"tanh", [](const Tensor& x) { return graft::tanh(x); }, [](double v) { return std::tanh(v); }, -6, 6},
      {"sigmoid", [](const Tensor& x) { return graft::sigmoid(x); }, sigmoid_ref, -20, 20},
      {"sqrt", [](const Tensor& x) { return graft::sqrt(x); }, [](double v) { return std::sqrt(v); }, 0, 30},
      {"rsqrt", [](const Tensor& x) { return graft::rsqrt(x); }, [](double v) { return 1 / std::sqrt(v); }, 0.1, 30},
      {"log1p", [](const Tensor& x) { return graft::log1p(x); }, [](double v) { return std::log1p(v); }, -0.9, 9},
      {"expm1", [](const Tensor& x) { return graft::expm1(x); }, [](double v) { return std::expm1(v); }, -3, 3},
      {"erf", [](const Tensor& x) { return graft::erf(x); }, [](double v) { return std::erf(v); }, -3, 3},
      {"reciprocal", [](const Tensor& x) { return graft::reciprocal(x); }, [](double v) { return 1 / v; }, 0.1, 9},
      {"silu", [](const Tensor& x) { return graft::silu(x); }, [](double v) { return v * sigmoid_ref(v); }, -20, 20},
      {"gelu", [](const Tensor& x) { return graft::gelu(x); }, gelu_ref, -5, 5},
      {"gelu tanh", [](const Tensor& x) { return graft::gelu(x, "tanh"); }, gelu_tanh_ref, -5, 5},
      {"neg", [](const Tensor& x) { return graft::neg(x); }, [](double v) { return -v; }, -5, 5},
      {"abs", [](const Tensor& x) { return graft::abs(x); }, [](double v) { return std::abs(v); }, -5, 5},
      {"sign", [](const Tensor& x) { return graft::sign(x); }, [](double v) { return double((v > 0) - (v < 0)); },
       -3, 3},
      {"relu", [](const Tensor& x) { return graft::relu(x); }, [](double v) { return v > 0 ? v : 0.0; }, -3, 3},
  };
}

}  // namespace

TEST_CASE("every floating unary op matches std math in float32 and float64") {
  for (const auto& c : floating_cases()) {
    for (DType d : {kFloat32, kFloat64}) {
      INFO(c.name << " in " << d);
      Tensor x = make(spread(c.lo, c.hi, 61), {61}, d);
      Tensor y = c.op(x);
      CHECK(y.dtype() == d);
      CHECK(y.sizes() == Shape{61});
      if (d == kFloat32) check_close(y, reference(x, c.ref), {.rtol = 2e-6, .atol = 1e-6, .equal_nan = true});
      else check_close(y, reference(x, c.ref), {.rtol = 1e-13, .atol = 1e-14, .equal_nan = true});
    }
  }
}

TEST_CASE("unary ops keep the shape of multi-dimensional and 0-d inputs") {
  Tensor x = make(spread(-1, 1, 24), {2, 3, 4}, kFloat32);
  CHECK(graft::exp(x).sizes() == Shape{2, 3, 4});
  CHECK(graft::exp(x).is_contiguous());
  Tensor s = graft::scalar_tensor(0.5);
  Tensor e = graft::exp(s);
  CHECK(e.dim() == 0);
  CHECK(e.item<float>() == Approx(std::exp(0.5f)));
  Tensor empty = graft::zeros({0, 3});
  CHECK(graft::sin(empty).sizes() == Shape{0, 3});
}

TEST_CASE("special values follow IEEE and PyTorch") {
  double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  Tensor x = make({-inf, 0.0, -1.0, nan}, {4}, kFloat32);
  check_close(graft::exp(x), {0.0, 1.0, std::exp(-1.0f), nan}, {.rtol = 1e-6, .atol = 0, .equal_nan = true});
  check_close(graft::log(x), {nan, -inf, nan, nan}, kExact);
  check_close(graft::sqrt(x), {nan, 0.0, nan, nan}, kExact);
  check_close(graft::relu(x), {0.0, 0.0, 0.0, nan}, kExact);
  check_close(graft::sigmoid(make({-1000, 1000}, {2}, kFloat32)), {0.0, 1.0}, kExact);
  check_close(graft::reciprocal(make({0.0}, {1}, kFloat64)), {inf}, kExact);
}

TEST_CASE("floating unary ops on int64 and bool inputs give float32") {
  Tensor i = graft::tensor(std::vector<int64_t>{0, 1, 2, 4}, {4});
  Tensor b = graft::tensor(std::vector<bool>{false, true}, {2});
  for (auto op : {+[](const Tensor& x) { return graft::exp(x); }, +[](const Tensor& x) { return graft::sqrt(x); },
                  +[](const Tensor& x) { return graft::sigmoid(x); }, +[](const Tensor& x) { return graft::sin(x); },
                  +[](const Tensor& x) { return graft::log1p(x); }, +[](const Tensor& x) { return graft::reciprocal(x); },
                  +[](const Tensor& x) { return graft::erf(x); }, +[](const Tensor& x) { return graft::tanh(x); }}) {
    CHECK(op(i).dtype() == kFloat32);
    CHECK(op(b).dtype() == kFloat32);
  }
  check_close(graft::sqrt(i), {0, 1, std::sqrt(2.0), 2}, {.rtol = 1e-6, .atol = 0});
  check_close(graft::exp(b), {1, std::exp(1.0)}, {.rtol = 1e-6, .atol = 0});
  check_close(graft::reciprocal(i), {std::numeric_limits<double>::infinity(), 1, 0.5, 0.25}, kExact);
}

TEST_CASE("neg abs sign and relu keep int64 and are exact") {
  Tensor i = graft::tensor(std::vector<int64_t>{-3, 0, 5, -1}, {4});
  Tensor n = graft::neg(i), a = graft::abs(i), s = graft::sign(i), r = graft::relu(i);
  for (const Tensor& t : {n, a, s, r}) CHECK(t.dtype() == kInt64);
  CHECK(n.to_vector<int64_t>() == std::vector<int64_t>{3, 0, -5, 1});
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{3, 0, 5, 1});
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1, -1});
  CHECK(r.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 5, 0});
}

TEST_CASE("abs and sign of a bool tensor are the identity and stay bool") {
  Tensor b = graft::tensor(std::vector<bool>{true, false}, {2});
  CHECK(graft::abs(b).dtype() == kBool);
  CHECK(graft::sign(b).to_vector<bool>() == std::vector<bool>{true, false});
}

TEST_CASE("neg and relu refuse bool tensors with a hint") {
  Tensor b = graft::tensor(std::vector<bool>{true, false}, {2});
  CHECK_THROWS_WITH(graft::neg(b), Contains("neg") && Contains("bool tensor is not supported") &&
                                       Contains("logical_not") && Contains("[2] bool cpu"));
  CHECK_THROWS_AS(graft::neg(b), graft::Error);
  CHECK_THROWS_WITH(graft::relu(b), Contains("relu") && Contains("bool"));
  CHECK_THROWS_WITH(ops::neg_(b), Contains("neg_"));
}

// The float32 GELU and its derivative (vec_math's erfc, one exponential) on a dense grid against
// float64: a few ulp of the result where x >= -4, and relative accuracy in the far left tail,
// where x * Phi(x) is tiny and naive 0.5 * x * (1 + erf(x / sqrt 2)) loses every digit. The
// derivative Phi(x) + x phi(x) cancels near x = -0.75, so it is held to ulps of its terms' size.
TEST_CASE("float32 gelu and gelu_backward stay within a few ulp on a dense grid, the far left tail included") {
  std::vector<double> xs;
  for (double v = -13.0; v <= 10.0; v += 1.0 / 512) xs.push_back(v);
  const int64_t n = static_cast<int64_t>(xs.size());
  Tensor x = make(xs, {n}, kFloat32);
  const auto y = graft::gelu(x).to(kFloat64).to_vector<double>();
  const auto d = ops::gelu_backward(graft::ones({n}), x, "none").to(kFloat64).to_vector<double>();
  const auto xf = x.to(kFloat64).to_vector<double>();
  auto ulp = [](double r) {
    const float f = static_cast<float>(std::fabs(r));
    return static_cast<double>(std::nextafter(f, INFINITY)) - static_cast<double>(f);
  };
  double worst_main = 0, worst_tail = 0, worst_grad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double v = xf[i], cdf = 0.5 * std::erfc(-v / std::sqrt(2.0));
    const double pdf_term = v * std::exp(-0.5 * v * v) / std::sqrt(2.0 * M_PI);
    const double want = v * cdf;
    if (std::fabs(want) < 1e-36) continue;  // near float's smallest normals, where the kernel flushes
    if (v >= -4) worst_main = std::max(worst_main, std::fabs(y[i] - want) / ulp(want));
    else worst_tail = std::max(worst_tail, std::fabs(y[i] / want - 1));
    worst_grad = std::max(worst_grad, std::fabs(d[i] - (cdf + pdf_term)) / ulp(std::fabs(cdf) + std::fabs(pdf_term)));
  }
  INFO("gelu: " << worst_main << " ulp (x >= -4), " << worst_tail << " relative (x < -4); backward: " << worst_grad
                << " ulp of its terms");
  CHECK(worst_main <= 32);
  CHECK(worst_tail <= 2e-5);
  CHECK(worst_grad <= 48);
}

TEST_CASE("gelu rejects integer inputs and unknown approximations") {
  Tensor x = make({1, 2}, {2}, kFloat32);
  CHECK_THROWS_WITH(graft::gelu(x, "fast"), Contains("gelu") && Contains("none or tanh") && Contains("fast"));
  CHECK_THROWS_WITH(graft::gelu(graft::tensor(std::vector<int64_t>{1}, {1})),
                    Contains("gelu") && Contains("int64"));
}

TEST_CASE("unary ops read transposed, sliced and expanded inputs correctly") {
  std::vector<double> v = spread(-2, 2, 12);
  Tensor base = make(v, {3, 4}, kFloat64);
  // transposed: element (i, j) of t is base(j, i)
  Tensor t = base.t();
  REQUIRE_FALSE(t.is_contiguous());
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(std::exp(v[j * 4 + i]));
  Tensor y = graft::exp(t);
  CHECK(y.sizes() == Shape{4, 3});
  CHECK(y.strides() == t.strides());  // a dense input's layout is kept, as PyTorch (exp(b.t()).stride() == (1, 4))
  check_close(y, want, {.rtol = 1e-14, .atol = 0, .equal_nan = true});
  // a column slice with a step: columns 1 and 3
  Tensor s = base.slice(1, 1, 4, 2);
  want.clear();
  for (int i = 0; i < 3; ++i)
    for (int j : {1, 3}) want.push_back(std::tanh(v[i * 4 + j]));
  check_close(graft::tanh(s), want, {.rtol = 1e-14, .atol = 0, .equal_nan = true});
  // an expanded row: every row of the result is the same
  Tensor e = make({-1, 0, 2}, {1, 3}, kFloat32).expand({4, 3});
  want.clear();
  for (int i = 0; i < 4; ++i)
    for (double x : {-1.0, 0.0, 2.0}) want.push_back(std::max(x, 0.0));
  check_close(graft::relu(e), want, kExact);
  // a 3-d permutation no dims of which can be merged
  std::vector<double> w = spread(-3, 3, 24);
  Tensor p = make(w, {2, 3, 4}, kFloat64).permute({0, 2, 1});  // [2, 4, 3]
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k) want.push_back(std::abs(w[i * 12 + k * 4 + j]));
  check_close(graft::abs(p), want, kExact);
}

TEST_CASE("unary ops on large strided tensors match the small loop when split over threads") {
  // 301 x 257 = 77357 elements, above kGrainSize: the parallel chunks start mid-row.
  Tensor base = graft::randn({257, 301}, graft::dtype(kFloat64));
  Tensor t = base.t();
  Tensor y = graft::sin(t);
  std::vector<double> b = base.to_vector<double>(), got = y.to_vector<double>();
  bool all_equal = true;
  for (int i = 0; i < 301 && all_equal; ++i)
    for (int j = 0; j < 257; ++j)
      if (got[i * 257 + j] != std::sin(b[j * 301 + i])) {
        all_equal = false;
        break;
      }
  CHECK(all_equal);
}

TEST_CASE("in-place unary ops write through views and bump the version exactly once") {
  Tensor x = make(spread(0, 1, 6), {2, 3}, kFloat32);
  std::vector<double> before = x.to_vector<double>();
  Tensor col = x.slice(1, 1, 2);  // a strided view
  int64_t v0 = x.version();
  ops::sin_(col);
  CHECK(x.version() == v0 + 1);
  std::vector<double> after = x.to_vector<double>();
  for (int i = 0; i < 6; ++i) {
    double want = i % 3 == 1 ? std::sin(static_cast<float>(before[i])) : before[i];
    CHECK(after[i] == Approx(want).epsilon(1e-6));
  }
  for (auto op : {+[](Tensor& t) { ops::exp_(t); }, +[](Tensor& t) { ops::relu_(t); },
                  +[](Tensor& t) { ops::neg_(t); }, +[](Tensor& t) { ops::sqrt_(t); },
                  +[](Tensor& t) { t.sin_(); }}) {
    Tensor y = make({0.25, 1.0, 4.0}, {3}, kFloat64);
    int64_t v = y.version();
    op(y);
    CHECK(y.version() == v + 1);
  }
  Tensor y = make({0.25, -1.0, 4.0}, {3}, kFloat64);
  ops::sqrt_(y);
  check_close(y, {0.5, std::numeric_limits<double>::quiet_NaN(), 2.0}, kExact);
  y = make({-0.25, 1.0}, {2}, kFloat64);
  y.relu_();
  check_close(y, {0.0, 1.0}, kExact);
  y.exp_();
  check_close(y, {1.0, std::exp(1.0)}, {.rtol = 1e-15, .atol = 0});
  ops::neg_(y);
  check_close(y, {-1.0, -std::exp(1.0)}, {.rtol = 1e-15, .atol = 0});
}

TEST_CASE("in-place floating ops refuse int64 tensors but relu_ and neg_ accept them") {
  Tensor i = graft::tensor(std::vector<int64_t>{-1, 2}, {2});
  CHECK_THROWS_WITH(ops::sin_(i), Contains("sin_") && Contains("result type Float can't be cast to the desired "
                                                                "output type Long"));
  CHECK_THROWS_WITH(ops::exp_(i), Contains("can't be cast"));
  CHECK_THROWS_WITH(ops::sqrt_(i), Contains("can't be cast"));
  int64_t v = i.version();
  ops::relu_(i);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 2});
  ops::neg_(i);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, -2});
  CHECK(i.version() == v + 2);
}

TEST_CASE("a failed in-place op leaves the version unchanged") {
  Tensor i = graft::tensor(std::vector<int64_t>{1}, {1});
  int64_t v = i.version();
  CHECK_THROWS(ops::exp_(i));
  CHECK(i.version() == v);
}

TEST_CASE("in-place unary ops on an expanded tensor are refused") {
  Tensor e = make({1}, {1}, kFloat32).expand({3});
  CHECK_THROWS_WITH(ops::exp_(e), Contains("exp_") && Contains("more than one element"));
}

TEST_CASE("pow with a scalar exponent handles the special exponents and integers") {
  Tensor x = make({0.5, 1.0, 2.0, 3.0}, {4}, kFloat64);
  for (double e : {2.0, 3.0, 0.5, -1.0, -0.5, 0.0, 1.0, 2.5, -1.7}) {
    INFO("exponent " << e);
    check_close(graft::pow(x, e), reference(x, [e](double v) { return std::pow(v, e); }),
                {.rtol = 1e-14, .atol = 0, .equal_nan = true});
  }
  Tensor f = make({-2.0, 1.5}, {2}, kFloat32);
  CHECK(graft::pow(f, 2).dtype() == kFloat32);
  check_close(graft::pow(f, 2), {4.0, 2.25}, kExact);

  Tensor i = graft::tensor(std::vector<int64_t>{-3, 0, 2, 5}, {4});
  Tensor p = graft::pow(i, 3);
  CHECK(p.dtype() == kInt64);
  CHECK(p.to_vector<int64_t>() == std::vector<int64_t>{-27, 0, 8, 125});
  CHECK(graft::pow(i, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1, 1});
  Tensor pf = graft::pow(i, 0.5);
  CHECK(pf.dtype() == kFloat32);
  check_close(pf, {std::numeric_limits<double>::quiet_NaN(), 0, std::sqrt(2.0), std::sqrt(5.0)},
              {.rtol = 1e-6, .atol = 0, .equal_nan = true});
  CHECK_THROWS_WITH(graft::pow(i, -1), Contains("pow") && Contains("negative integer powers"));

  Tensor b = graft::tensor(std::vector<bool>{true, false}, {2});
  CHECK(graft::pow(b, 2).dtype() == kInt64);
  CHECK(graft::pow(b, 2).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK_THROWS_WITH(graft::pow(b, true), Contains("pow") && Contains("bool"));
}

TEST_CASE("logical_not gives bool for every input dtype") {
  Tensor f = make({0.0, -2.0, std::numeric_limits<double>::quiet_NaN()}, {3}, kFloat32);
  Tensor r = ops::logical_not(f);
  CHECK(r.dtype() == kBool);
  CHECK(r.to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(ops::logical_not(graft::tensor(std::vector<int64_t>{0, 3}, {2})).to_vector<bool>() ==
        std::vector<bool>{true, false});
  CHECK(ops::logical_not(graft::tensor(std::vector<bool>{true, false}, {2})).to_vector<bool>() ==
        std::vector<bool>{false, true});
}

TEST_CASE("threshold_backward passes the gradient where x is above the threshold") {
  Tensor g = make({1, 2, 3, 4}, {4}, kFloat32);
  Tensor x = make({-1, 0, 0.5, 2}, {4}, kFloat32);
  Tensor r = ops::threshold_backward(g, x, 0);
  CHECK(r.dtype() == kFloat32);
  check_close(r, {0, 0, 3, 4}, kExact);
  check_close(ops::threshold_backward(g, x, 1.0), {0, 0, 0, 4}, kExact);
  // broadcasting a 0-d gradient
  check_close(ops::threshold_backward(graft::scalar_tensor(5.0), x, 0), {0, 0, 5, 5}, kExact);
}

TEST_CASE("gelu_backward matches a central difference of gelu") {
  for (std::string approx : {"none", "tanh"}) {
    INFO(approx);
    std::vector<double> v = spread(-4, 4, 33);
    Tensor x = make(v, {33}, kFloat64);
    Tensor g = graft::full({33}, 2.0, graft::dtype(kFloat64));
    Tensor d = ops::gelu_backward(g, x, approx);
    double h = 1e-6;
    std::vector<double> want;
    for (double xv : v) {
      double fp = graft::gelu(make({xv + h}, {1}, kFloat64), approx).item<double>();
      double fm = graft::gelu(make({xv - h}, {1}, kFloat64), approx).item<double>();
      want.push_back(2.0 * (fp - fm) / (2 * h));
    }
    check_close(d, want, {.rtol = 1e-7, .atol = 1e-8, .equal_nan = true});
  }
  CHECK_THROWS_WITH(ops::gelu_backward(make({1}, {1}, kFloat32), make({1}, {1}, kFloat32), "erf"),
                    Contains("gelu_backward") && Contains("none or tanh"));
}

TEST_CASE("sigmoid_backward and tanh_backward use the saved output") {
  Tensor g = make({1, 2, -1}, {3}, kFloat64);
  Tensor y = make({0.5, 0.25, 0.9}, {3}, kFloat64);
  check_close(ops::sigmoid_backward(g, y), {0.25, 2 * 0.25 * 0.75, -0.9 * 0.1}, {.rtol = 1e-15, .atol = 0});
  check_close(ops::tanh_backward(g, y), {0.75, 2 * (1 - 0.0625), -(1 - 0.81)}, {.rtol = 1e-15, .atol = 0});
  CHECK_THROWS_WITH(ops::sigmoid_backward(graft::tensor(std::vector<int64_t>{1}, {1}),
                                          graft::tensor(std::vector<int64_t>{1}, {1})),
                    Contains("sigmoid_backward") && Contains("floating"));
}

TEST_CASE("silu matches x * sigmoid(x), saturates, and differentiates through its input") {
  // x * sigmoid(x) and s (1 + x (1 - s)) in double: torch.nn.functional.silu in float64 and its gradient
  Tensor x = make({-2.0, 0.0, 1.0, 3.0}, {4}, kFloat64);
  x.requires_grad_();
  Tensor y = x.silu();
  check_close(y, {-0.2384058440442351, 0.0, 0.7310585786300049, 2.8577223804673}, {.rtol = 1e-14, .atol = 1e-15});
  CHECK(y.grad_fn()->name() == "SiluBackward");
  y.sum().backward();
  check_close(x.grad(), {-0.09078424878489547, 0.5, 0.9276705118714869, 1.0881041060151693},
              {.rtol = 1e-13, .atol = 1e-15});
  // exp(-x) overflowing gives -0 (x * sigmoid(x) -> 0), not NaN; large x gives x.
  check_close(graft::silu(make({-1000.0, 1000.0}, {2}, kFloat32)), {-0.0, 1000.0}, kExact);
  // Integers compute in float32, as every floating unary op.
  CHECK(graft::silu(graft::tensor(std::vector<int64_t>{1, 2}, {2})).dtype() == kFloat32);
  CHECK_THROWS_WITH(ops::silu(Tensor()), Contains("silu"));
}

TEST_CASE("unary ops on undefined tensors throw") {
  CHECK_THROWS_WITH(ops::exp(Tensor()), Contains("exp") || Contains("undefined"));
}

TEST_CASE("float32 tanh rounds like tanh computed in double, keeps signs, NaN and the saturation") {
  std::vector<float> v;
  for (float x = -10.f; x < 10.f; x += 0.000731f) v.push_back(x);
  for (float x = 1e-12f; x < 1e-2f; x *= 1.01f) {
    v.push_back(x);
    v.push_back(-x);
  }
  v.push_back(0.f);
  v.push_back(-0.f);
  const int64_t n = static_cast<int64_t>(v.size());
  Tensor xs = graft::tensor(v, {n});
  // Strided input: the scalar path, which rounds exactly like tanh in double.
  Tensor strided = graft::stack({xs, xs}, 1).select(1, 0);
  REQUIRE_FALSE(strided.is_contiguous());
  std::vector<float> got = graft::tanh(strided).to_vector<float>();
  size_t mismatches = 0;
  for (size_t i = 0; i < v.size(); ++i) mismatches += got[i] != static_cast<float>(std::tanh(static_cast<double>(v[i])));
  CHECK(mismatches == 0);
  CHECK(std::signbit(got[got.size() - 1]));
  // Large contiguous input: oneDNN's vectorised tanh, within 1 ulp of that.
  std::vector<float> fast = graft::tanh(xs).to_vector<float>();
  double worst_ulp = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    float r = static_cast<float>(std::tanh(static_cast<double>(v[i])));
    double ulp = std::fabs(std::nextafter(r, INFINITY) - r);
    worst_ulp = std::max(worst_ulp, std::fabs(static_cast<double>(fast[i]) - r) / ulp);
  }
  CHECK(worst_ulp <= 1.0);
  CHECK(std::signbit(fast[fast.size() - 1]));
  // The same shape always takes the same path: bit-identical when recomputed, and in place
  // (nn::Tanh writes over an activation nothing else holds; a checkpoint re-runs it out of place).
  CHECK(graft::tanh(xs).to_vector<float>() == fast);
  Tensor in_place = xs.clone();
  const void* data = in_place.data_ptr();
  in_place.tanh_();
  CHECK(in_place.data_ptr() == data);
  CHECK(in_place.to_vector<float>() == fast);
  Tensor strided_in_place = graft::stack({xs, xs}, 1).select(1, 0);
  strided_in_place.tanh_();
  CHECK(strided_in_place.to_vector<float>() == got);
  for (int64_t len : {4, 4096}) {  // both paths
    std::vector<float> sv(static_cast<size_t>(len), 0.5f);
    sv[0] = INFINITY;
    sv[1] = -INFINITY;
    sv[2] = NAN;
    sv[3] = 50.f;
    std::vector<float> special = graft::tanh(graft::tensor(sv, {len})).to_vector<float>();
    CHECK(special[0] == 1.f);
    CHECK(special[1] == -1.f);
    CHECK(std::isnan(special[2]));
    CHECK(special[3] == 1.f);
  }
}

TEST_CASE("hardswish is x * relu6(x + 3) / 6 with PyTorch's gradient at the kinks") {
  // torch.nn.functional.hardswish in float64 at these points, and its gradient (x < -3: 0,
  // -3 <= x <= 3: x / 3 + 1/2, x > 3: 1).
  Tensor x = make({-4.0, -3.0, -1.5, 0.0, 1.0, 3.0, 5.0}, {7}, kFloat64);
  x.requires_grad_();
  Tensor y = x.hardswish();
  check_close(y, {0.0, 0.0, -0.375, 0.0, 2.0 / 3.0, 3.0, 5.0}, {.rtol = 1e-15, .atol = 1e-15});
  CHECK(y.grad_fn()->name() == "HardswishBackward");
  y.sum().backward();
  check_close(x.grad(), {0.0, -0.5, 0.0, 0.5, 5.0 / 6.0, 1.5, 1.0}, {.rtol = 1e-15, .atol = 1e-15});
  // PyTorch's formula as written: -inf * relu6(-inf) = -inf * 0 is NaN there too.
  check_close(graft::hardswish(make({NAN, -INFINITY, INFINITY}, {3}, kFloat32)), {NAN, NAN, INFINITY}, kExact);
  CHECK(graft::hardswish(graft::tensor(std::vector<int64_t>{-5, 1}, {2})).dtype() == kFloat32);
  CHECK_THROWS_WITH(ops::hardswish(Tensor()), Contains("hardswish"));
}

TEST_CASE("option arguments take the enum or PyTorch's string, and an unknown string names the op and the choices") {
  Tensor x = make({-1.0, 0.5, 2.0}, {3}, kFloat64);
  check_close(graft::gelu(x, "tanh"), graft::gelu(x, GeluApproximate::Tanh), kExact);
  check_close(x.gelu("none"), graft::gelu(x), kExact);
  CHECK_THROWS_WITH(graft::gelu(x, "fast"), Contains("gelu: approximate must be none or tanh, got 'fast'"));
  Tensor lp = graft::log_softmax(make({0.1, 0.2, 0.3, 0.4, 0.5, 0.6}, {2, 3}, kFloat64), 1);
  Tensor t = graft::tensor(std::vector<int64_t>{0, 2}, {2});
  check_close(graft::nll_loss(lp, t, {}, "sum"), graft::nll_loss(lp, t, {}, LossReduction::Sum), kExact);
  CHECK_THROWS_WITH(graft::nll_loss(lp, t, {}, "average"), Contains("reduction must be none, mean or sum, got 'average'"));
}
