// Joining and splitting: cat, stack, split / split_with_sizes / chunk (views), pad.
#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;
using Catch::Contains;

namespace {

Tensor f64(const std::vector<double>& v, const Shape& s) { return tensor(v, s); }
Tensor i64(const std::vector<int64_t>& v, const Shape& s) { return tensor(v, s); }
Tensor iota(const Shape& shape, double start = 0) {
  return arange(start, start + static_cast<double>(shape_numel(shape)), 1, dtype(kFloat64)).reshape(shape);
}
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }

}  // namespace

// ---- cat ----

TEST_CASE("cat joins tensors along each dim, including negative dims") {
  Tensor a = iota({2, 2});       // [[0, 1], [2, 3]]
  Tensor b = iota({2, 1}, 10);   // [[10], [11]]
  Tensor c = iota({1, 2}, 20);   // [[20, 21]]
  Tensor r0 = ops::cat({a, c}, 0);
  CHECK(r0.sizes() == Shape{3, 2});
  CHECK(vals(r0) == std::vector<double>{0, 1, 2, 3, 20, 21});
  Tensor r1 = ops::cat({a, b, a}, 1);
  CHECK(r1.sizes() == Shape{2, 5});
  CHECK(vals(r1) == std::vector<double>{0, 1, 10, 0, 1, 2, 3, 11, 2, 3});
  CHECK(vals(ops::cat({a, b}, -1)) == std::vector<double>{0, 1, 10, 2, 3, 11});
  CHECK(vals(ops::cat({c, a}, -2)) == std::vector<double>{20, 21, 0, 1, 2, 3});
  // 3-D, middle dim.
  Tensor x = iota({2, 1, 2}), y = iota({2, 2, 2}, 100);
  CHECK(vals(ops::cat({x, y}, 1)) == std::vector<double>{0, 1, 100, 101, 102, 103, 2, 3, 104, 105, 106, 107});
  // A single tensor gives a copy, not the same storage.
  Tensor one = ops::cat({a}, 0);
  CHECK_FALSE(one.is_alias_of(a));
  CHECK(vals(one) == vals(a));
}

TEST_CASE("cat promotes dtypes across inputs and reads non-contiguous inputs") {
  Tensor a = i64({1, 2}, {1, 2});
  Tensor b = f64({0.5, 1.5}, {1, 2}).to(kFloat32);
  Tensor bo = tensor(std::vector<bool>{true, false}, {1, 2});
  Tensor r = ops::cat({a, b, bo}, 0);
  CHECK(r.dtype() == kFloat32);
  CHECK(r.to_vector<float>() == std::vector<float>{1, 2, 0.5f, 1.5f, 1, 0});
  CHECK(ops::cat({bo, a}, 0).dtype() == kInt64);
  CHECK(ops::cat({b, f64({3, 4}, {1, 2})}, 0).dtype() == kFloat64);
  Tensor t = iota({3, 2}).t();  // [2, 3] = [[0, 2, 4], [1, 3, 5]]
  REQUIRE_FALSE(t.is_contiguous());
  CHECK(vals(ops::cat({t, iota({2, 1}, 9)}, 1)) == std::vector<double>{0, 2, 4, 9, 1, 3, 5, 10});
  CHECK(vals(ops::cat({t, t}, 0)) == std::vector<double>{0, 2, 4, 1, 3, 5, 0, 2, 4, 1, 3, 5});
}

TEST_CASE("cat skips legacy 1-D empty tensors and keeps empty inputs of the right rank") {
  Tensor a = iota({2, 2});
  Tensor e = empty({0});
  Tensor r = ops::cat({e, a, e}, 1);
  CHECK(r.sizes() == Shape{2, 2});
  CHECK(vals(r) == vals(a));
  CHECK(ops::cat({a, iota({0, 2})}, 0).sizes() == Shape{2, 2});
  CHECK(ops::cat({e, e}, 0).sizes() == Shape{0});
}

TEST_CASE("cat matches a reference on a large parallel-sized problem") {
  manual_seed(1);
  Tensor a = randn({300, 200}, dtype(kFloat64));
  Tensor b = randn({200, 300}, dtype(kFloat64)).t();  // [300, 200], non-contiguous
  Tensor r = ops::cat({a, b}, 1);
  REQUIRE(r.sizes() == Shape{300, 400});
  auto rv = vals(r), av = vals(a), bv = vals(b);
  bool same = true;
  for (int i = 0; i < 300; ++i)
    for (int j = 0; j < 200; ++j)
      same = same && rv[i * 400 + j] == av[i * 200 + j] && rv[i * 400 + 200 + j] == bv[i * 200 + j];
  CHECK(same);
}

