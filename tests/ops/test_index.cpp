// Indexing ops: embedding (+ backward), index_select, index_add, gather, scatter_add, one_hot.
#include <catch2/catch.hpp>

#include <functional>

#include "graft.h"

using namespace graft;
using Catch::Contains;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return tensor(v, s); }
// 0, 1, 2, ... as float64 in `shape`.
Tensor iota(const Shape& shape) { return arange(0, shape_numel(shape), 1, dtype(kFloat64)).reshape(shape); }

std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
std::vector<int64_t> ivals(const Tensor& t) { return t.to_vector<int64_t>(); }

// Calls f(idx) for every multi-index of `shape` in row-major order.
void for_each_index(const Shape& shape, const std::function<void(const Shape&)>& f) {
  int64_t n = shape_numel(shape);
  Shape idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx);
    for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}
int64_t linear(const Shape& shape, const Shape& idx) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + idx[d];
  return off;
}

// Naive gather in double: out[p] = x[p with p[dim] = index[p]].
std::vector<double> ref_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  auto xv = vals(x);
  auto iv = ivals(index);
  std::vector<double> out;
  for_each_index(index.sizes(), [&](const Shape& p) {
    Shape q = p;
    q[dim] = iv[linear(index.sizes(), p)];
    out.push_back(xv[linear(x.sizes(), q)]);
  });
  return out;
}

// Naive scatter_add in double.
std::vector<double> ref_scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  auto out = vals(x);
  auto iv = ivals(index);
  auto sv = vals(src);
  for_each_index(index.sizes(), [&](const Shape& p) {
    Shape q = p;
    q[dim] = iv[linear(index.sizes(), p)];
    out[linear(x.sizes(), q)] += sv[linear(src.sizes(), p)];
  });
  return out;
}

// Naive index_select in double.
std::vector<double> ref_index_select(const Tensor& x, int64_t dim, const std::vector<int64_t>& index) {
  auto xv = vals(x);
  Shape os = x.sizes();
  os[dim] = static_cast<int64_t>(index.size());
  std::vector<double> out;
  for_each_index(os, [&](const Shape& p) {
    Shape q = p;
    q[dim] = index[p[dim]];
    out.push_back(xv[linear(x.sizes(), q)]);
  });
  return out;
}

}  // namespace

// ---- embedding ----

TEST_CASE("embedding looks up one weight row per index for indices of any shape") {
  Tensor w = iota({4, 3});  // row r = [3r, 3r+1, 3r+2]
  Tensor out = ops::embedding(w, i64({2, 0, 2, 3}, {2, 2}));
  CHECK(out.sizes() == Shape{2, 2, 3});
  CHECK(out.dtype() == kFloat64);
  CHECK(vals(out) == std::vector<double>{6, 7, 8, 0, 1, 2, 6, 7, 8, 9, 10, 11});
  // 0-d indices give a single row; padding_idx does not change the forward.
  Tensor one = ops::embedding(w, i64({1}, {}), /*padding_idx=*/1);
  CHECK(one.sizes() == Shape{3});
  CHECK(vals(one) == std::vector<double>{3, 4, 5});
  CHECK(ops::embedding(w, i64({}, {0})).sizes() == Shape{0, 3});
}

TEST_CASE("embedding reads non-contiguous weights and indices and keeps the weight dtype") {
  Tensor wt = iota({3, 4}).transpose(0, 1);  // [4, 3], row r = [r, r+4, r+8]
  REQUIRE_FALSE(wt.is_contiguous());
  Tensor idx = i64({3, 1, 0, 2}, {2, 2}).t();  // [[3, 0], [1, 2]]
  REQUIRE_FALSE(idx.is_contiguous());
  CHECK(vals(ops::embedding(wt, idx)) == std::vector<double>{3, 7, 11, 0, 4, 8, 1, 5, 9, 2, 6, 10});
  Tensor wi = i64({10, 11, 20, 21}, {2, 2});
  Tensor oi = ops::embedding(wi, i64({1, 1, 0}, {3}));
  CHECK(oi.dtype() == kInt64);
  CHECK(ivals(oi) == std::vector<int64_t>{20, 21, 20, 21, 10, 11});
  Tensor wf = iota({2, 2}).to(kFloat32);
  CHECK(ops::embedding(wf, i64({1}, {1})).to_vector<float>() == std::vector<float>{2, 3});
}

