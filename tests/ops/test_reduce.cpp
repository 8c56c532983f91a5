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

// The float64 kernels against a float64 reference; NaN where the reference has NaN.
const Tolerance kTight{.rtol = 1e-10, .atol = 1e-12, .equal_nan = true};

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::vector<double> random_values(int64_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(gen);
  return v;
}

Tensor make(const std::vector<double>& v, const Shape& s, DType dt = kFloat64) {
  return graft::tensor(v, s, graft::dtype(dt));
}

// Splits a row-major array into the groups of elements each output of a reduction sees, in the
// output's row-major order. reduced[d] says whether dim d is reduced.
std::vector<std::vector<double>> groups(const std::vector<double>& x, const Shape& sizes,
                                        const std::vector<bool>& reduced) {
  int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t n_out = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d]) n_out *= sizes[d];
  std::vector<std::vector<double>> g(static_cast<size_t>(n_out));
  for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
    int64_t rem = i, out = 0, mul = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      int64_t idx = rem % sizes[d];
      rem /= sizes[d];
      if (!reduced[d]) {
        out += idx * mul;
        mul *= sizes[d];
      }
    }
    g[out].push_back(x[i]);
  }
  return g;
}

Shape expected_shape(const Shape& sizes, const std::vector<bool>& reduced, bool keepdim) {
  Shape s;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (!reduced[d]) s.push_back(sizes[d]);
    else if (keepdim) s.push_back(1);
  }
  return s;
}

double ref_sum(const std::vector<double>& g) {
  double s = 0;
  for (double v : g) s += v;
  return s;
}
double ref_mean(const std::vector<double>& g) { return ref_sum(g) / static_cast<double>(g.size()); }
double ref_var(const std::vector<double>& g, int64_t correction) {
  double m = ref_mean(g), s = 0;
  for (double v : g) s += (v - m) * (v - m);
  return s / static_cast<double>(static_cast<int64_t>(g.size()) - correction);
}
double ref_max(const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); }
double ref_min(const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); }
double ref_lse(const std::vector<double>& g) {
  double m = ref_max(g), s = 0;
  for (double v : g) s += std::exp(v - m);
  return m + std::log(s);
}

// Every subset of the dims of a 3-D tensor, written with negative dims for odd masks.
std::vector<Shape> dim_sets() {
  std::vector<Shape> out;
  for (int mask = 1; mask < 8; ++mask) {
    Shape d;
    for (int64_t i = 0; i < 3; ++i)
      if (mask & (1 << i)) d.push_back(mask % 2 ? i - 3 : i);
    out.push_back(d);
  }
  out.push_back({});  // all dims
  return out;
}

std::vector<bool> reduced_mask(const Shape& dims, int64_t nd) {
  std::vector<bool> r(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) r[(d + nd) % nd] = true;
  return r;
}

using OpFn = std::function<Tensor(const Tensor&, const Shape&, bool)>;
using RefFn = std::function<double(const std::vector<double>&)>;

// Checks op against ref for every dim set and keepdim, on x (any layout) whose values are xv
// (row-major) with shape sizes.
void check_all_dim_sets(const Tensor& x, const std::vector<double>& xv, const OpFn& op, const RefFn& ref,
                        double rel = 1e-10) {
  for (const Shape& dims : dim_sets()) {
    for (bool keepdim : {false, true}) {
      INFO("dims " << shape_str(dims) << " keepdim " << keepdim);
      auto red = reduced_mask(dims, x.dim());
      Tensor out = op(x, dims, keepdim);
      CHECK(out.sizes() == expected_shape(x.sizes(), red, keepdim));
      std::vector<double> expect;
      for (auto& g : groups(xv, x.sizes(), red)) expect.push_back(ref(g));
      check_close(out, expect, {.rtol = rel, .atol = 1e-12, .equal_nan = true});
    }
  }
}

struct NamedOp {
  const char* name;
  OpFn op;
  RefFn ref;
};