TEST_CASE("cat rejects mismatched shapes, ranks, empty lists and 0-d tensors") {
  Tensor a = iota({2, 3});
  CHECK_THROWS_WITH(ops::cat({a, iota({2, 4})}, 0),
                    Contains("cat") && Contains("Expected size 3 but got size 4") && Contains("tensor number 1"));
  CHECK_THROWS_WITH(ops::cat({a, a, iota({3, 3})}, 1), Contains("Expected size 2 but got size 3") &&
                                                          Contains("tensor number 2"));
  CHECK_THROWS_WITH(ops::cat({a, iota({2, 3, 1})}, 0), Contains("cat") && Contains("same number of dimensions"));
  CHECK_THROWS_WITH(ops::cat({}, 0), Contains("cat") && Contains("non-empty"));
  CHECK_THROWS_WITH(ops::cat({a, f64({1}, {})}, 0), Contains("cat") && Contains("zero-dimensional"));
  CHECK_THROWS_WITH(ops::cat({a, a}, 2), Contains("cat") && Contains("dimension out of range"));
}

// ---- stack ----

TEST_CASE("stack inserts a new dim at every position, including negative ones") {
  Tensor a = iota({2, 2}), b = iota({2, 2}, 10);
  Tensor s0 = ops::stack({a, b}, 0);
  CHECK(s0.sizes() == Shape{2, 2, 2});
  CHECK(vals(s0) == std::vector<double>{0, 1, 2, 3, 10, 11, 12, 13});
  Tensor s1 = ops::stack({a, b}, 1);
  CHECK(s1.sizes() == Shape{2, 2, 2});
  CHECK(vals(s1) == std::vector<double>{0, 1, 10, 11, 2, 3, 12, 13});
  Tensor s2 = ops::stack({a, b}, -1);
  CHECK(s2.sizes() == Shape{2, 2, 2});
  CHECK(vals(s2) == std::vector<double>{0, 10, 1, 11, 2, 12, 3, 13});
  Tensor sc = ops::stack({f64({1}, {}), f64({2}, {}), f64({3}, {})}, 0);
  CHECK(sc.sizes() == Shape{3});
  CHECK(vals(sc) == std::vector<double>{1, 2, 3});
  Tensor sm = ops::stack({i64({1, 2}, {2}), a.select(0, 1).t()}, 0);  // mixed dtypes promote
  CHECK(sm.dtype() == kFloat64);
  CHECK(vals(sm) == std::vector<double>{1, 2, 2, 3});
}

TEST_CASE("stack rejects differently shaped inputs and bad dims") {
  Tensor a = iota({2, 2});
  CHECK_THROWS_WITH(ops::stack({a, a, iota({2, 3})}, 0),
                    Contains("stack") && Contains("[2, 2]") && Contains("[2, 3]") && Contains("entry 2"));
  CHECK_THROWS_WITH(ops::stack({a, a}, 3), Contains("stack") && Contains("dimension out of range"));
  CHECK_THROWS_WITH(ops::stack({}, 0), Contains("stack") && Contains("non-empty"));
}

// ---- split / chunk ----

TEST_CASE("split returns views that share storage, with a smaller last piece") {
  Tensor x = iota({5, 2});
  auto parts = ops::split(x, 2, 0);
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].sizes() == Shape{2, 2});
  CHECK(parts[1].sizes() == Shape{2, 2});
  CHECK(parts[2].sizes() == Shape{1, 2});
  CHECK(vals(parts[1]) == std::vector<double>{4, 5, 6, 7});
  CHECK(vals(parts[2]) == std::vector<double>{8, 9});
  for (auto& p : parts) CHECK(p.is_alias_of(x));
  // Writing through a piece changes x, and the version counter is shared.
  parts[1].fill_(-1);
  CHECK(vals(x) == std::vector<double>{0, 1, 2, 3, -1, -1, -1, -1, 8, 9});
  CHECK(x.version() == parts[0].version());
  CHECK(x.version() > 0);
  // Along the last dim (negative), pieces are strided views.
  auto cols = ops::split(iota({2, 3}), 2, -1);
  REQUIRE(cols.size() == 2);
  CHECK(cols[0].sizes() == Shape{2, 2});
  CHECK(cols[1].sizes() == Shape{2, 1});
  CHECK(vals(cols[1]) == std::vector<double>{2, 5});
  CHECK(ops::split(iota({2, 3}), 5, 1).size() == 1);
  CHECK(ops::split(iota({0, 3}), 2, 0).size() == 1);
}