TEST_CASE("embedding rejects out-of-range indices, wrong dtypes and shapes") {
  Tensor w = iota({4, 3});
  CHECK_THROWS_WITH(ops::embedding(w, i64({1, 4}, {2})),
                    Contains("embedding") && Contains("index 4") && Contains("dimension 0") && Contains("size 4"));
  CHECK_THROWS_WITH(ops::embedding(w, i64({-1}, {1})), Contains("embedding") && Contains("index -1"));
  CHECK_THROWS_WITH(ops::embedding(w, f64({1}, {1})), Contains("embedding") && Contains("int64"));
  CHECK_THROWS_WITH(ops::embedding(iota({4}), i64({1}, {1})), Contains("embedding") && Contains("2-D"));
  CHECK_THROWS_WITH(ops::embedding(w, i64({1}, {1}), 4), Contains("padding_idx 4"));
  CHECK_THROWS_WITH(ops::embedding(w, i64({1}, {1}), -2), Contains("padding_idx -2"));
}

TEST_CASE("embedding_backward accumulates repeated indices and leaves the padding row zero") {
  // indices [2, 2]: 1 appears three times, 3 is padding, 0 and 2 never appear.
  Tensor idx = i64({1, 3, 1, 1}, {2, 2});
  Tensor grad = iota({2, 2, 2});  // rows [0,1] [2,3] [4,5] [6,7]
  Tensor g = ops::embedding_backward(grad, idx, 5, /*padding_idx=*/3);
  CHECK(g.sizes() == Shape{5, 2});
  CHECK(vals(g) == std::vector<double>{0, 0, 10, 13, 0, 0, 0, 0, 0, 0});
  // Without padding the row for 3 receives its gradient.
  Tensor g2 = ops::embedding_backward(grad, idx, 5, -1);
  CHECK(vals(g2) == std::vector<double>{0, 0, 10, 13, 0, 0, 2, 3, 0, 0});
  // float32 and a non-contiguous grad.
  Tensor gt = iota({2, 3}).to(kFloat32).t();  // [3, 2]: [0,3] [1,4] [2,5]
  REQUIRE_FALSE(gt.is_contiguous());
  Tensor g3 = ops::embedding_backward(gt, i64({0, 0, 2}, {3}), 3, -1);
  CHECK(g3.dtype() == kFloat32);
  CHECK(g3.to_vector<float>() == std::vector<float>{1, 7, 0, 0, 2, 5});
}

TEST_CASE("embedding_backward matches a naive loop on a larger parallel-sized problem") {
  manual_seed(7);
  Tensor idx = randint(0, 50, {4000});
  Tensor grad = randn({4000, 24}, dtype(kFloat64));
  Tensor g = ops::embedding_backward(grad, idx, 50, 5);
  auto iv = ivals(idx);
  auto gv = vals(grad);
  std::vector<double> want(50 * 24, 0.0);
  for (size_t i = 0; i < iv.size(); ++i)
    if (iv[i] != 5)
      for (int c = 0; c < 24; ++c) want[iv[i] * 24 + c] += gv[i * 24 + c];
  auto got = vals(g);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
}

TEST_CASE("embedding_backward rejects bad shapes, indices and dtypes") {
  Tensor idx = i64({0, 1}, {2});
  CHECK_THROWS_WITH(ops::embedding_backward(iota({3, 4}), idx, 3, -1),
                    Contains("embedding_backward") && Contains("[3, 4]"));
  CHECK_THROWS_WITH(ops::embedding_backward(iota({2, 4}), i64({0, 3}, {2}), 3, -1),
                    Contains("embedding_backward") && Contains("index 3") && Contains("size 3"));
  CHECK_THROWS_WITH(ops::embedding_backward(i64({0, 1}, {2, 1}), idx, 3, -1), Contains("floating"));
  CHECK_THROWS_WITH(ops::embedding_backward(iota({2, 4}), idx, 3, 3), Contains("padding_idx 3"));
}

// ---- index_select ----

TEST_CASE("index_select picks slices along every dim, including negative dims") {
  Tensor x = iota({2, 3, 4});
  std::vector<std::pair<int64_t, std::vector<int64_t>>> cases = {
      {0, {1, 0, 1}}, {1, {2, 0}}, {2, {3, 3, 0}}, {-1, {1}}, {-3, {0}}, {-2, {}}};
  for (auto& [dim, index] : cases) {
    int64_t d = dim < 0 ? dim + 3 : dim;
    Tensor out = ops::index_select(x, dim, i64(index, {static_cast<int64_t>(index.size())}));
    Shape want_sizes = x.sizes();
    want_sizes[d] = static_cast<int64_t>(index.size());
    CHECK(out.sizes() == want_sizes);
    CHECK(vals(out) == ref_index_select(x, d, index));
  }
}

