// topk (ops/sort.cpp): PyTorch's CPU order of tied values, NaN, 0-d and k = 0, dims and layouts,
// dtypes, errors, and the gradient. The expected indices of tied values were printed by torch
// 2.x on the CPU (tests/ops/data/print_topk_fixtures.py rebuilds the same inputs).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "graft.h"
#include "support/error_message.h"

using namespace graft;
using Catch::Contains;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

struct TieCase {
  int64_t k;
  bool largest, sorted;
  std::vector<int64_t> indices;  // every row's k indices, row after row
};

std::vector<int64_t> ivals(const Tensor& t) { return t.contiguous().to_vector<int64_t>(); }
std::vector<double> vals(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// Each case of `cases` on x (along the last dim) against PyTorch's indices; the values must be
// x's elements at those indices.
void check_ties(const Tensor& x, const std::vector<TieCase>& cases) {
  const int64_t len = x.size(-1), rows = x.numel() / std::max<int64_t>(len, 1);
  const auto xv = vals(x);
  for (const TieCase& c : cases) {
    INFO("k " << c.k << ", largest " << c.largest << ", sorted " << c.sorted);
    auto r = topk(x, c.k, -1, c.largest, c.sorted);
    CHECK(ivals(r[1]) == c.indices);
    auto v = vals(r[0]);
    REQUIRE(v.size() == c.indices.size());
    for (size_t j = 0; j < v.size(); ++j) {
      const double want = xv[(static_cast<int64_t>(j) / std::max<int64_t>(c.k, 1)) * len + c.indices[j]];
      CHECK(((std::isnan(want) && std::isnan(v[j])) || v[j] == want));
    }
    (void)rows;
  }
}

}  // namespace

TEST_CASE("topk orders tied values as PyTorch does on the CPU") {
  // [1, 3, 3, 2, 3, 1]: ties of the maximum and the minimum.
  const Tensor small = tensor(std::vector<double>{1, 3, 3, 2, 3, 1}, {6});
  check_ties(small, {{0, true, true, {}},
                     {1, true, true, {2}},
                     {2, true, true, {2, 4}},
                     {3, true, true, {2, 4, 1}},
                     {4, true, true, {2, 4, 1, 3}},
                     {5, true, true, {1, 2, 4, 3, 0}},
                     {6, true, true, {1, 2, 4, 3, 0, 5}},
                     {0, false, true, {}},
                     {1, false, true, {5}},
                     {2, false, true, {5, 0}},
                     {3, false, true, {5, 0, 3}},
                     {4, false, true, {5, 0, 3, 2}},
                     {5, false, true, {5, 0, 3, 2, 4}},
                     {6, false, true, {5, 0, 3, 2, 4, 1}}});
}

TEST_CASE("topk orders tied values as PyTorch does over a vocabulary-sized last dim") {
  // [3, 96] of the values 0..4 (row 2 is all 2s): the sampler's shape.
  std::vector<double> v;
  for (int64_t r = 0; r < 3; ++r)
    for (int64_t j = 0; j < 96; ++j) v.push_back(static_cast<double>((j * (r + 3) + r) % 5));
  const Tensor vocab = tensor(v, {3, 96});
  check_ties(vocab, {
      {1, true, true, {3, 2, 0}},
      {2, true, true, {18, 53, 17, 82, 63, 65}},
      {3, true, true, {18, 53, 58, 17, 82, 32, 63, 65, 64}},
      {5, true, true, {18, 53, 58, 23, 68, 17, 82, 32, 87, 57, 63, 65, 64, 66, 62}},
      {10, true, true, {23, 13, 68, 18, 58, 53, 28, 33, 38, 63, 87, 12, 57, 17, 32,
                        82, 22, 52, 27, 47, 66, 61, 62, 63, 64, 65, 69, 71, 70, 60}},
      {20, true, true, {18, 78, 8,  83, 88, 3,  93, 73, 13, 68, 63, 58, 53, 23, 48, 43, 28, 38, 33, 41,
                        57, 37, 92, 67, 62, 77, 2,  42, 7,  12, 47, 17, 32, 82, 87, 72, 22, 27, 52, 43,
                        63, 57, 53, 52, 51, 50, 49, 54, 61, 62, 60, 64, 65, 66, 67, 68, 69, 70, 71, 59}},
      {1, false, true, {0, 1, 0}},
      {2, false, true, {45, 20, 56, 61, 63, 65}},
      {3, false, true, {45, 20, 75, 56, 61, 16, 63, 65, 64}},
      {5, false, true, {45, 20, 75, 40, 50, 16, 21, 56, 61, 51, 63, 65, 64, 66, 62}},
      {10, false, true, {40, 90, 50, 45, 75, 20, 35, 30, 80, 15, 51, 71, 66, 16, 61,
                         56, 21, 41, 31, 36, 66, 61, 62, 63, 64, 65, 69, 71, 70, 60}},
      {20, false, true, {45, 55, 60, 5,  95, 65, 0,  70, 90, 50, 15, 75, 20, 40, 85, 25, 35, 80, 30, 10,
                         61, 11, 76, 6,  81, 91, 86, 71, 66, 16, 1,  56, 21, 51, 46, 26, 41, 36, 31, 90,
                         63, 57, 53, 52, 51, 50, 49, 54, 61, 62, 60, 64, 65, 66, 67, 68, 69, 70, 71, 59}},
      {10, true, false, {23, 13, 68, 18, 58, 53, 28, 33, 38, 63, 87, 12, 57, 17, 32,
                         82, 22, 52, 27, 47, 66, 61, 62, 63, 64, 65, 69, 71, 70, 60}},
  });
  // k = 96 (the whole row, sorted): every row's full order.
  check_ties(vocab.select(0, 0).unsqueeze(0),
             {{96, true, true, {93, 33, 38, 28, 43, 48, 23, 53, 58, 18, 63, 68, 13, 73, 78, 8,  83, 88, 3,  16,
                                71, 1,  26, 11, 21, 6,  31, 36, 91, 51, 66, 76, 61, 56, 81, 41, 86, 46, 24, 49,
                                29, 34, 39, 54, 44, 19, 59, 69, 74, 9,  79, 84, 64, 94, 14, 4,  89, 72, 67, 12,
                                22, 32, 62, 17, 47, 57, 27, 52, 92, 2,  87, 37, 82, 7,  42, 77, 45, 40, 75, 65,
                                15, 80, 70, 10, 85, 5,  20, 30, 35, 90, 55, 50, 0,  95, 60, 25}},
              {96, false, true, {15, 30, 80, 35, 25, 85, 40, 20, 75, 45, 50, 90, 60, 0,  65, 95, 5,  55, 10, 70,
                                 57, 42, 67, 52, 77, 72, 37, 62, 47, 32, 82, 27, 2,  12, 17, 22, 7,  92, 87, 49,
                                 29, 14, 54, 9,  69, 59, 94, 4,  64, 89, 74, 44, 19, 39, 24, 79, 34, 84, 56, 51,
                                 11, 46, 81, 41, 26, 21, 16, 36, 31, 6,  86, 76, 1,  71, 91, 66, 61, 73, 78, 48,
                                 53, 28, 33, 68, 83, 58, 43, 23, 18, 88, 13, 3,  8,  63, 93, 38}}});
}