std::vector<NamedOp> floating_ops() {
  return {
      {"sum", [](const Tensor& x, const Shape& d, bool k) { return ops::sum(x, d, k); }, ref_sum},
      {"mean", [](const Tensor& x, const Shape& d, bool k) { return ops::mean(x, d, k); }, ref_mean},
      {"amax", [](const Tensor& x, const Shape& d, bool k) { return ops::amax(x, d, k); }, ref_max},
      {"amin", [](const Tensor& x, const Shape& d, bool k) { return ops::amin(x, d, k); }, ref_min},
      {"var", [](const Tensor& x, const Shape& d, bool k) { return ops::var(x, d, 1, k); },
       [](const std::vector<double>& g) { return ref_var(g, 1); }},
      {"std", [](const Tensor& x, const Shape& d, bool k) { return ops::std(x, d, 1, k); },
       [](const std::vector<double>& g) { return std::sqrt(ref_var(g, 1)); }},
      {"norm", [](const Tensor& x, const Shape& d, bool k) { return ops::norm(x, 2, d, k); },
       [](const std::vector<double>& g) {
         double s = 0;
         for (double v : g) s += v * v;
         return std::sqrt(s);
       }},
      {"logsumexp", [](const Tensor& x, const Shape& d, bool k) { return ops::logsumexp(x, d, k); }, ref_lse},
  };
}

}  // namespace

TEST_CASE("each floating reduction matches a naive loop over every set of dims, with and without keepdim") {
  Shape sizes{3, 4, 5};
  auto xv = random_values(60, 1);
  Tensor x = make(xv, sizes);
  for (const auto& o : floating_ops()) {
    INFO(o.name);
    check_all_dim_sets(x, xv, o.op, o.ref);
  }
}

TEST_CASE("float32 reductions match the float64 reference") {
  Shape sizes{3, 4, 5};
  auto xv = random_values(60, 2);
  std::vector<double> rounded;
  for (double v : xv) rounded.push_back(static_cast<float>(v));
  Tensor x = make(rounded, sizes, kFloat32);
  for (const auto& o : floating_ops()) {
    INFO(o.name);
    Tensor out = o.op(x, {1}, false);
    CHECK(out.dtype() == kFloat32);
    check_all_dim_sets(x, rounded, o.op, o.ref, 1e-5);
  }
}

TEST_CASE("reductions read transposed, sliced and expanded inputs") {
  auto base = random_values(5 * 4 * 6, 3);
  Tensor b = make(base, {5, 4, 6});
  Tensor x = ops::permute(b, {1, 2, 0});  // [4, 6, 5]
  std::vector<double> xv = ops::contiguous(x).to_vector<double>();
  REQUIRE_FALSE(x.is_contiguous());
  for (const auto& o : floating_ops()) {
    INFO("permuted " << o.name);
    check_all_dim_sets(x, xv, o.op, o.ref);
  }
  Tensor s = ops::slice(ops::slice(b, 2, 1, 6, 2), 0, 0, 5, 2);  // [3, 4, 3], gaps everywhere
  std::vector<double> sv = ops::contiguous(s).to_vector<double>();
  REQUIRE_FALSE(s.is_contiguous());
  for (const auto& o : floating_ops()) {
    INFO("sliced " << o.name);
    check_all_dim_sets(s, sv, o.op, o.ref);
  }
  Tensor row = make({1, 2, 3, 4}, {1, 4, 1});
  Tensor e = ops::expand(row, {3, 4, 2});  // stride 0 in dims 0 and 2
  std::vector<double> ev = ops::contiguous(e).to_vector<double>();
  for (const auto& o : floating_ops()) {
    INFO("expanded " << o.name);
    check_all_dim_sets(e, ev, o.op, o.ref);
  }
}

TEST_CASE("a transposed matrix reduces along its contiguous dim without a wrong layout") {
  // x = b^T: reducing x's dim 0 walks b's rows, reducing dim 1 walks its columns.
  Tensor b = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor x = ops::transpose(b, 0, 1);  // [[1, 4], [2, 5], [3, 6]]
  check_close(ops::sum(x, {0}), {6, 15}, kTight);
  check_close(ops::sum(x, {1}), {5, 7, 9}, kTight);
  check_close(ops::amax(x, {0}), {3, 6}, kTight);
  check_close(ops::max(x, 1)[1], {1, 1, 1}, kTight);
}

