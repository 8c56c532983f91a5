#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;

namespace {

std::vector<double> values(const Tensor& t) { return ops::to_dtype(t, kFloat64).to_vector<double>(); }

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// ---- naive convolution references (double, contiguous NCHW values) ----

struct Conv {
  int64_t N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, groups;
  bool bias;
  int64_t OH() const { return (H + 2 * ph - dh * (kh - 1) - 1) / sh + 1; }
  int64_t OW() const { return (W + 2 * pw - dw * (kw - 1) - 1) / sw + 1; }
  Shape in() const { return {N, C, H, W}; }
  Shape wt() const { return {O, C / groups, kh, kw}; }
  Shape out() const { return {N, O, OH(), OW()}; }
  Shape stride() const { return {sh, sw}; }
  Shape pad() const { return {ph, pw}; }
  Shape dil() const { return {dh, dw}; }
};

// Calls f(out_index, in_index, weight_index) for every (output, kernel tap) pair that reads an
// input element inside the image: the definition of the convolution, written independently of
// the kernels (plain bounds checks, no precomputed ranges).
template <class F>
void for_each_tap(const Conv& c, F&& f) {
  int64_t Cg = c.C / c.groups, Og = c.O / c.groups, OH = c.OH(), OW = c.OW();
  for (int64_t n = 0; n < c.N; ++n)
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow)
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t i = 0; i < c.kh; ++i)
              for (int64_t j = 0; j < c.kw; ++j) {
                int64_t h = oh * c.sh - c.ph + i * c.dh, w = ow * c.sw - c.pw + j * c.dw;
                if (h < 0 || h >= c.H || w < 0 || w >= c.W) continue;
                int64_t cin = (o / Og) * Cg + ci;
                f(((n * c.O + o) * OH + oh) * OW + ow, ((n * c.C + cin) * c.H + h) * c.W + w,
                  ((o * Cg + ci) * c.kh + i) * c.kw + j);
              }
}

std::vector<double> ref_conv(const Conv& c, const std::vector<double>& x, const std::vector<double>& w,
                             const std::vector<double>& b) {
  std::vector<double> y(static_cast<size_t>(shape_numel(c.out())), 0.0);
  if (!b.empty())
    for (size_t i = 0; i < y.size(); ++i) y[i] = b[(i / static_cast<size_t>(c.OH() * c.OW())) % c.O];
  for_each_tap(c, [&](int64_t yo, int64_t xi, int64_t wi) { y[yo] += x[xi] * w[wi]; });
  return y;
}
std::vector<double> ref_conv_bwd_input(const Conv& c, const std::vector<double>& gy, const std::vector<double>& w) {
  std::vector<double> gx(static_cast<size_t>(shape_numel(c.in())), 0.0);
  for_each_tap(c, [&](int64_t yo, int64_t xi, int64_t wi) { gx[xi] += gy[yo] * w[wi]; });
  return gx;
}
std::vector<double> ref_conv_bwd_weight(const Conv& c, const std::vector<double>& gy, const std::vector<double>& x) {
  std::vector<double> gw(static_cast<size_t>(shape_numel(c.wt())), 0.0);
  for_each_tap(c, [&](int64_t yo, int64_t xi, int64_t wi) { gw[wi] += gy[yo] * x[xi]; });
  return gw;
}

const std::vector<Conv>& conv_cases() {
  static const std::vector<Conv> cases = {
      // N, C, H, W, O, kh, kw, sh, sw, ph, pw, dh, dw, groups, bias
      {2, 3, 7, 6, 4, 3, 3, 1, 1, 0, 0, 1, 1, 1, true},
      {2, 4, 9, 8, 6, 3, 2, 2, 1, 1, 2, 1, 1, 2, true},   // asymmetric kernel/stride/padding, groups
      {1, 6, 10, 10, 6, 3, 3, 2, 2, 1, 1, 2, 2, 3, false},  // dilation
      {2, 4, 5, 5, 8, 3, 3, 1, 1, 1, 1, 1, 1, 4, true},   // depthwise with multiplier 2
      {2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, // enough channels for blocked layouts
      {3, 1, 8, 8, 5, 3, 3, 2, 2, 0, 0, 1, 1, 1, false},  // floor: the last input row is never read
      {1, 2, 4, 4, 3, 1, 1, 1, 1, 0, 0, 1, 1, 1, true},   // 1x1
  };
  return cases;
}

// ---- naive pooling references ----

struct Pool {
  int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw;
  bool ceil;
};

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  double exact = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(exact) : std::floor(exact)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;  // the last window must start inside input or left padding
  return o;
}

// {values, indices} of max pooling: the first maximum in window scan order wins.
std::pair<std::vector<double>, std::vector<int64_t>> ref_max_pool(const Pool& p, const std::vector<double>& x) {
  int64_t OH = out_size(p.H, p.kh, p.sh, p.ph, p.dh, p.ceil), OW = out_size(p.W, p.kw, p.sw, p.pw, p.dw, p.ceil);
  std::vector<double> y;
  std::vector<int64_t> ind;
  for (int64_t pl = 0; pl < p.N * p.C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t bi = -1;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            int64_t h = oh * p.sh - p.ph + i * p.dh, w = ow * p.sw - p.pw + j * p.dw;
            if (h < 0 || h >= p.H || w < 0 || w >= p.W) continue;
            double v = x[pl * p.H * p.W + h * p.W + w];
            if (bi < 0 || v > best) {
              best = v;
              bi = h * p.W + w;
            }
          }
        y.push_back(best);
        ind.push_back(bi);
      }
  return {y, ind};
}