TEST_CASE("split_with_sizes returns views of the given sizes") {
  Tensor x = iota({2, 6});
  auto parts = ops::split_with_sizes(x, {1, 0, 3, 2}, 1);
  REQUIRE(parts.size() == 4);
  CHECK(parts[0].sizes() == Shape{2, 1});
  CHECK(parts[1].sizes() == Shape{2, 0});
  CHECK(parts[2].sizes() == Shape{2, 3});
  CHECK(parts[3].sizes() == Shape{2, 2});
  CHECK(vals(parts[2]) == std::vector<double>{1, 2, 3, 7, 8, 9});
  CHECK(vals(parts[3]) == std::vector<double>{4, 5, 10, 11});
  parts[3].fill_(0);
  CHECK(vals(x) == std::vector<double>{0, 1, 2, 3, 0, 0, 6, 7, 8, 9, 0, 0});
  // A non-contiguous input splits into views of it.
  Tensor t = iota({3, 2}).t();
  auto tp = ops::split_with_sizes(t, {2, 1}, 1);
  CHECK(vals(tp[0]) == std::vector<double>{0, 2, 1, 3});
  CHECK(vals(tp[1]) == std::vector<double>{4, 5});
  CHECK(tp[1].is_alias_of(t));
}

TEST_CASE("chunk splits into ceil(n / chunks) sized views, possibly fewer chunks") {
  Tensor x = iota({5});
  auto c2 = ops::chunk(x, 2, 0);
  REQUIRE(c2.size() == 2);
  CHECK(vals(c2[0]) == std::vector<double>{0, 1, 2});
  CHECK(vals(c2[1]) == std::vector<double>{3, 4});
  // 6 elements in 4 chunks: size 2 each, so only 3 chunks.
  auto c4 = ops::chunk(iota({2, 6}), 4, -1);
  REQUIRE(c4.size() == 3);
  for (auto& c : c4) CHECK(c.sizes() == Shape{2, 2});
  CHECK(ops::chunk(x, 8, 0).size() == 5);
  CHECK(ops::chunk(iota({0}), 3, 0).size() == 3);
  c2[1].fill_(7);
  CHECK(vals(x) == std::vector<double>{0, 1, 2, 7, 7});
  CHECK(c2[0].is_alias_of(x));
}

TEST_CASE("split, split_with_sizes and chunk are registered as views returning tensor lists") {
  for (const char* name : {"split", "split_with_sizes", "chunk"}) {
    const OpSchema& s = op_handle(name).schema;
    INFO(name);
    CHECK(s.is_view());
    REQUIRE(s.returns.size() == 1);
    CHECK(s.returns[0].type == "Tensor[]");
    CHECK(s.returns[0].alias == "a");
  }
  CHECK_FALSE(op_handle("cat").schema.is_view());
  CHECK_FALSE(op_handle("pad").schema.is_view());
}

TEST_CASE("split, split_with_sizes and chunk reject bad arguments") {
  Tensor x = iota({4, 3});
  CHECK_THROWS_WITH(ops::split(x, 0, 0), Contains("split") && Contains("split_size"));
  CHECK_THROWS_WITH(ops::split(x, -1, 0), Contains("split") && Contains("split_size"));
  CHECK_THROWS_WITH(ops::split(x, 1, 2), Contains("split") && Contains("dimension out of range"));
  CHECK_THROWS_WITH(ops::split(f64({1}, {}), 1, 0), Contains("split") && Contains("1-dimensional"));
  CHECK_THROWS_WITH(ops::split_with_sizes(x, {2, 1}, 0),
                    Contains("split_with_sizes") && Contains("[2, 1]") && Contains("size 4"));
  CHECK_THROWS_WITH(ops::split_with_sizes(x, {5, -1}, 0), Contains("split_with_sizes") && Contains("non-negative"));
  CHECK_THROWS_WITH(ops::chunk(x, 0, 0), Contains("chunk") && Contains("greater than 0"));
  CHECK_THROWS_WITH(ops::chunk(x, 2, -3), Contains("chunk") && Contains("dimension out of range"));
}

// ---- pad ----

