// multinomial (ops/random.cpp, rules in ops/random_plan.h): reproducibility and the generator's
// reservation, no repeats without replacement, the distributions (chi-square on 100k draws with a
// fixed seed), the 16-bit and float64 inputs, shapes, and PyTorch's errors (torch 2.x's messages).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <vector>

#include "graft.h"
#include "support/error_message.h"

using namespace graft;
using Catch::Contains;

namespace {

std::vector<int64_t> ivals(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }

// Pearson's statistic of observed counts against expected ones (categories expected > 0 only).
double chi_square(const std::vector<double>& observed, const std::vector<double>& expected) {
  double s = 0;
  for (size_t i = 0; i < observed.size(); ++i)
    if (expected[i] > 0) s += (observed[i] - expected[i]) * (observed[i] - expected[i]) / expected[i];
  return s;
}

// The 0.999 quantile of chi-square with 5 degrees of freedom: a correct sampler exceeds it once in
// a thousand seeds, and the seeds below are fixed, so a failure means a biased sampler.
constexpr double kChi2Df5 = 20.515;

const std::vector<double> kWeights{1, 2, 3, 4, 0, 10};  // unnormalised, one zero: 5 free categories

}  // namespace

TEST_CASE("multinomial is reproducible and advances the generator by its reservation") {
  const Tensor w = tensor(std::vector<double>{0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2}, {3, 4});
  manual_seed(42);
  const RngState s0 = default_generator().get_state();
  const auto a = ivals(multinomial(w, 3));
  const RngState s1 = default_generator().get_state();
  const auto b = ivals(multinomial(w, 5, true));
  const RngState s2 = default_generator().get_state();
  // One float64 uniform per weight by keys (3 * 4 = 12: 6 Philox blocks), per sample otherwise
  // (3 * 5 = 15: 8 blocks).
  CHECK(s1.offset - s0.offset == 6);
  CHECK(s2.offset - s1.offset == 8);
  manual_seed(42);
  CHECK(ivals(multinomial(w, 3)) == a);
  CHECK(ivals(w.multinomial(5, true)) == b);
  // A refused call leaves the generator where it was.
  const RngState before = default_generator().get_state();
  CHECK_THROWS(multinomial(-w, 1));
  CHECK(default_generator().get_state() == before);
}

TEST_CASE("multinomial without replacement never repeats a category") {
  manual_seed(7);
  std::vector<double> v(50 * 96);
  for (size_t i = 0; i < v.size(); ++i) v[i] = 1.0 + static_cast<double>((i * 37) % 11);
  const Tensor w = tensor(v, {50, 96});
  const Tensor all = multinomial(w, 96);
  CHECK(all.sizes() == Shape{50, 96});
  CHECK(all.dtype() == kInt64);
  const auto iv = ivals(all);
  for (int64_t r = 0; r < 50; ++r) {
    std::set<int64_t> seen(iv.begin() + r * 96, iv.begin() + (r + 1) * 96);
    CHECK(seen.size() == 96);
    CHECK(*seen.begin() == 0);
    CHECK(*seen.rbegin() == 95);
  }
  // Zero weights come only after every positive one.
  const auto z = ivals(multinomial(tensor(std::vector<double>{0, 5, 0, 1}, {4}), 4));
  CHECK(std::set<int64_t>(z.begin(), z.begin() + 2) == std::set<int64_t>{1, 3});
  CHECK(std::set<int64_t>(z.begin() + 2, z.end()) == std::set<int64_t>{0, 2});
}

TEST_CASE("multinomial with replacement draws in proportion to the weights") {
  manual_seed(2024);
  const int64_t n = 100000;
  const auto draws = ivals(multinomial(tensor(kWeights, {6}), n, true));
  std::vector<double> observed(6, 0), expected(6);
  for (int64_t d : draws) observed[static_cast<size_t>(d)] += 1;
  const double total = 20;
  for (size_t c = 0; c < 6; ++c) expected[c] = static_cast<double>(n) * kWeights[c] / total;
  CHECK(observed[4] == 0);  // a zero weight is never drawn
  const double chi2 = chi_square(observed, expected);
  INFO("chi-square " << chi2);
  CHECK(chi2 < kChi2Df5);
}

TEST_CASE("multinomial without replacement draws in proportion to the remaining weights") {
  // 50k rows of two samples: the first follows p, the second P(j) = sum_{i != j} p_i p_j / (1 - p_i).
  manual_seed(99);
  const int64_t rows = 50000;
  const Tensor w = tensor(kWeights, {1, 6}).expand({rows, 6});  // a broadcast view: read as rows
  const auto draws = ivals(multinomial(w, 2));
  std::vector<double> first(6, 0), second(6, 0), e_first(6), e_second(6, 0);
  int64_t repeats = 0;
  for (int64_t r = 0; r < rows; ++r) {
    first[static_cast<size_t>(draws[2 * r])] += 1;
    second[static_cast<size_t>(draws[2 * r + 1])] += 1;
    repeats += draws[2 * r] == draws[2 * r + 1] ? 1 : 0;
  }
  CHECK(repeats == 0);
  const double total = 20;
  for (size_t j = 0; j < 6; ++j) {
    const double pj = kWeights[j] / total;
    e_first[j] = static_cast<double>(rows) * pj;
    for (size_t i = 0; i < 6; ++i)
      if (i != j) e_second[j] += kWeights[i] / total * pj / (1 - kWeights[i] / total);
    e_second[j] *= static_cast<double>(rows);
  }
  CHECK(first[4] == 0);
  CHECK(second[4] == 0);
  INFO("chi-square first " << chi_square(first, e_first) << ", second " << chi_square(second, e_second));
  CHECK(chi_square(first, e_first) < kChi2Df5);
  CHECK(chi_square(second, e_second) < kChi2Df5);
}