// Average pooling; `grad` (if non-empty) instead scatters grad/divisor back to the input.
std::vector<double> ref_avg_pool(const Pool& p, bool include_pad, const std::vector<double>& x,
                                 const std::vector<double>& grad = {}) {
  int64_t OH = out_size(p.H, p.kh, p.sh, p.ph, 1, p.ceil), OW = out_size(p.W, p.kw, p.sw, p.pw, 1, p.ceil);
  std::vector<double> y, gx(x.size(), 0.0);
  for (int64_t pl = 0; pl < p.N * p.C; ++pl)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        double s = 0;
        int64_t inside = 0, padded = 0;
        for (int64_t i = 0; i < p.kh; ++i)
          for (int64_t j = 0; j < p.kw; ++j) {
            int64_t h = oh * p.sh - p.ph + i, w = ow * p.sw - p.pw + j;
            if (h >= p.H + p.ph || w >= p.W + p.pw) continue;  // beyond the right padding (ceil_mode)
            ++padded;
            if (h < 0 || h >= p.H || w < 0 || w >= p.W) continue;
            ++inside;
            s += x[pl * p.H * p.W + h * p.W + w];
          }
        double div = static_cast<double>(include_pad ? padded : inside);
        y.push_back(inside ? s / div : 0.0);
        if (!grad.empty() && inside) {
          double g = grad[(pl * OH + oh) * OW + ow] / div;
          for (int64_t i = 0; i < p.kh; ++i)
            for (int64_t j = 0; j < p.kw; ++j) {
              int64_t h = oh * p.sh - p.ph + i, w = ow * p.sw - p.pw + j;
              if (h >= 0 && h < p.H && w >= 0 && w < p.W) gx[pl * p.H * p.W + h * p.W + w] += g;
            }
        }
      }
  return grad.empty() ? y : gx;
}

const std::vector<Pool>& pool_cases() {
  static const std::vector<Pool> cases = {
      // N, C, H, W, kh, kw, sh, sw, ph, pw, dh, dw, ceil
      {2, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, false},
      {1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, false},
      {1, 2, 7, 5, 3, 3, 2, 2, 1, 1, 1, 1, true},
      {2, 2, 5, 7, 2, 3, 2, 3, 0, 1, 1, 1, true},
      {1, 3, 6, 6, 3, 3, 3, 3, 1, 1, 1, 1, true},   // ceil adds a window that starts in the input
      {1, 1, 5, 5, 3, 3, 3, 3, 1, 1, 1, 1, true},   // ceil's extra window would start in the right padding: dropped
      {1, 2, 9, 8, 3, 2, 1, 2, 1, 1, 2, 2, false},  // dilation (max pool only)
      {2, 2, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, false},  // overlapping windows
  };
  return cases;
}

}  // namespace

// ---- convolution ----

TEST_CASE("conv2d matches a direct loop for strides, padding, dilation, groups and bias") {
  for (const Conv& c : conv_cases()) {
    for (DType dt : {kFloat32, kFloat64}) {
      INFO("C=" << c.C << " O=" << c.O << " groups=" << c.groups << " dtype=" << dt);
      Tensor x = randn(c.in(), dtype(dt)), w = randn(c.wt(), dtype(dt));
      Tensor b = c.bias ? randn({c.O}, dtype(dt)) : Tensor();
      Tensor y = ops::conv2d(x, w, b, c.stride(), c.pad(), c.dil(), c.groups);
      CHECK(y.sizes() == c.out());
      CHECK(y.dtype() == dt);
      check_close(y, ref_conv(c, values(x), values(w), c.bias ? values(b) : std::vector<double>{}),
                  Tolerance::within(dt == kFloat32 ? 1e-4 : 1e-12));
    }
  }
}

TEST_CASE("conv2d accepts unbatched CHW input and non-contiguous tensors") {
  Conv c{1, 3, 6, 5, 4, 3, 3, 1, 1, 1, 1, 1, 1, 1, true};
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = randn({3, 6, 5}, dtype(dt)), w = randn(c.wt(), dtype(dt)), b = randn({4}, dtype(dt));
    Tensor y = ops::conv2d(x, w, b, {1, 1}, {1, 1});
    CHECK(y.sizes() == Shape{4, 6, 5});
    std::vector<double> want = ref_conv(c, values(x), values(w), values(b));
    check_close(y, want, Tolerance::within(dt == kFloat32 ? 1e-4 : 1e-12));
    // The same values laid out as [W, H, C] and permuted back, and a weight sliced along O.
    Tensor xp = ops::contiguous(x.permute({2, 1, 0})).permute({2, 1, 0});
    Tensor wbig = randn({8, 3, 3, 3}, dtype(dt));
    Tensor ws = wbig.slice(0, 0, 8, 2);
    CHECK_FALSE(xp.is_contiguous());
    CHECK_FALSE(ws.is_contiguous());
    check_close(ops::conv2d(xp, ws, b, {1}, {1}), ref_conv(c, values(x), values(ws), values(b)),
                Tolerance::within(dt == kFloat32 ? 1e-4 : 1e-12));
  }
}

TEST_CASE("conv2d_backward_input matches a direct scatter loop, including rows no window reads") {
  for (const Conv& c : conv_cases()) {
    for (DType dt : {kFloat32, kFloat64}) {
      INFO("C=" << c.C << " O=" << c.O << " groups=" << c.groups << " dtype=" << dt);
      Tensor gy = randn(c.out(), dtype(dt)), w = randn(c.wt(), dtype(dt));
      Tensor gx = ops::conv2d_backward_input(gy, c.in(), w, c.stride(), c.pad(), c.dil(), c.groups);
      CHECK(gx.sizes() == c.in());
      check_close(gx, ref_conv_bwd_input(c, values(gy), values(w)), Tolerance::within(dt == kFloat32 ? 1e-4 : 1e-12));
    }
  }
}