TEST_CASE("index_select reads non-contiguous input and accepts a 0-d index") {
  Tensor x = iota({4, 3}).t();  // [3, 4]: x[i][j] = 3j + i
  REQUIRE_FALSE(x.is_contiguous());
  Tensor out = ops::index_select(x, 1, i64({3, 0, 3}, {3}));
  CHECK(vals(out) == std::vector<double>{9, 0, 9, 10, 1, 10, 11, 2, 11});
  Tensor one = ops::index_select(x, 0, i64({2}, {}));
  CHECK(one.sizes() == Shape{1, 4});
  CHECK(vals(one) == std::vector<double>{2, 5, 8, 11});
  Tensor b = tensor(std::vector<bool>{true, false, false}, {3});
  CHECK(ops::index_select(b, 0, i64({1, 0}, {2})).to_vector<bool>() == std::vector<bool>{false, true});
}

TEST_CASE("index_select rejects out-of-range indices, bad dims and bad index tensors") {
  Tensor x = iota({2, 3});
  CHECK_THROWS_WITH(ops::index_select(x, 1, i64({0, 3}, {2})),
                    Contains("index_select") && Contains("index 3") && Contains("dimension 1") && Contains("size 3"));
  CHECK_THROWS_WITH(ops::index_select(x, 0, i64({-1}, {1})), Contains("index_select") && Contains("index -1"));
  CHECK_THROWS_WITH(ops::index_select(x, 2, i64({0}, {1})), Contains("index_select") && Contains("dimension out of range"));
  CHECK_THROWS_WITH(ops::index_select(x, 0, i64({0, 1}, {1, 2})), Contains("index_select") && Contains("1-D"));
  CHECK_THROWS_WITH(ops::index_select(x, 0, f64({0}, {1})), Contains("index_select") && Contains("int64"));
}

// ---- index_add ----

TEST_CASE("index_add accumulates repeated indices out of place along each dim") {
  Tensor x = iota({2, 3});
  // dim 1: columns 0 and 2 receive src columns; column 2 twice.
  Tensor src = f64({1, 10, 100, 2, 20, 200}, {2, 3});
  Tensor out = ops::index_add(x, 1, i64({2, 0, 2}, {3}), src);
  CHECK(vals(out) == std::vector<double>{10, 1, 103, 23, 4, 207});
  CHECK(vals(x) == std::vector<double>{0, 1, 2, 3, 4, 5});  // input untouched
  CHECK(x.version() == 0);
  // dim -2 (rows), row 1 twice.
  Tensor src0 = f64({1, 1, 1, 2, 2, 2, 4, 4, 4}, {3, 3});
  Tensor out0 = ops::index_add(x, -2, i64({1, 1, 0}, {3}), src0);
  CHECK(vals(out0) == std::vector<double>{4, 5, 6, 6, 7, 8});
}

TEST_CASE("index_add handles non-contiguous inputs, int64 and a large parallel-sized problem") {
  Tensor x = iota({3, 2}).t();  // [2, 3] = [[0, 2, 4], [1, 3, 5]]
  Tensor src = f64({1, 2, 3, 4}, {2, 2}).t();  // [[1, 3], [2, 4]]
  CHECK(vals(ops::index_add(x, 1, i64({1, 1}, {2}), src)) == std::vector<double>{0, 6, 4, 1, 9, 5});
  Tensor xi = i64({1, 2, 3}, {3});
  CHECK(ivals(ops::index_add(xi, 0, i64({0, 0}, {2}), i64({5, 6}, {2}))) == std::vector<int64_t>{12, 2, 3});

  manual_seed(3);
  Tensor big = randn({64, 700}, dtype(kFloat64));
  Tensor idx = randint(0, 64, {300});
  Tensor s = randn({300, 700}, dtype(kFloat64));
  auto got = vals(ops::index_add(big, 0, idx, s));
  auto want = vals(big);
  auto iv = ivals(idx);
  auto sv = vals(s);
  for (size_t j = 0; j < iv.size(); ++j)
    for (int i = 0; i < 700; ++i) want[iv[j] * 700 + i] += sv[j * 700 + i];
  bool same = true;
  for (size_t k = 0; k < want.size(); ++k) same = same && std::abs(got[k] - want[k]) < 1e-9;
  CHECK(same);
}