TEST_CASE("sum over the outer dims of a contiguous tensor matches the naive loop (column path)") {
  for (Shape sizes : {Shape{70, 80}, Shape{3000, 5}, Shape{40000, 2}, Shape{9, 10, 70}}) {
    INFO("shape " << shape_str(sizes));
    int64_t n = shape_numel(sizes);
    auto xv = random_values(n, 4);
    Tensor x = make(xv, sizes);
    Shape dims = sizes.size() == 3 ? Shape{0, 1} : Shape{0};
    auto red = reduced_mask(dims, x.dim());
    std::vector<double> expect;
    for (auto& g : groups(xv, sizes, red)) expect.push_back(ref_sum(g));
    check_close(ops::sum(x, dims), expect, {.rtol = 1e-9, .atol = 1e-12, .equal_nan = true});
    std::vector<double> expect_mean;
    for (auto& g : groups(xv, sizes, red)) expect_mean.push_back(ref_mean(g));
    check_close(ops::mean(x, dims, true), expect_mean, {.rtol = 1e-9, .atol = 1e-12, .equal_nan = true});
    Tensor xf = ops::to_dtype(x, kFloat32);
    check_close(ops::sum(xf, dims), expect, {.rtol = 1e-4, .atol = 1e-3, .equal_nan = true});
  }
}

// Tall float32 and bfloat16 columns (bias gradients) are summed in bands of rows on threads: the
// result is the float64 sum of the stored values rounded once, whatever the thread count.
TEST_CASE("column sums of tall float32 and bfloat16 tensors are the rounded float64 sums, on any thread count") {
  for (Shape sizes : {Shape{2176, 128}, Shape{1030, 67}, Shape{300, 1024}, Shape{4, 17, 64}}) {
    INFO("shape " << shape_str(sizes));
    Shape dims = sizes.size() == 3 ? Shape{0, 1} : Shape{0};
    const int64_t n = shape_numel(sizes), cols = sizes.back();
    Tensor x = make(random_values(n, 11), sizes);
    for (DType dt : {kFloat32, kBFloat16}) {
      INFO("dtype " << dtype_name(dt));
      Tensor xs = ops::to_dtype(x, dt);
      std::vector<double> stored = ops::to_dtype(xs, kFloat64).to_vector<double>(), expect(cols, 0.0);
      for (int64_t i = 0; i < n; ++i) expect[i % cols] += stored[i];
      for (double& e : expect) e = static_cast<float>(e);  // one rounding of the float64 sum
      const int threads = get_num_threads();
      std::vector<std::vector<double>> by_threads;
      for (int t : {1, threads}) {
        set_num_threads(t);
        by_threads.push_back(ops::to_dtype(ops::sum(xs, dims, false, kFloat32), kFloat64).to_vector<double>());
      }
      set_num_threads(threads);
      CHECK(by_threads[0] == by_threads[1]);
      // float64 sums in another order may round to a neighbouring float, rarely: within 1 ulp.
      check_close(ops::sum(xs, dims, false, kFloat32), expect, {.rtol = 2.4e-7, .atol = 0});
    }
  }
}

TEST_CASE("float32 sums of many elements are accurate") {
  // 3e6 copies of 0.1f: a float accumulator would drift by percent; the expected error here is
  // only the rounding of 0.1 to float.
  int64_t n = 3000000;
  Tensor x = ops::full({n}, 0.1, kFloat32);
  double exact = static_cast<double>(0.1f) * static_cast<double>(n);
  CHECK(ops::sum(x).item<float>() == Approx(exact).epsilon(1e-6));
  CHECK(ops::mean(x).item<float>() == Approx(0.1f).epsilon(1e-6));
  // The same through the row split of a few long rows and through many short rows.
  Tensor x2 = ops::full({2, n / 2}, 0.1, kFloat32);
  check_close(ops::sum(x2, {1}), {exact / 2, exact / 2}, {.rtol = 1e-6, .atol = 1e-12, .equal_nan = true});
  Tensor x3 = ops::full({n / 100, 100}, 0.1, kFloat32);
  CHECK(ops::sum(x3, {0, 1}).item<float>() == Approx(exact).epsilon(1e-6));
  CHECK(ops::var(x2, {1}).to_vector<double>()[0] == Approx(0.0).margin(1e-10));
}