TEST_CASE("conv2d_backward_weight matches a direct loop") {
  for (const Conv& c : conv_cases()) {
    for (DType dt : {kFloat32, kFloat64}) {
      INFO("C=" << c.C << " O=" << c.O << " groups=" << c.groups << " dtype=" << dt);
      Tensor gy = randn(c.out(), dtype(dt)), x = randn(c.in(), dtype(dt));
      Tensor gw = ops::conv2d_backward_weight(gy, x, c.wt(), c.stride(), c.pad(), c.dil(), c.groups);
      CHECK(gw.sizes() == c.wt());
      check_close(gw, ref_conv_bwd_weight(c, values(gy), values(x)), Tolerance::within(dt == kFloat32 ? 1e-3 : 1e-12));
    }
  }
}

TEST_CASE("conv2d_backward_weight_bias: the weight gradient and the bias's, from one pass where the kernel allows") {
  // oneDNN's weight-gradient primitive with a bias (float32, bf16; NCHW and channels-last), the
  // few-channels bf16 loops, the patch product, float64 loops and unbatched shapes (the last three
  // by a sum): each against conv2d_backward_weight and a float64 sum of grad_out per channel.
  struct Case {
    Conv c;
    DType dt;
    bool channels_last;
  };
  std::vector<Case> cases;
  for (const Conv& c : conv_cases())
    for (DType dt : {kFloat32, kFloat64})
      for (bool cl : {false, true}) cases.push_back({c, dt, cl});
  cases.push_back({{4, 1, 10, 10, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, kBFloat16, true});  // few channels
  cases.push_back({{3, 3, 9, 9, 20, 3, 3, 2, 2, 1, 1, 1, 1, 1, true}, kBFloat16, true});    // few, odd O
  cases.push_back({{2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, kBFloat16, true});   // oneDNN bf16
  cases.push_back({{2, 16, 8, 8, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, true}, kBFloat16, false});
  cases.push_back({{4, 1, 14, 14, 16, 7, 7, 7, 7, 0, 0, 1, 1, 1, true}, kFloat32, true});   // patches
  cases.push_back({{4, 1, 14, 14, 16, 7, 7, 7, 7, 0, 0, 1, 1, 1, true}, kBFloat16, true});
  for (const Case& k : cases) {
    const Conv& c = k.c;
    INFO("C=" << c.C << " O=" << c.O << " k=" << c.kh << " groups=" << c.groups << " dtype=" << k.dt
              << (k.channels_last ? " channels-last" : ""));
    Tensor gy = randn(c.out()).to(k.dt), x = randn(c.in()).to(k.dt);
    if (k.channels_last) {
      gy = gy.contiguous(MemoryFormat::ChannelsLast);
      x = x.contiguous(MemoryFormat::ChannelsLast);
    }
    std::vector<Tensor> wb = ops::conv2d_backward_weight_bias(gy, x, c.wt(), c.stride(), c.pad(), c.dil(), c.groups);
    REQUIRE(wb.size() == 2);
    CHECK(wb[1].sizes() == Shape{c.O});
    CHECK(wb[1].dtype() == k.dt);
    const double tol = k.dt == kBFloat16 ? 1e-2 : k.dt == kFloat32 ? 1e-4 : 1e-12;
    check_close(wb[0], values(ops::conv2d_backward_weight(gy, x, c.wt(), c.stride(), c.pad(), c.dil(), c.groups)),
                Tolerance::within(tol));
    std::vector<double> g = values(gy.contiguous()), want(static_cast<size_t>(c.O), 0.0);
    const int64_t plane = c.OH() * c.OW();
    for (size_t i = 0; i < g.size(); ++i) want[static_cast<size_t>((static_cast<int64_t>(i) / plane) % c.O)] += g[i];
    check_close(wb[1], want, Tolerance::within(tol));
  }
  // Unbatched, and an empty batch (a zero bias gradient).
  Tensor gy = randn({3, 5, 5}), x = randn({2, 5, 5});
  std::vector<Tensor> wb = ops::conv2d_backward_weight_bias(gy, x, {3, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1);
  check_close(wb[1], values(graft::sum(gy, Shape{1, 2})), Tolerance::within(1e-5));
  wb = ops::conv2d_backward_weight_bias(randn({0, 3, 5, 5}), randn({0, 2, 5, 5}), {3, 2, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1);
  CHECK(values(wb[1]) == std::vector<double>(3, 0.0));
}

TEST_CASE("conv2d backward kernels agree with finite differences of the forward in float64") {
  Conv c{1, 2, 5, 4, 2, 2, 3, 2, 1, 1, 1, 1, 1, 2, false};
  Tensor x = randn(c.in(), dtype(kFloat64)), w = randn(c.wt(), dtype(kFloat64)), gy = randn(c.out(), dtype(kFloat64));
  std::vector<double> gyv = values(gy);
  // L(x, w) = sum(conv2d(x, w) * gy); dL/dx and dL/dw by central differences.
  auto loss = [&](const std::vector<double>& xv, const std::vector<double>& wv) {
    Tensor y = ops::conv2d(tensor(xv, c.in()), tensor(wv, c.wt()), {}, c.stride(), c.pad(), c.dil(), c.groups);
    return dot(values(y), gyv);
  };
  std::vector<double> xv = values(x), wv = values(w);
  std::vector<double> gx = values(ops::conv2d_backward_input(gy, c.in(), w, c.stride(), c.pad(), c.dil(), c.groups));
  std::vector<double> gw = values(ops::conv2d_backward_weight(gy, x, c.wt(), c.stride(), c.pad(), c.dil(), c.groups));
  const double h = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    std::vector<double> p = xv, m = xv;
    p[i] += h;
    m[i] -= h;
    CHECK(gx[i] == Approx((loss(p, wv) - loss(m, wv)) / (2 * h)).margin(1e-7));
  }
  for (size_t i = 0; i < wv.size(); ++i) {
    std::vector<double> p = wv, m = wv;
    p[i] += h;
    m[i] -= h;
    CHECK(gw[i] == Approx((loss(xv, p) - loss(xv, m)) / (2 * h)).margin(1e-7));
  }
}

TEST_CASE("conv2d backward kernels accept unbatched shapes") {
  Conv c{1, 2, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, false};
  Tensor gy = randn({3, 5, 5}, dtype(kFloat32)), w = randn(c.wt(), dtype(kFloat32)), x = randn({2, 5, 5});
  Tensor gx = ops::conv2d_backward_input(gy, {2, 5, 5}, w, {1, 1}, {1, 1}, {1, 1}, 1);
  CHECK(gx.sizes() == Shape{2, 5, 5});
  check_close(gx, ref_conv_bwd_input(c, values(gy), values(w)), Tolerance::within(1e-4));
  Tensor gw = ops::conv2d_backward_weight(gy, x, c.wt(), {1, 1}, {1, 1}, {1, 1}, 1);
  check_close(gw, ref_conv_bwd_weight(c, values(gy), values(x)), Tolerance::within(1e-4));
}

TEST_CASE("conv2d rejects bad shapes, groups and dtypes with messages naming the shapes") {
  Tensor x = randn({1, 4, 8, 8});
  CHECK_THROWS_WITH(ops::conv2d(x, randn({4, 4, 3})), Catch::Contains("expected a 4-D weight"));
  CHECK_THROWS_WITH(ops::conv2d(randn({4, 8}), randn({4, 4, 3, 3})), Catch::Contains("expected a 3-D (unbatched) or 4-D"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 3, 3, 3})),
                    Catch::Contains("weight of size [2, 3, 3, 3], expected input [1, 4, 8, 8] to have 3 channels, but got 4"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 4, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 3),
                    Catch::Contains("input channels 4 (input [1, 4, 8, 8]) are not divisible by groups=3"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({3, 2, 3, 3}), {}, {1, 1}, {0, 0}, {1, 1}, 2),
                    Catch::Contains("out channels 3 (weight [3, 2, 3, 3]) are not divisible by groups=2"));
  CHECK_THROWS_WITH(ops::conv2d(randn({1, 4, 2, 2}), randn({2, 4, 3, 3})), Catch::Contains("smaller than the kernel"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 4, 3, 3}), randn({3})), Catch::Contains("expected bias of shape [2]"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 4, 3, 3}, dtype(kFloat64))), Catch::Contains("must have the same dtype"));
  CHECK_THROWS_WITH(ops::conv2d(randint(0, 3, {1, 4, 8, 8}), randint(0, 3, {2, 4, 3, 3})),
                    Catch::Contains("expected a float32 or float64 input"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 4, 3, 3}), {}, {0, 1}), Catch::Contains("stride must be positive"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 4, 3, 3}), {}, {1, 1, 1}), Catch::Contains("stride must be one int or a pair"));
  CHECK_THROWS_WITH(ops::conv2d(x, randn({2, 4, 3, 3}), {}, {1}, {-1}), Catch::Contains("padding must be non-negative"));
  CHECK_THROWS_WITH(ops::conv2d_backward_input(randn({1, 2, 5, 5}), {1, 4, 8, 8}, randn({2, 4, 3, 3}), {1, 1}, {0, 0},
                                               {1, 1}, 1),
                    Catch::Contains("expected grad_out of shape [1, 2, 6, 6]"));
  CHECK_THROWS_WITH(ops::conv2d_backward_weight(randn({1, 2, 6, 6}), x, {2, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1),
                    Catch::Contains("expected grad_out of shape [1, 2, 8, 8]"));
}