TEST_CASE("index_add rejects mismatching shapes, dtypes and out-of-range indices") {
  Tensor x = iota({2, 3});
  CHECK_THROWS_WITH(ops::index_add(x, 1, i64({0, 1}, {2}), iota({2, 3})),
                    Contains("index_add") && Contains("[2, 3]") && Contains("[2, 2]"));
  CHECK_THROWS_WITH(ops::index_add(x, 1, i64({0}, {1}), iota({2, 1}).to(kFloat32)),
                    Contains("index_add") && Contains("float32"));
  CHECK_THROWS_WITH(ops::index_add(x, 0, i64({2}, {1}), iota({1, 3})),
                    Contains("index_add") && Contains("index 2") && Contains("dimension 0") && Contains("size 2"));
  CHECK_THROWS_WITH(ops::index_add(x, 0, f64({0}, {1}), iota({1, 3})), Contains("int64"));
}

// ---- gather ----

TEST_CASE("gather matches a naive loop along every dim, with smaller index shapes") {
  manual_seed(11);
  Tensor x = iota({3, 4, 5});
  for (int64_t dim = -3; dim < 3; ++dim) {
    int64_t d = dim < 0 ? dim + 3 : dim;
    Shape is = {2, 3, 4};
    is[d] = 6;  // along dim the index may be longer than x
    Tensor index = randint(0, x.size(d), is);
    Tensor out = ops::gather(x, dim, index);
    CHECK(out.sizes() == is);
    CHECK(vals(out) == ref_gather(x, d, index));
  }
}

TEST_CASE("gather picks hand-computed values and reads non-contiguous inputs") {
  Tensor x = f64({1, 2, 3, 4}, {2, 2});
  CHECK(vals(ops::gather(x, 1, i64({0, 0, 1, 0}, {2, 2}))) == std::vector<double>{1, 1, 4, 3});
  CHECK(vals(ops::gather(x, 0, i64({1, 0}, {1, 2}))) == std::vector<double>{3, 2});
  Tensor xt = iota({5, 4}).t();  // [4, 5], non-contiguous
  Tensor idx = i64({3, 0, 1, 2, 3, 3}, {2, 3}).t();  // [3, 2], non-contiguous
  CHECK(vals(ops::gather(xt, 1, idx)) == ref_gather(xt, 1, idx));
  CHECK(vals(ops::gather(xt, 0, idx)) == ref_gather(xt, 0, idx));
  Tensor xi = i64({7, 8, 9}, {3});
  CHECK(ivals(ops::gather(xi, 0, i64({2, 2, 0}, {3}))) == std::vector<int64_t>{9, 9, 7});
  CHECK(vals(ops::gather(f64({5}, {}), 0, i64({0}, {}))) == std::vector<double>{5});
}

TEST_CASE("gather rejects out-of-range indices and incompatible shapes") {
  Tensor x = iota({2, 3});
  CHECK_THROWS_WITH(ops::gather(x, 1, i64({0, 3}, {2, 1})),
                    Contains("gather") && Contains("index 3") && Contains("dimension 1") && Contains("size 3"));
  CHECK_THROWS_WITH(ops::gather(x, -2, i64({-1}, {1, 1})), Contains("gather") && Contains("index -1") &&
                                                                  Contains("dimension 0"));
  CHECK_THROWS_WITH(ops::gather(x, 1, i64({0}, {1})), Contains("gather") && Contains("dimensions"));
  CHECK_THROWS_WITH(ops::gather(x, 1, i64({0, 0, 0}, {3, 1})), Contains("gather") && Contains("larger"));
  CHECK_THROWS_WITH(ops::gather(x, 1, f64({0}, {1, 1})), Contains("gather") && Contains("int64"));
  CHECK_THROWS_WITH(ops::gather(x, 2, i64({0}, {1, 1})), Contains("gather") && Contains("dimension out of range"));
}

// ---- scatter_add ----