TEST_CASE("pad adds constant borders to the last 1, 2 and 3 dims") {
  Tensor x = f64({1, 2, 3}, {3});
  Tensor p1 = ops::pad(x, {2, 1}, 9);
  CHECK(p1.sizes() == Shape{6});
  CHECK(vals(p1) == std::vector<double>{9, 9, 1, 2, 3, 9});

  Tensor m = iota({2, 2}, 1);  // [[1, 2], [3, 4]]
  Tensor p2 = ops::pad(m, {1, 0, 0, 1});  // left 1 on the last dim, bottom 1 on the first
  CHECK(p2.sizes() == Shape{3, 3});
  CHECK(vals(p2) == std::vector<double>{0, 1, 2, 0, 3, 4, 0, 0, 0});
  // Only the last dim of a 2-D tensor.
  CHECK(vals(ops::pad(m, {0, 1}, -1)) == std::vector<double>{1, 2, -1, 3, 4, -1});

  Tensor c = iota({1, 1, 2}, 5);  // [[[5, 6]]]
  Tensor p3 = ops::pad(c, {1, 0, 0, 1, 1, 0});
  CHECK(p3.sizes() == Shape{2, 2, 3});
  CHECK(vals(p3) == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 5, 6, 0, 0, 0});
  // Non-contiguous input, integer dtype (value converted), and no pads at all.
  Tensor t = iota({2, 2}, 1).t();  // [[1, 3], [2, 4]]
  CHECK(vals(ops::pad(t, {0, 1, 1, 0})) == std::vector<double>{0, 0, 0, 1, 3, 0, 2, 4, 0});
  Tensor pi = ops::pad(i64({7}, {1}), {1, 1}, 2);
  CHECK(pi.dtype() == kInt64);
  CHECK(pi.to_vector<int64_t>() == std::vector<int64_t>{2, 7, 2});
  Tensor same = ops::pad(m, {});
  CHECK_FALSE(same.is_alias_of(m));
  CHECK(vals(same) == vals(m));
}

TEST_CASE("negative pads crop, alone or mixed with positive pads") {
  Tensor x = iota({5});  // [0, 1, 2, 3, 4]
  CHECK(vals(ops::pad(x, {-1, -2})) == std::vector<double>{1, 2});
  CHECK(vals(ops::pad(x, {-2, 1}, 8)) == std::vector<double>{2, 3, 4, 8});
  CHECK(ops::pad(x, {-3, -2}).sizes() == Shape{0});
  CHECK(vals(ops::pad(x, {-6, 2}, 1)) == std::vector<double>{1});  // cropped away entirely, then padded

  Tensor m = iota({3, 4});  // rows [0..3] [4..7] [8..11]
  Tensor p2 = ops::pad(m, {-1, 1, 1, -2}, -5);
  CHECK(p2.sizes() == Shape{2, 4});
  CHECK(vals(p2) == std::vector<double>{-5, -5, -5, -5, 1, 2, 3, -5});

  Tensor c = iota({2, 3, 3});
  Tensor p3 = ops::pad(c, {-1, -1, -1, -1, -1, 0});
  CHECK(p3.sizes() == Shape{1, 1, 1});
  CHECK(vals(p3) == std::vector<double>{13});
}

TEST_CASE("pad matches a reference on a large parallel-sized problem") {
  manual_seed(2);
  Tensor x = randn({4, 150, 120}, dtype(kFloat64)).transpose(1, 2);  // [4, 120, 150], non-contiguous
  Tensor p = ops::pad(x, {2, -3, -1, 1, 1, 0}, 0.5);
  REQUIRE(p.sizes() == Shape{5, 120, 149});
  auto pv = vals(p), xv = vals(x);
  bool same = true;
  for (int a = 0; a < 5; ++a)
    for (int b = 0; b < 120; ++b)
      for (int c = 0; c < 149; ++c) {
        int xa = a - 1, xb = b + 1, xc = c - 2;
        bool inside = xa >= 0 && xb < 120 && xc >= 0 && xc < 147;
        double want = inside ? xv[(xa * 120 + xb) * 150 + xc] : 0.5;
        same = same && pv[(a * 120 + b) * 149 + c] == want;
      }
  CHECK(same);
}

TEST_CASE("pad rejects odd pad lists, too many pairs and negative output sizes") {
  Tensor m = iota({2, 3});
  CHECK_THROWS_WITH(ops::pad(m, {1, 2, 3}), Contains("pad") && Contains("even"));
  CHECK_THROWS_WITH(ops::pad(m, {1, 1, 1, 1, 1, 1}), Contains("pad") && Contains("3 pairs") && Contains("2 dimensions"));
  CHECK_THROWS_WITH(ops::pad(m, {-2, -2}), Contains("pad") && Contains("negative output size -1"));
}