// ---- pooling ----

TEST_CASE("max_pool2d_with_indices matches a direct loop, including padding, dilation and ceil_mode") {
  for (const Pool& p : pool_cases()) {
    for (DType dt : {kFloat32, kFloat64}) {
      INFO("H=" << p.H << " W=" << p.W << " k=" << p.kh << "x" << p.kw << " ceil=" << p.ceil << " dtype=" << dt);
      Tensor x = randn({p.N, p.C, p.H, p.W}, dtype(dt));
      auto r = ops::max_pool2d_with_indices(x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.ceil);
      auto [want, want_ind] = ref_max_pool(p, values(x));
      int64_t OH = out_size(p.H, p.kh, p.sh, p.ph, p.dh, p.ceil), OW = out_size(p.W, p.kw, p.sw, p.pw, p.dw, p.ceil);
      CHECK(r[0].sizes() == Shape{p.N, p.C, OH, OW});
      CHECK(r[1].dtype() == kInt64);
      check_close(r[0], want, Tolerance::exact());
      CHECK(r[1].to_vector<int64_t>() == want_ind);
      check_close(ops::max_pool2d(x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, {p.dh, p.dw}, p.ceil), want,
                  Tolerance::exact());
    }
  }
}

TEST_CASE("max_pool2d gives PyTorch's values and flat per-plane indices on a known input") {
  Tensor x = ops::arange(0, 32, 1, kFloat32).view({2, 4, 4});  // unbatched: two planes
  auto r = ops::max_pool2d_with_indices(x, {2});               // stride defaults to the kernel
  CHECK(r[0].sizes() == Shape{2, 2, 2});
  CHECK(r[0].to_vector<float>() == std::vector<float>{5, 7, 13, 15, 21, 23, 29, 31});
  CHECK(r[1].to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15, 5, 7, 13, 15});
  // ceil_mode sizes: 5 -> 3 windows of 2 (the last one partial); 6 with k3 s3 p1 -> 3.
  CHECK(ops::max_pool2d(randn({1, 1, 5, 5}), {2}, {2}, {0}, {1}, true).sizes() == Shape{1, 1, 3, 3});
  CHECK(ops::max_pool2d(randn({1, 1, 5, 5}), {2}, {2}, {0}, {1}, false).sizes() == Shape{1, 1, 2, 2});
  CHECK(ops::max_pool2d(randn({1, 1, 6, 6}), {3}, {3}, {1}, {1}, true).sizes() == Shape{1, 1, 3, 3});
  CHECK(ops::max_pool2d(randn({1, 1, 5, 5}), {3}, {3}, {1}, {1}, true).sizes() == Shape{1, 1, 2, 2});
  // int64 input keeps its dtype.
  Tensor xi = ops::arange(0, 16, 1, kInt64).view({1, 1, 4, 4});
  CHECK(ops::max_pool2d(xi, {2}).to_vector<int64_t>() == std::vector<int64_t>{5, 7, 13, 15});
}