TEST_CASE("reductions over rows longer than one chunk match a naive loop") {
  int64_t n = 100003;  // several chunks, uneven last one
  auto xv = random_values(2 * n, 5);
  Tensor x = make(xv, {2, n});
  auto red = reduced_mask({1}, 2);
  auto g = groups(xv, {2, n}, red);
  for (const auto& o : floating_ops()) {
    INFO(o.name);
    std::vector<double> expect{o.ref(g[0]), o.ref(g[1])};
    check_close(o.op(x, {1}, false), expect, {.rtol = 1e-9, .atol = 1e-12, .equal_nan = true});
  }
}

TEST_CASE("sum of int64 and bool gives int64 and the dtype argument casts first") {
  Tensor i = graft::tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor s = ops::sum(i, {1});
  CHECK(s.dtype() == kInt64);
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{6, 15});
  Tensor b = graft::tensor(std::vector<bool>{true, false, true, true}, {4});
  Tensor sb = ops::sum(b);
  CHECK(sb.dtype() == kInt64);
  CHECK(sb.dim() == 0);
  CHECK(sb.item<int64_t>() == 3);
  Tensor sd = ops::sum(i, {}, false, kFloat64);
  CHECK(sd.dtype() == kFloat64);
  CHECK(sd.item<double>() == 21.0);
  Tensor f = make({1.7, 2.7, -0.5}, {3}, kFloat32);
  CHECK(ops::sum(f, {}, false, kInt64).item<int64_t>() == 3);  // 1 + 2 + 0: each element truncated first
  CHECK(ops::sum(f, {}, false, kFloat64).dtype() == kFloat64);
}

TEST_CASE("amax, amin, max_dim and argmax work on int64 and bool") {
  Tensor i = graft::tensor(std::vector<int64_t>{3, -7, 9, 9, 0, -7}, {2, 3});
  CHECK(ops::amax(i, {1}).to_vector<int64_t>() == std::vector<int64_t>{9, 9});
  CHECK(ops::amin(i).item<int64_t>() == -7);
  auto mx = ops::max(i, 0);
  CHECK(mx[0].to_vector<int64_t>() == std::vector<int64_t>{9, 0, 9});
  CHECK(mx[1].to_vector<int64_t>() == std::vector<int64_t>{1, 1, 0});
  CHECK(ops::argmin(i).item<int64_t>() == 1);
  Tensor b = graft::tensor(std::vector<bool>{false, true, false}, {3});
  CHECK(ops::max(b).item<bool>() == true);
  CHECK(ops::argmax(b).item<int64_t>() == 1);
}

TEST_CASE("mean, var, std and norm reject integer tensors") {
  Tensor i = graft::tensor(std::vector<int64_t>{1, 2, 3}, {3});
  CHECK_THROWS_WITH(ops::mean(i), Catch::Contains("mean") && Catch::Contains("int64"));
  CHECK_THROWS_WITH(ops::var(i), Catch::Contains("var") && Catch::Contains("floating"));
  CHECK_THROWS_WITH(ops::std(i), Catch::Contains("std"));
  CHECK_THROWS_WITH(ops::norm(i), Catch::Contains("norm"));
  CHECK_THROWS_AS(ops::mean(ops::zeros({2}, kBool)), graft::Error);
}

TEST_CASE("out of range and duplicate dims are rejected") {
  Tensor x = ops::zeros({2, 3});
  CHECK_THROWS_WITH(ops::sum(x, {2}), Catch::Contains("sum") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ops::sum(x, {-3}), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ops::sum(x, {1, -1}), Catch::Contains("sum") && Catch::Contains("multiple times"));
  CHECK_THROWS_WITH(ops::amax(x, {0, 0}), Catch::Contains("amax") && Catch::Contains("multiple times"));
  CHECK_THROWS_WITH(ops::max(x, 5), Catch::Contains("max") && Catch::Contains("out of range"));
  CHECK_THROWS_WITH(ops::argmax(x, 2), Catch::Contains("argmax"));
  CHECK_THROWS_WITH(ops::var(x, {0, 0}), Catch::Contains("var"));
}