TEST_CASE("topk orders tied values as PyTorch does when k * 64 <= len (partial sort)") {
  std::vector<double> v;
  for (int64_t j = 0; j < 200; ++j) v.push_back(static_cast<double>((j * 13) % 7));
  check_ties(tensor(v, {200}), {{1, true, true, {1}},
                                {3, true, true, {15, 1, 8}},
                                {4, true, true, {106, 29, 113, 120}},
                                {1, false, true, {0}},
                                {3, false, true, {14, 0, 7}},
                                {4, false, true, {56, 84, 21, 77}}});
}

TEST_CASE("topk counts NaN as larger than every number") {
  const Tensor y = tensor(std::vector<double>{1, kNaN, 3, kNaN, -kInf, kInf, 2}, {7});
  check_ties(y, {{1, true, true, {1}},
                 {3, true, true, {1, 3, 5}},
                 {7, true, true, {1, 3, 5, 2, 6, 0, 4}},
                 {1, false, true, {4}},
                 {3, false, true, {4, 0, 6}},
                 {7, false, true, {4, 0, 6, 2, 5, 3, 1}}});
  // float32 and bfloat16 compare the same way.
  CHECK(ivals(topk(y.to(kFloat32), 3)[1]) == std::vector<int64_t>{1, 3, 5});
  CHECK(ivals(topk(y.to(kBFloat16), 3, -1, false)[1]) == std::vector<int64_t>{4, 0, 6});
}

TEST_CASE("topk along a middle dim of a non-contiguous input") {
  // dim 0 of [4, 2, 3] with x[a][b][c] = (a * 2 + b + c) % 3, k = 2 (PyTorch's values and indices).
  std::vector<double> v;
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t c = 0; c < 3; ++c) v.push_back(static_cast<double>((a * 2 + b + c) % 3));
  const Tensor cube = tensor(v, {4, 2, 3});
  auto hi = topk(cube, 2, 0);
  CHECK(hi[0].sizes() == Shape{2, 2, 3});
  CHECK(vals(hi[0]) == std::vector<double>{2, 2, 2, 2, 2, 2, 1, 1, 2, 1, 2, 1});
  CHECK(ivals(hi[1]) == std::vector<int64_t>{1, 2, 0, 2, 0, 1, 2, 3, 3, 3, 3, 2});
  auto lo = topk(cube, 2, 0, false);
  CHECK(vals(lo[0]) == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0});
  CHECK(ivals(lo[1]) == std::vector<int64_t>{3, 1, 2, 1, 2, 3, 0, 3, 1, 3, 1, 0});
  // The same selection through a permuted view: [3, 2, 4] viewed back to [4, 2, 3].
  const Tensor permuted = cube.permute({2, 1, 0}).contiguous().permute({2, 1, 0});
  REQUIRE_FALSE(permuted.is_contiguous());
  auto hp = permuted.topk(2, 0);
  CHECK(vals(hp[0]) == vals(hi[0]));
  CHECK(ivals(hp[1]) == ivals(hi[1]));
}