TEST_CASE("max_pool2d propagates NaN and points its index at it") {
  std::vector<float> v(16, 1.0f);
  v[6] = std::numeric_limits<float>::quiet_NaN();
  v[0] = 5.0f;
  Tensor x = tensor(v, {1, 1, 4, 4});
  auto r = ops::max_pool2d_with_indices(x, {2});
  std::vector<float> y = r[0].to_vector<float>();
  CHECK(y[0] == 5.0f);
  CHECK(std::isnan(y[1]));
  CHECK(r[1].to_vector<int64_t>() == std::vector<int64_t>{0, 6, 8, 10});
}

TEST_CASE("max_pool2d_backward scatters grad_out to the indices and accumulates overlapping windows") {
  for (DType dt : {kFloat32, kFloat64}) {
    Pool p{2, 2, 6, 6, 3, 3, 1, 1, 1, 1, 1, 1, false};
    Tensor x = randn({2, 2, 6, 6}, dtype(dt));
    auto r = ops::max_pool2d_with_indices(x, {3}, {1}, {1});
    Tensor g = randn(r[0].sizes(), dtype(dt));
    Tensor gx = ops::max_pool2d_backward(g, r[1], x.sizes(), false);
    CHECK(gx.sizes() == x.sizes());
    std::vector<double> want(static_cast<size_t>(x.numel()), 0.0), gv = values(g);
    std::vector<int64_t> ind = ref_max_pool(p, values(x)).second;
    for (size_t i = 0; i < ind.size(); ++i) want[i / 36 * 36 + static_cast<size_t>(ind[i])] += gv[i];
    check_close(gx, want, Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12));
  }
  // Unbatched, with a hand-made index tensor.
  Tensor gx = ops::max_pool2d_backward(tensor({1, 2, 3, 4}).view({1, 2, 2}),
                                       tensor(std::vector<int64_t>{0, 0, 8, 4}, {1, 2, 2}), {1, 3, 3}, false);
  CHECK(gx.to_vector<float>() == std::vector<float>{3, 0, 0, 0, 4, 0, 0, 0, 3});
}

TEST_CASE("max_pool2d_backward rejects out-of-range indices and mismatched shapes") {
  const Shape x{1, 1, 4, 4};
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 1, 2, 2}), tensor(std::vector<int64_t>{0, 1, 16, 3}, {1, 1, 2, 2}), x, false),
                    Catch::Contains("index 16 is out of range for an input plane of 4 x 4 (input [1, 1, 4, 4])"));
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 1, 2, 2}), tensor(std::vector<int64_t>{0, 1, -1, 3}, {1, 1, 2, 2}), x, true),
                    Catch::Contains("index -1 is out of range"));
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 1, 2, 2}), ops::zeros({1, 1, 2, 1}, kInt64), x, false),
                    Catch::Contains("must have the same shape"));
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 2, 2, 2}), ops::zeros({1, 2, 2, 2}, kInt64), x, false),
                    Catch::Contains("does not match input [1, 1, 4, 4]"));
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 1, 2, 2}), ops::zeros({1, 1, 2, 2}), x, false),
                    Catch::Contains("int64 index"));
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 2, 2}), ops::zeros({1, 2, 2}, kInt64), {1, 4, 4}, true),
                    Catch::Contains("channels-last gradient needs a 4-D input size"));
  CHECK_THROWS_WITH(ops::max_pool2d_backward(ops::ones({1, 1, 2, 2}), ops::zeros({1, 1, 2, 2}, kInt64), {1, 1, -4, 4}, false),
                    Catch::Contains("negative dim"));
}