TEST_CASE("max_dim and min_dim return values and the first index on ties") {
  Tensor x = make({1, 5, 5, 2, 0, 0, 0, 3, -1, 7, -1, 7}, {3, 4});
  auto mx = ops::max(x, 1);
  check_close(mx[0], {5, 3, 7}, kTight);
  CHECK(mx[1].dtype() == kInt64);
  CHECK(mx[1].to_vector<int64_t>() == std::vector<int64_t>{1, 3, 1});
  auto mn = ops::min(x, -1, true);
  CHECK(mn[0].sizes() == Shape{3, 1});
  CHECK(mn[1].sizes() == Shape{3, 1});
  check_close(mn[0], {1, 0, -1}, kTight);
  CHECK(mn[1].to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});
  auto m0 = ops::max(x, 0);
  check_close(m0[0], {1, 7, 5, 7}, kTight);
  CHECK(m0[1].to_vector<int64_t>() == std::vector<int64_t>{0, 2, 0, 2});
}

TEST_CASE("argmax and argmin over a dim or over the flattened tensor") {
  Tensor x = make({1, 9, 3, 9, -2, 4}, {2, 3});
  Tensor a = ops::argmax(x);
  CHECK(a.dim() == 0);
  CHECK(a.dtype() == kInt64);
  CHECK(a.item<int64_t>() == 1);  // first of the two 9s in flattened order
  CHECK(ops::argmin(x).item<int64_t>() == 4);
  CHECK(ops::argmax(x, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(ops::argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
  CHECK(ops::argmin(x, -1, true).sizes() == Shape{2, 1});
  Tensor k = ops::argmax(x, std::nullopt, true);
  CHECK(k.sizes() == Shape{1, 1});
  CHECK(k.item<int64_t>() == 1);
  // Flattened order follows the logical shape, not memory.
  Tensor t = ops::transpose(x, 0, 1);  // [[1, 9], [9, -2], [3, 4]]
  CHECK(ops::argmax(t).item<int64_t>() == 1);
  CHECK(ops::argmin(t).item<int64_t>() == 3);
}

TEST_CASE("argmax takes the first maximum even when it lies in an earlier chunk of a long row") {
  int64_t n = 200000;
  std::vector<double> v(static_cast<size_t>(n), 0.0);
  v[150000] = 5.0;
  v[40000] = 5.0;
  v[199999] = 5.0;
  v[70000] = -3.0;
  v[35000] = -3.0;
  Tensor x = make(v, {n});
  CHECK(ops::argmax(x).item<int64_t>() == 40000);
  CHECK(ops::argmin(x).item<int64_t>() == 35000);
  auto mx = ops::max(ops::view(x, {1, n}), 1);
  CHECK(mx[1].item<int64_t>() == 40000);
  CHECK(ops::max(x).item<double>() == 5.0);
  CHECK(ops::min(x).item<double>() == -3.0);
}

TEST_CASE("NaN propagates through max-like reductions and wins the index") {
  Tensor x = make({1, kNaN, 3, kNaN, 2, -1, 0, 4}, {2, 4});
  Tensor am = ops::amax(x, {1});
  auto v = am.to_vector<double>();
  CHECK(std::isnan(v[0]));
  CHECK(v[1] == 4.0);
  CHECK(std::isnan(ops::amin(x, {1}).to_vector<double>()[0]));
  auto mx = ops::max(x, 1);
  CHECK(std::isnan(mx[0].to_vector<double>()[0]));
  CHECK(mx[1].to_vector<int64_t>() == std::vector<int64_t>{1, 3});
  auto mn = ops::min(x, 1);
  CHECK(mn[1].to_vector<int64_t>() == std::vector<int64_t>{1, 1});
  CHECK(ops::argmax(x).item<int64_t>() == 1);
  CHECK(std::isnan(ops::max(x).item<double>()));
  CHECK(std::isnan(ops::min(x).item<double>()));
  CHECK(std::isnan(ops::sum(x).item<double>()));
  CHECK(std::isnan(ops::logsumexp(x, {1}).to_vector<double>()[0]));
  CHECK(std::isnan(ops::norm(x, kInf, {1}).to_vector<double>()[0]));
  Tensor f = make({kNaN, 1}, {2}, kFloat32);
  CHECK(std::isnan(ops::amax(f).item<float>()));
}

TEST_CASE("reducing an empty dim: sum gives 0, mean NaN, max-like ops throw") {
  Tensor x = ops::zeros({0, 3});
  Tensor s = ops::sum(x, {0});
  CHECK(s.sizes() == Shape{3});
  check_close(s, {0, 0, 0}, kTight);
  CHECK(ops::sum(x).item<float>() == 0.0f);
  CHECK(std::isnan(ops::mean(x).item<float>()));
  CHECK(ops::sum(x, {1}).sizes() == Shape{0});
  CHECK(ops::amax(x, {1}).sizes() == Shape{0});  // reduced dim is not empty: fine
  CHECK_THROWS_WITH(ops::amax(x, {0}), Catch::Contains("amax") && Catch::Contains("non-zero size"));
  CHECK_THROWS_WITH(ops::amin(x), Catch::Contains("amin") && Catch::Contains("dim 0"));
  CHECK_THROWS_WITH(ops::max(x, 0), Catch::Contains("max") && Catch::Contains("non-zero size"));
  CHECK_THROWS_WITH(ops::argmax(x), Catch::Contains("argmax"));
  CHECK_THROWS_WITH(ops::max(x), Catch::Contains("max") && Catch::Contains("empty") && Catch::Contains("[0, 3]"));
  CHECK_THROWS_WITH(ops::min(x), Catch::Contains("min") && Catch::Contains("empty"));
  CHECK(ops::norm(x).item<float>() == 0.0f);
  CHECK_THROWS_WITH(ops::norm(x, kInf), Catch::Contains("norm"));
  CHECK(ops::logsumexp(x, {0}).to_vector<double>()[0] == -kInf);
  CHECK(std::isnan(ops::var(x).item<float>()));
}

TEST_CASE("var and std honour the correction") {
  Tensor x = make({1, 2, 3, 4, 10, 20, 30, 40}, {2, 4});
  check_close(ops::var(x, {1}), {5.0 / 3.0, 500.0 / 3.0}, kTight);
  check_close(ops::var(x, {1}, 0), {1.25, 125.0}, kTight);
  check_close(ops::std(x, {1}, 0), {std::sqrt(1.25), std::sqrt(125.0)}, kTight);
  check_close(ops::var(x, {1}, 2, true), {2.5, 250.0}, kTight);
  CHECK(ops::var(x, {1}, 2, true).sizes() == Shape{2, 1});
  CHECK(ops::var(x, {0, 1}).item<double>() == Approx(ref_var({1, 2, 3, 4, 10, 20, 30, 40}, 1)));
  // One element with correction 1 divides by zero: NaN, as PyTorch.
  CHECK(std::isnan(ops::var(make({3}, {1})).item<double>()));
  // A large offset does not destroy precision (two-pass).
  Tensor big = make({1e9 + 1, 1e9 + 2, 1e9 + 3}, {3});
  CHECK(ops::var(big).item<double>() == Approx(1.0).epsilon(1e-9));
}

TEST_CASE("norm handles p = 2, 1, inf, -inf, 0 and general p") {
  Tensor x = make({3, -4, 0, 1, -2, 2}, {2, 3});
  check_close(ops::norm(x, 2, {1}), {5.0, 3.0}, kTight);
  check_close(ops::norm(x, 1, {1}), {7.0, 5.0}, kTight);
  check_close(ops::norm(x, kInf, {1}), {4.0, 2.0}, kTight);
  check_close(ops::norm(x, -kInf, {1}), {0.0, 1.0}, kTight);
  check_close(ops::norm(x, 0, {1}), {2.0, 3.0}, kTight);
  check_close(ops::norm(x, 3, {1}), {std::cbrt(27.0 + 64.0), std::cbrt(1.0 + 8 + 8)}, kTight);
  check_close(ops::norm(x, 0.5, {0}), {std::pow(std::sqrt(3.0) + 1, 2), std::pow(2 + std::sqrt(2.0), 2), 2.0}, kTight);
  CHECK(ops::norm(x).item<double>() == Approx(std::sqrt(9.0 + 16 + 1 + 4 + 4)));
  CHECK(ops::norm(x, 2, {0, 1}, true).sizes() == Shape{1, 1});
}

TEST_CASE("logsumexp is stable for large values and handles -inf rows") {
  Tensor x = make({1000, 1000, -kInf, -kInf, 1, 2}, {3, 2});
  auto v = ops::logsumexp(x, {1}).to_vector<double>();
  CHECK(v[0] == Approx(1000 + std::log(2.0)));
  CHECK(v[1] == -kInf);
  CHECK(v[2] == Approx(std::log(std::exp(1.0) + std::exp(2.0))));
  Tensor f = make({100, 100.5, -1e30}, {3}, kFloat32);
  CHECK(ops::logsumexp(f, {0}).item<float>() == Approx(100.5 + std::log1p(std::exp(-0.5))).epsilon(1e-6));
  Tensor inf = make({kInf, 1}, {2});
  CHECK(ops::logsumexp(inf, {0}).item<double>() == kInf);
  // Integers are computed in float32, as PyTorch.
  Tensor i = graft::tensor(std::vector<int64_t>{0, 0}, {2});
  Tensor li = ops::logsumexp(i, {0});
  CHECK(li.dtype() == kFloat32);
  CHECK(li.item<float>() == Approx(std::log(2.0)));
}

TEST_CASE("sum_to undoes broadcasting") {
  auto gv = random_values(2 * 3 * 4, 6);
  Tensor g = make(gv, {2, 3, 4});
  // Leading dims only.
  Tensor a = ops::sum_to(g, {3, 4});
  CHECK(a.sizes() == Shape{3, 4});
  std::vector<double> ea;
  for (auto& grp : groups(gv, {2, 3, 4}, {true, false, false})) ea.push_back(ref_sum(grp));
  check_close(a, ea, kTight);
  // Size-1 dims kept in place, plus leading dims.
  Tensor b = ops::sum_to(g, {3, 1});
  CHECK(b.sizes() == Shape{3, 1});
  std::vector<double> eb;
  for (auto& grp : groups(gv, {2, 3, 4}, {true, false, true})) eb.push_back(ref_sum(grp));
  check_close(b, eb, kTight);
  Tensor c = ops::sum_to(g, {1, 1, 4});
  CHECK(c.sizes() == Shape{1, 1, 4});
  Tensor d = ops::sum_to(g, {});
  CHECK(d.dim() == 0);
  CHECK(d.item<double>() == Approx(ref_sum(gv)));
  // Nothing broadcast: the same tensor comes back.
  CHECK(ops::sum_to(g, {2, 3, 4}).is_same(g));
  CHECK_THROWS_WITH(ops::sum_to(g, {5, 4}), Catch::Contains("sum_to") && Catch::Contains("[2, 3, 4]") &&
                                                Catch::Contains("[5, 4]"));
  CHECK_THROWS_WITH(ops::sum_to(g, {1, 2, 3, 4}), Catch::Contains("sum_to"));
}

TEST_CASE("a 0-d tensor reduces over no dims or over dim 0 / -1") {
  Tensor x = graft::scalar_tensor(2.5, graft::dtype(kFloat64));
  CHECK(ops::sum(x).item<double>() == 2.5);
  CHECK(ops::sum(x, {0}).dim() == 0);
  CHECK(ops::mean(x, {-1}, true).dim() == 0);
  auto mx = ops::max(x, 0);
  CHECK(mx[0].item<double>() == 2.5);
  CHECK(mx[1].item<int64_t>() == 0);
  CHECK(ops::argmax(x).item<int64_t>() == 0);
  CHECK(ops::logsumexp(x, {0}).item<double>() == 2.5);
  CHECK_THROWS_WITH(ops::sum(x, {1}), Catch::Contains("out of range"));
}

TEST_CASE("reductions of big tensors split over threads give the same result as small pieces") {
  // Many medium rows (parallel over outputs) against the per-row naive loop.
  int64_t rows = 600, cols = 257;
  auto xv = random_values(rows * cols, 7);
  Tensor x = make(xv, {rows, cols});
  auto g = groups(xv, {rows, cols}, {false, true});
  std::vector<double> es, ev, el;
  for (auto& grp : g) {
    es.push_back(ref_sum(grp));
    ev.push_back(ref_var(grp, 1));
    el.push_back(ref_lse(grp));
  }
  check_close(ops::sum(x, {1}), es, kTight);
  check_close(ops::var(x, {1}), ev, kTight);
  check_close(ops::logsumexp(x, {1}), el, kTight);
  auto idx = ops::argmax(x, 1).to_vector<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    auto& grp = g[r];
    CHECK(idx[r] == std::max_element(grp.begin(), grp.end()) - grp.begin());
  }
}

TEST_CASE("reductions over middle and outer dims of contiguous tensors read tiles in place") {
  // dim 1 of [4, 50, 37]: 37 columns per outer index, i.e. two full tiles of 16 and a partial one.
  Shape sizes{4, 50, 37};
  auto xv = random_values(4 * 50 * 37, 8);
  Tensor x = make(xv, sizes);
  for (Shape dims : {Shape{1}, Shape{0}, Shape{0, 1}}) {
    auto red = reduced_mask(dims, 3);
    auto g = groups(xv, sizes, red);
    for (const auto& o : floating_ops()) {
      INFO(o.name << " dims " << shape_str(dims));
      std::vector<double> expect;
      for (auto& grp : g) expect.push_back(o.ref(grp));
      check_close(o.op(x, dims, true), expect, kTight);
    }
  }
  auto g1 = groups(xv, sizes, {false, true, false});
  auto mx = ops::max(x, 1);
  auto mxv = mx[1].to_vector<int64_t>();
  for (size_t i = 0; i < g1.size(); ++i) {
    CHECK(mxv[i] == std::max_element(g1[i].begin(), g1[i].end()) - g1[i].begin());
    CHECK(mx[0].to_vector<double>()[i] == ref_max(g1[i]));
  }
  Tensor xi = ops::to_dtype(make(xv, sizes), kInt64);  // truncated values, many ties
  auto mi = ops::min(xi, 0);
  auto gi = groups(ops::to_dtype(xi, kFloat64).to_vector<double>(), sizes, {true, false, false});
  auto miv = mi[1].to_vector<int64_t>();
  for (size_t i = 0; i < gi.size(); ++i)
    CHECK(miv[i] == std::min_element(gi[i].begin(), gi[i].end()) - gi[i].begin());
}

TEST_CASE("tiled reductions over a long outer dim keep first-occurrence indices across chunks") {
  int64_t n = 70000;  // more than two chunks of rows
  std::vector<double> v(static_cast<size_t>(n * 3), 0.0);
  v[50000 * 3 + 0] = 2.0;  // column 0: max in the second chunk, repeated in the third
  v[69000 * 3 + 0] = 2.0;
  v[10 * 3 + 1] = 1.0;  // column 1: max early, repeated later
  v[65000 * 3 + 1] = 1.0;
  v[33000 * 3 + 2] = -1.0;  // column 2: max is 0 at index 0; min at 33000
  Tensor x = make(v, {n, 3});
  CHECK(ops::argmax(x, 0).to_vector<int64_t>() == std::vector<int64_t>{50000, 10, 0});
  CHECK(ops::argmin(x, 0).to_vector<int64_t>() == std::vector<int64_t>{0, 0, 33000});
  check_close(ops::amax(x, {0}), {2, 1, 0}, kTight);
  check_close(ops::sum(x, {0}), {4, 2, -1}, kTight);
  check_close(ops::var(x, {0}), {8.0 / (n - 1) - 16.0 / n / (n - 1), 2.0 / (n - 1) - 4.0 / n / (n - 1),
                                 1.0 / (n - 1) - 1.0 / n / (n - 1)}, {.rtol = 1e-9, .atol = 1e-12, .equal_nan = true});
}