TEST_CASE("topk of distinct values is the sorted prefix of every row") {
  manual_seed(3);
  const Tensor x = randn({5, 7, 9}, dtype(kFloat64));
  for (int64_t dim : {0, 1, 2}) {
    for (bool largest : {true, false}) {
      INFO("dim " << dim << ", largest " << largest);
      const int64_t k = 3;
      auto r = x.topk(k, dim, largest);
      // Reference: every row along dim, sorted.
      const Tensor xt = x.transpose(dim, 2).contiguous(), vt = r[0].transpose(dim, 2).contiguous();
      const Tensor it = r[1].transpose(dim, 2).contiguous();
      auto xv = vals(xt), vv = vals(vt);
      auto iv = ivals(it);
      const int64_t len = xt.size(2), rows = xt.numel() / len;
      for (int64_t row = 0; row < rows; ++row) {
        std::vector<int64_t> order(static_cast<size_t>(len));
        std::iota(order.begin(), order.end(), 0);
        std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
          return largest ? xv[row * len + a] > xv[row * len + b] : xv[row * len + a] < xv[row * len + b];
        });
        for (int64_t j = 0; j < k; ++j) {
          CHECK(iv[row * k + j] == order[j]);
          CHECK(vv[row * k + j] == xv[row * len + order[j]]);
        }
      }
    }
  }
}

TEST_CASE("topk of a 0-d tensor, with k = 0, and of empty rows") {
  const Tensor s = scalar_tensor(5.0, dtype(kFloat64));
  for (int64_t k : {0, 1}) {
    auto r = topk(s, k);
    CHECK(r[0].dim() == 0);
    CHECK(r[0].item<double>() == 5.0);  // the element itself for k = 0 too (PyTorch)
    CHECK(r[1].dim() == 0);
    CHECK(r[1].item<int64_t>() == 0);
    CHECK(r[1].dtype() == kInt64);
  }
  CHECK(topk(s, 1, 0)[0].item<double>() == 5.0);
  auto none = topk(tensor(std::vector<double>{1, 3, 2}, {3}), 0);
  CHECK(none[0].sizes() == Shape{0});
  CHECK(none[1].sizes() == Shape{0});
  CHECK(topk(ones({2, 0}), 0)[0].sizes() == Shape{2, 0});
  CHECK(topk(ones({0, 3}), 2)[1].sizes() == Shape{0, 2});
}

TEST_CASE("topk keeps the input's dtype and returns int64 indices") {
  const std::vector<double> v{3, -1, 7, 7, 0};
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8}) {
    INFO(dt);
    const Tensor x = tensor(v, {5}).abs().to(dt);
    auto r = topk(x, 2);
    CHECK(r[0].dtype() == dt);
    CHECK(r[1].dtype() == kInt64);
    CHECK(vals(r[0]) == std::vector<double>{7, 7});
    CHECK(ivals(r[1]) == std::vector<int64_t>{2, 3});
  }
}

TEST_CASE("topk errors name the op, k and the shape") {
  const Tensor x = tensor(std::vector<double>{1, 3, 2}, {3});
  auto msg = [](auto f) { return test::error_message(f); };
  CHECK_THAT(msg([&] { topk(x, 4); }), Contains("topk: selected index k out of range") && Contains("k = 4") &&
                                           Contains("size 3"));
  CHECK_THAT(msg([&] { topk(x, -1); }), Contains("selected index k out of range"));
  CHECK_THAT(msg([&] { topk(scalar_tensor(1.0), 2); }), Contains("selected index k out of range"));
  CHECK_THAT(msg([&] { topk(x, 1, 1); }), Contains("topk") && Contains("dimension out of range"));
  CHECK_THAT(msg([&] { topk(x, 1, -2); }), Contains("dimension out of range"));
  CHECK_THAT(msg([&] { topk(scalar_tensor(1.0), 1, 1); }), Contains("dimension out of range"));
  CHECK_THAT(msg([&] { topk(x.gt(1.5), 1); }), Contains("topk") && Contains("bool"));
}

TEST_CASE("topk's gradient goes to the selected elements") {
  const Tensor x = tensor(std::vector<double>{0.5, -1, 2, 4, 3, 1}, {2, 3}).requires_grad_();
  auto r = x.topk(2);  // rows [0.5, -1, 2] and [4, 3, 1]
  CHECK(r[0].requires_grad());
  CHECK_FALSE(r[1].requires_grad());
  (r[0] * tensor(std::vector<double>{10, 20, 30, 40}, {2, 2})).sum().backward();
  CHECK(vals(x.grad()) == std::vector<double>{20, 0, 10, 30, 40, 0});
  // 0-d: the gradient is the incoming one.
  const Tensor s = scalar_tensor(2.0, dtype(kFloat64)).requires_grad_();
  (graft::topk(s, 1)[0] * 3.0).backward();
  CHECK(s.grad().item<double>() == 3.0);
}