TEST_CASE("max_pool2d's autograd node saves the indices, not the input") {
  // The input's shape and layout are all its backward reads: holding the input for backward would
  // keep a CNN's largest activation alive to the pool's backward.
  for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    Tensor x = randn({2, 3, 4, 4}).contiguous(f).requires_grad_();
    int64_t saved = 0;
    bool saw_input = false;
    Tensor y;
    {
      autograd::SavedTensorsHooks hooks(
          [&](const Tensor& t) -> std::any {
            ++saved;
            if (t.impl_ptr() == x.impl_ptr() || t.data_ptr() == x.data_ptr()) saw_input = true;
            return t;
          },
          [](const std::any& a) { return std::any_cast<Tensor>(a); });
      y = max_pool2d(x, {2, 2});
    }
    CHECK(saved == 1);
    CHECK_FALSE(saw_input);
    Tensor gx = autograd::grad({y.sum()}, {x})[0];
    CHECK(gx.is_contiguous(f));  // the input's layout, which the node keeps as its strides
    Tensor want = ops::max_pool2d_backward(ops::ones(y.sizes()), ops::max_pool2d_with_indices(x.detach(), {2, 2})[1],
                                           x.sizes(), f == MemoryFormat::ChannelsLast);
    CHECK(values(gx) == values(want));
  }
}

TEST_CASE("max_pool2d's autograd node saves one uint8 window offset per output") {
  // An eighth of the int64 indices' bytes: for a CNN's first pool at batch 128, 0.77 MiB where the
  // indices took 6.1 MiB.
  Tensor x = randn({2, 3, 6, 6}).requires_grad_();
  std::vector<Tensor> saved;
  Tensor y;
  {
    autograd::SavedTensorsHooks hooks([&](const Tensor& t) -> std::any { saved.push_back(t); return t; },
                                      [](const std::any& a) { return std::any_cast<Tensor>(a); });
    y = max_pool2d(x, {2, 2});
  }
  REQUIRE(saved.size() == 1);
  CHECK(saved[0].dtype() == kUInt8);
  CHECK(saved[0].sizes() == y.sizes());
  CHECK(y.grad_fn()->name() == "MaxPool2DWithIndicesBackward");
  // A window of more than 256 positions has no uint8 offset: max_pool2d saves int64 indices there.
  Tensor big = randn({1, 1, 17, 17}).requires_grad_();
  saved.clear();
  {
    autograd::SavedTensorsHooks hooks([&](const Tensor& t) -> std::any { saved.push_back(t); return t; },
                                      [](const std::any& a) { return std::any_cast<Tensor>(a); });
    y = max_pool2d(big, {17, 17});
  }
  REQUIRE(saved.size() == 1);
  CHECK(saved[0].dtype() == kInt64);
  CHECK(values(autograd::grad({y.sum()}, {big})[0]) ==
        values(ops::max_pool2d_backward(ops::ones({1, 1, 1, 1}), ops::max_pool2d_with_indices(big.detach(), {17, 17})[1],
                                        big.sizes(), false)));
  CHECK_THROWS_WITH(ops::_max_pool2d_with_offsets(big.detach(), {17, 17}),
                    Catch::Contains("a 17 x 17 window has 289 positions, more than a uint8 offset names (256)"));
}

TEST_CASE("window offsets name the indices' winners, and their backward gives the same bits") {
  struct Case {
    Shape in, k, s, p, d;
    bool ceil;
  };
  const std::vector<Case> cases = {
      {{2, 3, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},  // the CNN's pool
      {{2, 2, 7, 9}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, true},   // overlapping, padded, ceil
      {{1, 3, 9, 8}, {2, 3}, {1, 2}, {1, 1}, {2, 1}, false},  // dilated, rectangular
      {{2, 4, 1, 1}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},  // 1x1 planes: windows mostly padding
      {{3, 5, 5}, {16, 16}, {1, 1}, {8, 8}, {1, 1}, false},   // unbatched, 256 positions
      // Windows that tile the input (_max_pool2d_offsets_backward writes in input order), with a
      // row and a column past the last window, rectangular, and unbatched.
      {{2, 3, 9, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{2, 17, 9, 8}, {3, 2}, {3, 2}, {0, 0}, {1, 1}, false},
      {{3, 6, 6}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{1, 2, 7, 7}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, true},  // ceil: the last windows stick out
  };
  for (const Case& c : cases)
    for (DType dt : {kFloat32, kFloat64, kBFloat16})
      for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
        if (f == MemoryFormat::ChannelsLast && c.in.size() != 4) continue;
        INFO("input " << shape_str(c.in) << " kernel " << shape_str(c.k) << " " << dtype_name(dt)
                      << (f == MemoryFormat::ChannelsLast ? " channels-last" : ""));
        // Small integers, so windows hold ties (the first in scan order wins); one NaN; one -inf
        // plane, whose windows have nothing above -inf (the first valid position wins).
        Tensor x = ops::randint(-3, 4, c.in, kFloat32);
        {
          NoGradGuard g;
          x.view({-1})[1].fill_(std::nan(""));
          x.select(c.in.size() == 4 ? 1 : 0, 1).fill_(-std::numeric_limits<double>::infinity());
        }
        x = x.to(dt).contiguous(f);
        auto ri = ops::max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil);
        auto ro = ops::_max_pool2d_with_offsets(x, c.k, c.s, c.p, c.d, c.ceil);
        REQUIRE(ro[1].dtype() == kUInt8);
        REQUIRE(ro[1].sizes() == ri[1].sizes());
        CHECK(ro[0].strides() == ri[0].strides());
        CHECK(ro[1].strides() == ri[1].strides());
        std::vector<double> vi = values(ri[0]), vo = values(ro[0]);
        for (size_t i = 0; i < vi.size(); ++i) CHECK(((std::isnan(vi[i]) && std::isnan(vo[i])) || vi[i] == vo[i]));
        // Each offset, decoded by hand against its window, is the index.
        const int64_t nd = x.dim(), OH = ri[1].size(nd - 2), OW = ri[1].size(nd - 1), W = c.in[nd - 1];
        const int64_t kw = c.k[1], sh = c.s[0], sw = c.s[1], ph = c.p[0], pw = c.p[1], dh = c.d[0], dw = c.d[1];
        std::vector<int64_t> ind = ri[1].contiguous().to_vector<int64_t>();
        std::vector<double> off = values(ro[1].contiguous());
        for (size_t o = 0; o < ind.size(); ++o) {
          const int64_t t = static_cast<int64_t>(off[o]), oh = static_cast<int64_t>(o) / OW % OH,
                        ow = static_cast<int64_t>(o) % OW;
          CHECK((oh * sh - ph + t / kw * dh) * W + ow * sw - pw + t % kw * dw == ind[o]);
        }
        // A channels-last pool's gradient may arrive NCHW (through a flatten) or channels-last; one
        // -0 in it must come out +0, as the scatter's 0 + g.
        const bool cl = f == MemoryFormat::ChannelsLast;
        for (bool gy_cl : {false, true}) {
          if (gy_cl && !cl) continue;
          Tensor gy = randn(ri[0].sizes()).to(dt);
          {
            NoGradGuard g;
            gy.view({-1})[0].fill_(-0.0);
          }
          if (gy_cl) gy = gy.contiguous(MemoryFormat::ChannelsLast);
          Tensor gi = ops::max_pool2d_backward(gy, ri[1], x.sizes(), cl);
          Tensor go = ops::_max_pool2d_offsets_backward(gy, ro[1], x.sizes(), c.k, c.s, c.p, c.d, cl);
          CHECK(go.strides() == gi.strides());
          std::vector<double> a = values(go), b = values(gi);
          CHECK(a == b);
          for (size_t i = 0; i < a.size(); ++i) CHECK(std::signbit(a[i]) == std::signbit(b[i]));
        }
      }
}