TEST_CASE("scatter_add accumulates repeated indices out of place") {
  Tensor x = f64({0, 0, 0, 0, 0, 0}, {2, 3});
  Tensor src = f64({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor idx = i64({0, 0, 2, 1, 1, 1}, {2, 3});
  CHECK(vals(ops::scatter_add(x, 1, idx, src)) == std::vector<double>{3, 0, 3, 0, 15, 0});
  CHECK(vals(ops::scatter_add(x, 0, i64({1, 1, 1, 1, 0, 1}, {2, 3}), src)) ==
        std::vector<double>{0, 5, 0, 5, 2, 9});
  CHECK(vals(x) == std::vector<double>(6, 0.0));
  CHECK(x.version() == 0);
}

TEST_CASE("scatter_add matches a naive loop along every dim with smaller and non-contiguous operands") {
  manual_seed(5);
  Tensor x = randn({5, 4, 3}, dtype(kFloat64));
  Tensor src = randn({6, 5, 4}, dtype(kFloat64)).permute({1, 2, 0});  // [5, 4, 6], non-contiguous
  REQUIRE_FALSE(src.is_contiguous());
  for (int64_t dim = -3; dim < 3; ++dim) {
    int64_t d = dim < 0 ? dim + 3 : dim;
    Shape is = {4, 3, 2};
    Tensor index = randint(0, x.size(d), is);
    auto got = vals(ops::scatter_add(x, dim, index, src));
    auto want = ref_scatter_add(x, d, index, src);
    REQUIRE(got.size() == want.size());
    bool same = true;
    for (size_t k = 0; k < want.size(); ++k) same = same && std::abs(got[k] - want[k]) < 1e-12;
    CHECK(same);
  }
  Tensor xi = i64({0, 0}, {2});
  CHECK(ivals(ops::scatter_add(xi, 0, i64({1, 1, 0}, {3}), i64({1, 2, 3}, {3}))) == std::vector<int64_t>{3, 3});
}

TEST_CASE("gather and scatter_add match naive loops on large parallel-sized problems") {
  manual_seed(9);
  Tensor x = randn({200, 300}, dtype(kFloat64));
  for (int64_t dim : {0, 1}) {
    Tensor index = randint(0, x.size(dim), {200, 300});
    Tensor src = randn({200, 300}, dtype(kFloat64));
    CHECK(vals(ops::gather(x, dim, index)) == ref_gather(x, dim, index));
    auto got = vals(ops::scatter_add(x, dim, index, src));
    auto want = ref_scatter_add(x, dim, index, src);
    bool same = true;
    for (size_t k = 0; k < want.size(); ++k) same = same && std::abs(got[k] - want[k]) < 1e-9;
    CHECK(same);
  }
}

TEST_CASE("scatter_add rejects out-of-range indices, mismatched dtypes and shapes") {
  Tensor x = iota({2, 3});
  Tensor src = iota({2, 3});
  CHECK_THROWS_WITH(ops::scatter_add(x, 0, i64({2, 0}, {1, 2}), src),
                    Contains("scatter_add") && Contains("index 2") && Contains("dimension 0") && Contains("size 2"));
  CHECK_THROWS_WITH(ops::scatter_add(x, 1, i64({0}, {1, 1}), src.to(kFloat32)),
                    Contains("scatter_add") && Contains("float32"));
  CHECK_THROWS_WITH(ops::scatter_add(x, 1, i64({0, 0, 0, 0}, {1, 4}), src),
                    Contains("scatter_add") && Contains("larger than src"));
  CHECK_THROWS_WITH(ops::scatter_add(x, 1, i64({0, 0, 0}, {3, 1}), iota({3, 1})),
                    Contains("scatter_add") && Contains("larger than self"));
  CHECK_THROWS_WITH(ops::scatter_add(x, 1, i64({0}, {1}), src), Contains("dimensions"));
}

// ---- one_hot ----

TEST_CASE("one_hot encodes class indices with explicit and inferred num_classes") {
  Tensor idx = i64({2, 0, 1, 2}, {2, 2});
  Tensor out = ops::one_hot(idx, 4);
  CHECK(out.sizes() == Shape{2, 2, 4});
  CHECK(out.dtype() == kInt64);
  CHECK(ivals(out) == std::vector<int64_t>{0, 0, 1, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0});
  Tensor inferred = ops::one_hot(i64({1, 3}, {2}), -1);
  CHECK(inferred.sizes() == Shape{2, 4});
  CHECK(ivals(inferred) == std::vector<int64_t>{0, 1, 0, 0, 0, 0, 0, 1});
  CHECK(ops::one_hot(i64({}, {0}), 3).sizes() == Shape{0, 3});
  CHECK(ivals(ops::one_hot(i64({4, 2}, {2}).slice(0, 0, 2, 2), 5)) == std::vector<int64_t>{0, 0, 0, 0, 1});
}

TEST_CASE("one_hot rejects out-of-range classes and non-int64 input") {
  CHECK_THROWS_WITH(ops::one_hot(i64({0, 3}, {2}), 3), Contains("one_hot") && Contains("index 3") && Contains("size 3"));
  CHECK_THROWS_WITH(ops::one_hot(i64({-1}, {1}), 3), Contains("one_hot") && Contains("-1"));
  CHECK_THROWS_WITH(ops::one_hot(f64({1}, {1}), 3), Contains("one_hot") && Contains("int64"));
  CHECK_THROWS_WITH(ops::one_hot(i64({}, {0}), -1), Contains("one_hot") && Contains("empty"));
  CHECK_THROWS_WITH(ops::one_hot(i64({0}, {1}), -2), Contains("one_hot") && Contains("num_classes"));
}