TEST_CASE("multinomial reads every floating dtype in double and ignores the scale of the weights") {
  // Small integers are exact in every dtype and scaling by 4 is exact, so the same seed draws the
  // same samples.
  const Tensor w = tensor(std::vector<double>{3, 1, 0, 2, 5, 1, 1, 4}, {2, 4});
  for (bool replacement : {false, true}) {
    manual_seed(5);
    const auto want = ivals(multinomial(w, 3, replacement));
    for (DType dt : {kFloat32, kBFloat16, kFloat16}) {
      INFO(dt << ", replacement " << replacement);
      manual_seed(5);
      CHECK(ivals(multinomial(w.to(dt), 3, replacement)) == want);
    }
    manual_seed(5);
    CHECK(ivals(multinomial(w * 4.0, 3, replacement)) == want);
    manual_seed(5);
    CHECK(ivals(multinomial(w.t().contiguous().t(), 3, replacement)) == want);  // strided rows
  }
  // One sample uses the keys with or without replacement, as PyTorch.
  manual_seed(11);
  const auto one = ivals(multinomial(w, 1));
  manual_seed(11);
  CHECK(ivals(multinomial(w, 1, true)) == one);
}

TEST_CASE("multinomial shapes: 1-D, 2-D, empty batches; never differentiable") {
  manual_seed(1);
  CHECK(multinomial(tensor(std::vector<double>{1, 2, 3}, {3}), 2).sizes() == Shape{2});
  CHECK(multinomial(ones({4, 3}), 5, true).sizes() == Shape{4, 5});
  CHECK(multinomial(ones({0, 3}), 2).sizes() == Shape{0, 2});
  CHECK(multinomial(ones({0, 3}), 4, true).sizes() == Shape{0, 4});
  const Tensor w = ones({3}, dtype(kFloat64)).requires_grad_();
  const Tensor s = multinomial(w, 2);
  CHECK_FALSE(s.requires_grad());
  CHECK(s.grad_fn() == nullptr);
}

TEST_CASE("multinomial errors are PyTorch's") {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  auto w = [](std::vector<double> v) { return tensor(v, {static_cast<int64_t>(v.size())}); };
  auto msg = [](auto f) { return test::error_message(f); };
  const std::string bad_keys = "multinomial: probability tensor contains either `inf`, `nan` or element < 0";
  const std::string negative = "multinomial: invalid multinomial distribution (encountering probability entry < 0)";
  const std::string infinite =
      "multinomial: invalid multinomial distribution (encountering probability entry = infinity or NaN)";
  const std::string zero_sum = "multinomial: invalid multinomial distribution (sum of probabilities <= 0)";
  // Without replacement (and for one sample): any bad weight, then a zero row.
  CHECK_THAT(msg([&] { multinomial(w({1, -1, 0}), 2); }), Contains(bad_keys));
  CHECK_THAT(msg([&] { multinomial(w({1, inf, 0}), 2); }), Contains(bad_keys));
  CHECK_THAT(msg([&] { multinomial(w({1, nan, 0}), 2); }), Contains(bad_keys));
  CHECK_THAT(msg([&] { multinomial(w({1, -1, 0}), 1, true); }), Contains(bad_keys));
  CHECK_THAT(msg([&] { multinomial(w({0, 0, 0}), 2); }), Contains(zero_sum));
  // With replacement: whichever a left-to-right walk meets first.
  CHECK_THAT(msg([&] { multinomial(w({1, -1, 0}), 2, true); }), Contains(negative));
  CHECK_THAT(msg([&] { multinomial(w({1, nan, 0}), 2, true); }), Contains(negative));
  CHECK_THAT(msg([&] { multinomial(w({1, inf, 0}), 2, true); }), Contains(infinite));
  CHECK_THAT(msg([&] { multinomial(w({0, 0, 0}), 2, true); }), Contains(zero_sum));
  CHECK_THAT(msg([&] { multinomial(tensor(std::vector<double>{1, 1, 0, 0, 1, -1}, {3, 2}), 2, true); }),
             Contains(zero_sum));
  CHECK_THAT(msg([&] { multinomial(tensor(std::vector<double>{1, 1, 1, -1, 0, 0}, {3, 2}), 2, true); }),
             Contains(negative));
  // Arguments.
  CHECK_THAT(msg([&] { multinomial(w({1, 1, 1}), 4); }),
             Contains("multinomial: cannot sample n_sample > prob_dist.size(-1) samples without replacement"));
  CHECK_NOTHROW(multinomial(w({1, 1, 1}), 4, true));
  CHECK_THAT(msg([&] { multinomial(w({1, 1, 1}), 0); }), Contains("multinomial: cannot sample n_sample <= 0 samples"));
  CHECK_THAT(msg([&] { multinomial(w({1, 1, 1}), -1, true); }), Contains("cannot sample n_sample <= 0 samples"));
  CHECK_THAT(msg([&] { multinomial(scalar_tensor(1.0), 1); }), Contains("multinomial: prob_dist must be 1 or 2 dim"));
  CHECK_THAT(msg([&] { multinomial(ones({2, 2, 2}), 1); }), Contains("prob_dist must be 1 or 2 dim"));
  CHECK_THAT(msg([&] { multinomial(tensor(std::vector<int64_t>{1, 2, 3}, {3}), 1); }),
             Contains("multinomial: only supports floating-point dtypes for input") && Contains("int64"));
}