// The NCHW kernels (a flat two-pass loop for 2x2 windows on even planes, the row loop otherwise)
// and the NHWC kernel are separate code: on ties, NaNs (the last one wins) and all -inf windows
// (the first position wins) they must pick the same winners.
TEST_CASE("NCHW and channels-last max pools pick the same winners on ties, NaN and -inf windows") {
  // 16 channels and more take the 16-lane 2x2 path on channels-last (35: two vectors and a tail).
  const std::vector<Shape> shapes = {{2, 3, 8, 8}, {2, 3, 9, 7}, {1, 5, 2, 2}, {4, 2, 6, 10}, {2, 35, 4, 6}, {1, 16, 3, 5}};
  for (const Shape& in : shapes)
    for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64}) {
      INFO("input " << shape_str(in) << " " << dtype_name(dt));
      Tensor x = ops::randint(-2, 2, in, kFloat32);  // many ties
      if (dt != kInt64) {
        NoGradGuard g;
        Tensor flat = x.view({-1});
        flat[1].fill_(std::nan(""));
        flat[2].fill_(std::nan(""));  // two NaNs in one window: the second wins
        flat[in[2] * in[3] + 3].fill_(std::nan(""));
        x.select(1, 1).fill_(-std::numeric_limits<double>::infinity());
      }
      x = x.to(dt);
      Tensor xl = x.contiguous(MemoryFormat::ChannelsLast);
      for (bool offsets : {false, true}) {
        auto a = offsets ? ops::_max_pool2d_with_offsets(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)
                         : ops::max_pool2d_with_indices(x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
        auto b = offsets ? ops::_max_pool2d_with_offsets(xl, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)
                         : ops::max_pool2d_with_indices(xl, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
        std::vector<double> va = values(a[0]), vb = values(b[0].contiguous());
        REQUIRE(va.size() == vb.size());
        for (size_t i = 0; i < va.size(); ++i) CHECK(((std::isnan(va[i]) && std::isnan(vb[i])) || va[i] == vb[i]));
        CHECK(values(a[1]) == values(b[1].contiguous()));
      }
    }
}

TEST_CASE("_max_pool2d_offsets_backward rejects offsets outside their window and mismatched arguments") {
  const Shape x{1, 1, 4, 4};
  auto off = [](std::vector<double> v) { return ops::to_dtype(tensor(v, {1, 1, 2, 2}), kUInt8); };
  const Tensor g = ops::ones({1, 1, 2, 2});
  CHECK(values(ops::_max_pool2d_offsets_backward(g, off({0, 1, 2, 3}), x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false)) ==
        std::vector<double>{1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1});
  CHECK_THROWS_WITH(ops::_max_pool2d_offsets_backward(g, off({0, 4, 0, 0}), x, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false),
                    Catch::Contains("_max_pool2d_offsets_backward: offset 4 is outside its 2 x 2 window or the input "
                                    "plane of 4 x 4 (input [1, 1, 4, 4])"));
  // Offset 0 of a padded window's top-left output lies in the padding.
  CHECK_THROWS_WITH(ops::_max_pool2d_offsets_backward(ops::ones({1, 1, 3, 3}), ops::zeros({1, 1, 3, 3}, kUInt8), x,
                                                      {2, 2}, {2, 2}, {1, 1}, {1, 1}, true),
                    Catch::Contains("offset 0 is outside"));
  CHECK_THROWS_WITH(ops::_max_pool2d_offsets_backward(g, ops::zeros({1, 1, 2, 2}, kInt64), x, {2, 2}, {2, 2}, {0, 0},
                                                      {1, 1}, false),
                    Catch::Contains("expected uint8 window offsets, got [1, 1, 2, 2] int64"));
  CHECK_THROWS_WITH(ops::_max_pool2d_offsets_backward(g, off({0, 0, 0, 0}), x, {2, 2}, {1, 1}, {0, 0}, {1, 1}, false),
                    Catch::Contains("grad_out [1, 1, 2, 2] is not the pooled size of input [1, 1, 4, 4] for "
                                    "kernel_size [2, 2], stride [1, 1]"));
  CHECK_THROWS_WITH(ops::_max_pool2d_offsets_backward(ops::ones({1, 1, 2, 1}), off({0, 0, 0, 0}), x, {2, 2}, {2, 2},
                                                      {0, 0}, {1, 1}, false),
                    Catch::Contains("must have the same shape"));
}

TEST_CASE("avg_pool2d matches a direct loop with and without counting padding") {
  for (const Pool& p0 : pool_cases()) {
    if (p0.dh != 1 || p0.dw != 1) continue;  // average pooling has no dilation
    for (bool include_pad : {true, false}) {
      for (DType dt : {kFloat32, kFloat64}) {
        const Pool& p = p0;
        INFO("H=" << p.H << " W=" << p.W << " k=" << p.kh << "x" << p.kw << " ceil=" << p.ceil
                  << " include_pad=" << include_pad << " dtype=" << dt);
        Tensor x = randn({p.N, p.C, p.H, p.W}, dtype(dt));
        Tensor y = ops::avg_pool2d(x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, p.ceil, include_pad);
        int64_t OH = out_size(p.H, p.kh, p.sh, p.ph, 1, p.ceil), OW = out_size(p.W, p.kw, p.sw, p.pw, 1, p.ceil);
        CHECK(y.sizes() == Shape{p.N, p.C, OH, OW});
        check_close(y, ref_avg_pool(p, include_pad, values(x)), Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12));
      }
    }
  }
  // Hand-checked: a 3x3 of ones with padding 1, k3 s2: corners see 4 of 9 cells.
  Tensor ones = ops::ones({1, 1, 3, 3});
  CHECK(ops::avg_pool2d(ones, {3}, {2}, {1}, false, true).to_vector<float>() ==
        std::vector<float>{4.f / 9, 4.f / 9, 4.f / 9, 4.f / 9});
  CHECK(ops::avg_pool2d(ones, {3}, {2}, {1}, false, false).to_vector<float>() == std::vector<float>{1, 1, 1, 1});
}

TEST_CASE("avg_pool2d_backward matches a direct scatter loop and is the adjoint of avg_pool2d") {
  for (const Pool& p : pool_cases()) {
    if (p.dh != 1 || p.dw != 1) continue;
    for (bool include_pad : {true, false}) {
      INFO("H=" << p.H << " W=" << p.W << " k=" << p.kh << "x" << p.kw << " ceil=" << p.ceil << " include_pad=" << include_pad);
      Tensor x = randn({p.N, p.C, p.H, p.W}, dtype(kFloat64));
      Tensor y = ops::avg_pool2d(x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, p.ceil, include_pad);
      Tensor g = randn(y.sizes(), dtype(kFloat64));
      Tensor gx = ops::avg_pool2d_backward(g, x, {p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}, p.ceil, include_pad);
      CHECK(gx.sizes() == x.sizes());
      check_close(gx, ref_avg_pool(p, include_pad, values(x), values(g)), Tolerance::within(1e-12));
      CHECK(dot(values(y), values(g)) == Approx(dot(values(x), values(gx))).epsilon(1e-10));
      Tensor gx32 = ops::avg_pool2d_backward(ops::to_dtype(g, kFloat32), ops::to_dtype(x, kFloat32), {p.kh, p.kw},
                                             {p.sh, p.sw}, {p.ph, p.pw}, p.ceil, include_pad);
      check_close(gx32, values(gx), Tolerance::within(1e-5));
    }
  }
}

TEST_CASE("pooling accepts unbatched input and a non-contiguous input") {
  Tensor x = randn({3, 6, 6});
  Tensor xt = x.transpose(1, 2);
  Tensor y = ops::max_pool2d(xt, {2});
  CHECK(y.sizes() == Shape{3, 3, 3});
  Pool p{1, 3, 6, 6, 2, 2, 2, 2, 0, 0, 1, 1, false};
  check_close(y, ref_max_pool(p, values(xt)).first, Tolerance::exact());
  check_close(ops::avg_pool2d(xt, {2}), ref_avg_pool(p, true, values(xt)), Tolerance::within(1e-6));
}

TEST_CASE("pooling rejects bad kernel, padding and too-small outputs") {
  Tensor x = randn({1, 1, 4, 4});
  CHECK_THROWS_WITH(ops::max_pool2d(x, {3}, {1}, {2}), Catch::Contains("pad should be at most half of kernel size"));
  CHECK_THROWS_WITH(ops::avg_pool2d(x, {2}, {1}, {2}), Catch::Contains("avg_pool2d: pad should be at most half"));
  CHECK_THROWS_WITH(ops::max_pool2d(x, {5}), Catch::Contains("output size is too small"));
  CHECK_THROWS_WITH(ops::max_pool2d(x, {1, 2, 3}), Catch::Contains("kernel_size must be one int or a pair"));
  CHECK_THROWS_WITH(ops::max_pool2d(x, {0}), Catch::Contains("kernel_size must be positive"));
  CHECK_THROWS_WITH(ops::max_pool2d(randn({4, 4}), {2}), Catch::Contains("expected a 3-D (unbatched) or 4-D"));
  CHECK_THROWS_WITH(ops::avg_pool2d(randint(0, 3, {1, 1, 4, 4}), {2}), Catch::Contains("expected a float32 or float64"));
  CHECK_THROWS_WITH(ops::avg_pool2d_backward(ops::ones({1, 1, 3, 3}), x, {2}, {}, {0}, false, true),
                    Catch::Contains("expected grad_out of shape [1, 1, 2, 2]"));
}
