// Elementwise binary and ternary ops: values against naive loops, broadcasting, PyTorch's type
// promotion, strided and expanded inputs, in-place rules and error messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "graft.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;
using Catch::Contains;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Tensor make(const std::vector<double>& v, const Shape& shape, DType d = kFloat32) {
  return graft::tensor(v, shape, graft::dtype(d));
}
Tensor ints(const std::vector<int64_t>& v, const Shape& shape) { return graft::tensor(v, shape); }
Tensor bools(const std::vector<bool>& v, const Shape& shape) { return graft::tensor(v, shape); }

// Exact unless a case says otherwise: the inputs are small binary fractions whose sums and products
// are representable. NaN where the reference has NaN.
const Tolerance kExact{.rtol = 0, .atol = 0, .equal_nan = true};

// Element (i0, i1, ...) of a row-major `shape` read from `v` with NumPy broadcasting from `vshape`.
double bcast_at(const std::vector<double>& v, const Shape& vshape, const Shape& shape, int64_t flat) {
  int64_t off = 0, stride = 1;
  int64_t nd = static_cast<int64_t>(shape.size()), vd = static_cast<int64_t>(vshape.size());
  for (int64_t d = nd - 1; d >= 0; --d) {
    int64_t idx = flat % shape[d];
    flat /= shape[d];
    int64_t vdim = d - (nd - vd);
    if (vdim < 0) continue;
    if (vshape[vdim] != 1) off += idx * stride;
    stride *= vshape[vdim];
  }
  return v[off];
}

// The naive reference of a broadcasting binary op, in double.
template <class F>
std::vector<double> naive(const std::vector<double>& a, const Shape& as, const std::vector<double>& b,
                          const Shape& bs, const Shape& out, F f) {
  std::vector<double> r(shape_numel(out));
  for (int64_t i = 0; i < static_cast<int64_t>(r.size()); ++i) r[i] = f(bcast_at(a, as, out, i), bcast_at(b, bs, out, i));
  return r;
}

}  // namespace

TEST_CASE("add sub mul div match a naive loop in float32 and float64") {
  std::vector<double> a = {1.5, -2, 3.25, 0.5, 7, -1}, b = {0.5, 4, -2, 8, 0.25, 3};
  for (DType d : {kFloat32, kFloat64}) {
    INFO(d);
    Tensor ta = make(a, {2, 3}, d), tb = make(b, {2, 3}, d);
    check_close(graft::add(ta, tb), naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x + y; }),
                kExact);
    check_close(graft::add(ta, tb, 2),
                naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x + 2 * y; }), kExact);
    check_close(graft::sub(ta, tb), naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x - y; }),
                kExact);
    check_close(graft::sub(ta, tb, 0.5),
                naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x - 0.5 * y; }), kExact);
    check_close(graft::mul(ta, tb), naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x * y; }),
                kExact);
    check_close(graft::div(ta, tb), naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x / y; }),
                {.rtol = d == kFloat32 ? 1e-7 : 1e-16, .atol = 0, .equal_nan = true});
    check_close(ta + tb, naive(a, {2, 3}, b, {2, 3}, {2, 3}, [](double x, double y) { return x + y; }), kExact);
    CHECK(graft::add(ta, tb).dtype() == d);
  }
}

TEST_CASE("int64 arithmetic stays int64 and is exact") {
  Tensor a = ints({7, -7, 100, 3}, {4}), b = ints({2, 2, -3, 0}, {4});
  Tensor s = graft::add(a, b, 3);
  CHECK(s.dtype() == kInt64);
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{13, -1, 91, 3});
  CHECK(graft::sub(a, b).to_vector<int64_t>() == std::vector<int64_t>{5, -9, 103, 3});
  CHECK(graft::mul(a, b).to_vector<int64_t>() == std::vector<int64_t>{14, -14, -300, 0});
  CHECK(graft::maximum(a, b).to_vector<int64_t>() == std::vector<int64_t>{7, 2, 100, 3});
  CHECK(graft::minimum(a, b).to_vector<int64_t>() == std::vector<int64_t>{2, -7, -3, 0});
}

TEST_CASE("div is true division: integers give float32") {
  Tensor a = ints({7, -7, 1, 0}, {4}), b = ints({2, 2, 0, 0}, {4});
  Tensor q = graft::div(a, b);
  CHECK(q.dtype() == kFloat32);
  check_close(q, {3.5, -3.5, kInf, kNaN}, kExact);
  CHECK(graft::div(a, 2).dtype() == kFloat32);
  check_close(graft::div(a, 2), {3.5, -3.5, 0.5, 0}, kExact);
  Tensor bb = bools({true, false}, {2});
  CHECK(graft::div(bb, bb).dtype() == kFloat32);
  check_close(ops::rdiv(ints({4, -8}, {2}), 2), {0.5, -0.25}, kExact);
  CHECK(ops::rdiv(ints({4}, {1}), 2).dtype() == kFloat32);
}

TEST_CASE("bool arithmetic follows PyTorch: add is or, mul is and") {
  Tensor a = bools({true, true, false, false}, {4}), b = bools({true, false, true, false}, {4});
  Tensor s = graft::add(a, b);
  CHECK(s.dtype() == kBool);
  CHECK(s.to_vector<bool>() == std::vector<bool>{true, true, true, false});
  CHECK(graft::mul(a, b).to_vector<bool>() == std::vector<bool>{true, false, false, false});
  CHECK(graft::add(a, true).dtype() == kBool);
  CHECK(graft::mul(a, false).to_vector<bool>() == std::vector<bool>{false, false, false, false});
  CHECK(graft::maximum(a, b).to_vector<bool>() == std::vector<bool>{true, true, true, false});
}

TEST_CASE("broadcasting [3, 1] with [1, 4] gives [3, 4]") {
  std::vector<double> a = {1, 2, 3}, b = {10, 20, 30, 40};
  Tensor ta = make(a, {3, 1}), tb = make(b, {1, 4});
  Tensor r = graft::add(ta, tb);
  CHECK(r.sizes() == Shape{3, 4});
  check_close(r, naive(a, {3, 1}, b, {1, 4}, {3, 4}, [](double x, double y) { return x + y; }), kExact);
  check_close(graft::mul(tb, ta), naive(b, {1, 4}, a, {3, 1}, {3, 4}, [](double x, double y) { return x * y; }),
              kExact);
  // fewer dims on one side: [4] against [2, 3, 4]
  std::vector<double> c(24);
  for (int i = 0; i < 24; ++i) c[i] = i;
  Tensor tc = make(c, {2, 3, 4});
  Tensor r2 = graft::sub(tc, make(b, {4}));
  CHECK(r2.sizes() == Shape{2, 3, 4});
  check_close(r2, naive(c, {2, 3, 4}, b, {4}, {2, 3, 4}, [](double x, double y) { return x - y; }), kExact);
  // a size-1 middle dim
  Tensor r3 = graft::mul(tc, make({1, 2, 3}, {3, 1}));
  check_close(r3, naive(c, {2, 3, 4}, {1, 2, 3}, {3, 1}, {2, 3, 4}, [](double x, double y) { return x * y; }), kExact);
}

TEST_CASE("0-d tensors broadcast against any shape") {
  Tensor s = graft::scalar_tensor(2.0);
  REQUIRE(s.dim() == 0);
  Tensor x = make({1, 2, 3, 4}, {2, 2});
  check_close(graft::mul(x, s), {2, 4, 6, 8}, kExact);
  check_close(graft::sub(s, x), {1, 0, -1, -2}, kExact);
  Tensor ss = graft::add(s, s);
  CHECK(ss.dim() == 0);
  CHECK(ss.item<float>() == 4.0f);
  // Next to a tensor with dims, a 0-d tensor counts only when of a higher category (PyTorch's
  // result_type; tests/runtime/test_promotion.cpp has the whole table).
  CHECK(graft::add(ints({1}, {1}), graft::scalar_tensor(0.5)).dtype() == kFloat32);
  CHECK(graft::add(x, graft::scalar_tensor(0.5, graft::dtype(kFloat64))).dtype() == kFloat32);
}

TEST_CASE("empty tensors broadcast to empty results") {
  Tensor e = graft::zeros({0, 3});
  CHECK(graft::add(e, make({1, 2, 3}, {3})).sizes() == Shape{0, 3});
  CHECK(graft::add(graft::zeros({0}), graft::zeros({1})).sizes() == Shape{0});
  CHECK_THROWS_WITH(graft::add(graft::zeros({0}), graft::zeros({2})), Contains("cannot be broadcast"));
}

TEST_CASE("incompatible shapes are an error naming both shapes") {
  Tensor a = graft::zeros({2, 3}), b = graft::zeros({4});
  CHECK_THROWS_AS(graft::add(a, b), graft::Error);
  CHECK_THROWS_WITH(graft::add(a, b), Contains("add") && Contains("[2, 3]") && Contains("[4]") &&
                                          Contains("cannot be broadcast"));
  CHECK_THROWS_WITH(graft::mul(graft::zeros({3, 2}), graft::zeros({2, 3})), Contains("mul") && Contains("[3, 2]") &&
                                                                              Contains("[2, 3]"));
  CHECK_THROWS_WITH(graft::gt(a, b), Contains("gt") && Contains("[2, 3]"));
  CHECK_THROWS_WITH(graft::where(bools({true}, {1}), graft::zeros({2}), graft::zeros({3})),
                    Contains("where") && Contains("[2]") && Contains("[3]"));
}

TEST_CASE("tensor-tensor promotion follows bool < int64 < float32 < float64") {
  std::vector<DType> all = {kBool, kInt64, kFloat32, kFloat64};
  auto rank = [](DType d) { return d == kBool ? 0 : d == kInt64 ? 1 : d == kFloat32 ? 2 : 3; };
  for (DType x : all) {
    for (DType y : all) {
      INFO(x << " with " << y);
      Tensor a = graft::ones({2}, graft::dtype(x)), b = graft::ones({2}, graft::dtype(y));
      DType want = rank(x) >= rank(y) ? x : y;
      CHECK(graft::add(a, b).dtype() == want);
      CHECK(graft::mul(a, b).dtype() == want);
      CHECK(graft::maximum(a, b).dtype() == want);
      CHECK(graft::where(bools({true, false}, {2}), a, b).dtype() == want);
      CHECK(graft::div(a, b).dtype() == (is_floating(want) ? want : kFloat32));
      CHECK(graft::eq(a, b).dtype() == kBool);
      CHECK(graft::eq(a, b).to_vector<bool>() == std::vector<bool>{true, true});
      if (x != kBool && y != kBool) CHECK(graft::sub(a, b).dtype() == want);
    }
  }
  // values survive the promotion
  check_close(graft::add(ints({1, 2}, {2}), make({0.5, 0.25}, {2}, kFloat64)), {1.5, 2.25}, kExact);
  check_close(graft::mul(bools({true, false}, {2}), ints({5, 5}, {2})), {5, 0}, kExact);
}

TEST_CASE("a Scalar changes the result type only when it is of a higher category") {
  Tensor i = ints({1, 2}, {2}), f = make({1, 2}, {2}), d = make({1, 2}, {2}, kFloat64), b = bools({true, false}, {2});
  CHECK(graft::add(i, 2.5).dtype() == kFloat32);
  check_close(graft::add(i, 2.5), {3.5, 4.5}, kExact);
  CHECK(graft::add(i, 2).dtype() == kInt64);
  CHECK(graft::add(f, 2.5).dtype() == kFloat32);
  CHECK(graft::add(f, 2).dtype() == kFloat32);
  CHECK(graft::mul(d, 2).dtype() == kFloat64);
  CHECK(graft::mul(d, 2.5).dtype() == kFloat64);
  CHECK(graft::add(b, 1).dtype() == kInt64);
  check_close(graft::add(b, 1), {2, 1}, kExact);
  CHECK(graft::add(b, true).dtype() == kBool);
  CHECK(graft::mul(b, 1.5).dtype() == kFloat32);
  CHECK(graft::sub(i, 1).dtype() == kInt64);
  CHECK(ops::rsub(i, 10).to_vector<int64_t>() == std::vector<int64_t>{9, 8});
  CHECK(ops::rsub(i, 0.5).dtype() == kFloat32);
  check_close(ops::rsub(f, 0.5), {-0.5, -1.5}, kExact);
  CHECK(ops::gt(i, 1.5).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(ops::eq(i, 2.0).to_vector<bool>() == std::vector<bool>{false, true});
  CHECK(ops::eq(i, 1.5).to_vector<bool>() == std::vector<bool>{false, false});
}

TEST_CASE("operators with a Scalar on either side") {
  Tensor x = make({1, 2, 4}, {3});
  check_close(x + 1, {2, 3, 5}, kExact);
  check_close(1 + x, {2, 3, 5}, kExact);
  check_close(x - 1, {0, 1, 3}, kExact);
  check_close(10 - x, {9, 8, 6}, kExact);
  check_close(x * 2, {2, 4, 8}, kExact);
  check_close(2 * x, {2, 4, 8}, kExact);
  check_close(x / 2, {0.5, 1, 2}, kExact);
  check_close(4 / x, {4, 2, 1}, kExact);
  check_close(-x, {-1, -2, -4}, kExact);
}

TEST_CASE("alpha must fit the result type") {
  Tensor i = ints({1, 2}, {2});
  CHECK_THROWS_WITH(graft::add(i, i, 0.5), Contains("add") && Contains("alpha must not be a floating point"));
  CHECK_THROWS_WITH(graft::add(make({1}, {1}), make({1}, {1}), true), Contains("boolean alpha"));
  CHECK(graft::add(bools({false}, {1}), bools({true}, {1}), true).to_vector<bool>() == std::vector<bool>{true});
  CHECK(graft::add(i, i, -2).to_vector<int64_t>() == std::vector<int64_t>{-1, -2});
}

TEST_CASE("subtraction refuses bool tensors") {
  Tensor b = bools({true}, {1});
  CHECK_THROWS_WITH(graft::sub(b, b), Contains("sub") && Contains("two bool tensors") && Contains("logical_xor"));
  CHECK_THROWS_WITH(graft::sub(b, ints({1}, {1})), Contains("with a bool tensor") && Contains("logical_not"));
  CHECK_THROWS_WITH(graft::sub(ints({1}, {1}), b), Contains("with a bool tensor"));
  CHECK_THROWS_WITH(graft::sub(b, 1), Contains("bool"));
  CHECK_THROWS_WITH(ops::rsub(b, 1), Contains("rsub"));
}

TEST_CASE("pow of two tensors in floating point and integers") {
  Tensor x = make({2, 4, 9, -8}, {4}, kFloat64), e = make({3, 0.5, -1, 1.0 / 3}, {4}, kFloat64);
  check_close(graft::pow(x, e), {8, 2, 1.0 / 9, kNaN}, {.rtol = 1e-15, .atol = 0, .equal_nan = true});
  // broadcast exponent
  check_close(graft::pow(make({1, 2, 3}, {3, 1}), make({1, 2}, {2})), {1, 1, 2, 4, 3, 9}, kExact);
  Tensor i = ints({2, -3, 1, -1, 5}, {5}), ie = ints({10, 3, -4, -3, -1}, {5});
  Tensor p = graft::pow(i, ie);
  CHECK(p.dtype() == kInt64);
  CHECK(p.to_vector<int64_t>() == std::vector<int64_t>{1024, -27, 1, -1, 0});
  CHECK(graft::pow(i, make({0.5}, {1})).dtype() == kFloat32);
  CHECK_THROWS_WITH(graft::pow(bools({true}, {1}), bools({true}, {1})), Contains("pow") && Contains("bool"));
}

TEST_CASE("maximum and minimum propagate NaN") {
  Tensor a = make({1, kNaN, 3, -kInf}, {4}), b = make({2, 0, kNaN, 5}, {4});
  check_close(graft::maximum(a, b), {2, kNaN, kNaN, 5}, kExact);
  check_close(graft::minimum(a, b), {1, kNaN, kNaN, -kInf}, kExact);
}

TEST_CASE("comparisons give bool tensors against tensors and scalars") {
  Tensor a = make({1, 2, 3}, {3}), b = make({3, 2, 1}, {3});
  CHECK(graft::gt(a, b).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(graft::lt(a, b).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(graft::ge(a, b).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(graft::le(a, b).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(graft::eq(a, b).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(graft::ne(a, b).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(a.gt(2).to_vector<bool>() == std::vector<bool>{false, false, true});
  CHECK(a.lt(2).to_vector<bool>() == std::vector<bool>{true, false, false});
  CHECK(a.ge(2).to_vector<bool>() == std::vector<bool>{false, true, true});
  CHECK(a.le(2).to_vector<bool>() == std::vector<bool>{true, true, false});
  CHECK(a.eq(2).to_vector<bool>() == std::vector<bool>{false, true, false});
  CHECK(a.ne(2).to_vector<bool>() == std::vector<bool>{true, false, true});
  CHECK(a.gt(2).dtype() == kBool);
  // mixed dtypes compare in the promoted type; NaN compares unequal
  CHECK(graft::eq(ints({1, 2}, {2}), make({1, 2.5}, {2}, kFloat64)).to_vector<bool>() == std::vector<bool>{true, false});
  CHECK(graft::ne(make({kNaN}, {1}), make({kNaN}, {1})).to_vector<bool>() == std::vector<bool>{true});
  // broadcast comparison
  Tensor c = graft::lt(make({1, 2, 3}, {3, 1}), make({2, 3}, {2}));
  CHECK(c.sizes() == Shape{3, 2});
  CHECK(c.to_vector<bool>() == std::vector<bool>{true, true, false, true, false, false});
}

TEST_CASE("logical_and and logical_or treat nonzero as true") {
  Tensor a = make({0, 1, 2, 0}, {4}), b = ints({0, 0, 5, 3}, {4});
  Tensor r = ops::logical_and(a, b);
  CHECK(r.dtype() == kBool);
  CHECK(r.to_vector<bool>() == std::vector<bool>{false, false, true, false});
  CHECK(ops::logical_or(a, b).to_vector<bool>() == std::vector<bool>{false, true, true, true});
  CHECK(ops::logical_or(bools({true, false}, {2, 1}), bools({false, false}, {2})).sizes() == Shape{2, 2});
}

TEST_CASE("where selects with 3-way broadcasting and promotes a and b") {
  Tensor cond = bools({true, false, true}, {3, 1});
  Tensor a = make({1, 2}, {2}), b = graft::scalar_tensor(-1.0, graft::dtype(kFloat64));
  Tensor r = graft::where(cond, a, b);
  CHECK(r.sizes() == Shape{3, 2});
  CHECK(r.dtype() == kFloat32);  // a 0-d float64 does not widen float32 [2] (PyTorch's result_type)
  CHECK(graft::where(cond, a, make({-1}, {1}, kFloat64)).dtype() == kFloat64);
  check_close(r, {1, 2, -1, -1, 1, 2}, kExact);
  Tensor ri = graft::where(bools({true, false}, {2}), ints({1, 2}, {2}), ints({7, 8}, {2}));
  CHECK(ri.dtype() == kInt64);
  CHECK(ri.to_vector<int64_t>() == std::vector<int64_t>{1, 8});
  CHECK_THROWS_WITH(graft::where(make({1}, {1}), a, a),
                    Contains("where") && Contains("condition to be a boolean tensor") && Contains("float32"));
}

TEST_CASE("clamp with min, max or both, and its dtype rules") {
  Tensor x = make({-2, -0.5, 0.5, 3, kNaN}, {5});
  check_close(graft::clamp(x, -1, 1), {-1, -0.5, 0.5, 1, kNaN}, kExact);
  check_close(graft::clamp(x, 0), {0, 0, 0.5, 3, kNaN}, kExact);
  check_close(graft::clamp(x, std::nullopt, 0), {-2, -0.5, 0, 0, kNaN}, kExact);
  // min > max gives max everywhere, as torch.clamp
  check_close(graft::clamp(make({-5, 0, 5}, {3}), 2, 1), {1, 1, 1}, kExact);
  Tensor i = ints({-5, 0, 5}, {3});
  CHECK(graft::clamp(i, -1, 1).dtype() == kInt64);
  CHECK(graft::clamp(i, -1, 1).to_vector<int64_t>() == std::vector<int64_t>{-1, 0, 1});
  CHECK(graft::clamp(i, 0.5).dtype() == kFloat32);
  check_close(graft::clamp(i, 0.5), {0.5, 0.5, 5}, kExact);
  CHECK_THROWS_WITH(graft::clamp(x, std::nullopt, std::nullopt), Contains("clamp") && Contains("at least one"));
}

TEST_CASE("clamp_ works in place and refuses a float bound on an int64 tensor") {
  Tensor x = make({-2, 0.5, 3}, {3});
  int64_t v = x.version();
  x.clamp_(-1, 1);
  CHECK(x.version() == v + 1);
  check_close(x, {-1, 0.5, 1}, kExact);
  Tensor i = ints({-5, 5}, {2});
  CHECK_THROWS_WITH(i.clamp_(0.5), Contains("clamp_") && Contains("result type Float can't be cast"));
  i.clamp_(0);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{0, 5});
}

TEST_CASE("masked_fill broadcasts the mask and keeps the dtype") {
  Tensor x = make({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor m = bools({true, false, true}, {3});
  Tensor r = graft::masked_fill(x, m, -1);
  CHECK(r.dtype() == kFloat32);
  check_close(r, {-1, 2, -1, -1, 5, -1}, kExact);
  check_close(x, {1, 2, 3, 4, 5, 6}, kExact);  // out of place
  Tensor i = ints({1, 2}, {2});
  Tensor ri = graft::masked_fill(i, bools({false, true}, {2}), 2.7);
  CHECK(ri.dtype() == kInt64);
  CHECK(ri.to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  // a mask with more dims broadcasts the result
  CHECK(graft::masked_fill(make({1, 2}, {2}), bools({true, false}, {2, 1}), 0).sizes() == Shape{2, 2});
  CHECK_THROWS_WITH(graft::masked_fill(x, make({1, 0, 1}, {3}), 0),
                    Contains("masked_fill") && Contains("boolean masks") && Contains("float32"));
}

TEST_CASE("binary ops read transposed, sliced and expanded inputs") {
  std::vector<double> v(12);
  for (int i = 0; i < 12; ++i) v[i] = i + 1;
  Tensor base = make(v, {3, 4}, kFloat64);
  Tensor t = base.t();                        // [4, 3], strides [1, 4]
  Tensor s = base.slice(1, 0, 4, 2).t();      // [2, 3]: columns 0 and 2, transposed
  Tensor e = make({100, 200, 300}, {3}, kFloat64).unsqueeze(0).expand({4, 3});  // stride 0 rows
  Tensor r = graft::add(t, e);
  std::vector<double> want;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(v[j * 4 + i] + 100 * (j + 1));
  check_close(r, want, kExact);
  Tensor r2 = graft::mul(s, make({1, 10}, {2, 1}, kFloat64));
  want.clear();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j) want.push_back(v[j * 4 + 2 * i] * (i == 0 ? 1 : 10));
  check_close(r2, want, kExact);
  // both inputs transposed the same way
  check_close(graft::sub(t, t), std::vector<double>(12, 0.0), kExact);
  // scalar ops on a strided view
  check_close(graft::mul(s, 2.0), {2, 10, 18, 6, 14, 22}, kExact);
}

TEST_CASE("large broadcast and strided ops split over threads match the naive loop") {
  // 512 x 301 = 154112 elements, above kGrainSize
  std::vector<double> a(512), b(301);
  for (int i = 0; i < 512; ++i) a[i] = i * 0.5;
  for (int j = 0; j < 301; ++j) b[j] = j * 0.25 - 7;
  Tensor r = graft::add(make(a, {512, 1}, kFloat64), make(b, {301}, kFloat64));
  CHECK(r.sizes() == Shape{512, 301});
  std::vector<double> got = r.to_vector<double>();
  bool ok = true;
  for (int i = 0; i < 512; ++i)
    for (int j = 0; j < 301; ++j) ok = ok && got[i * 301 + j] == a[i] + b[j];
  CHECK(ok);
  // transposed + contiguous with a parallel split starting mid-row
  Tensor x = graft::randn({301, 512}, graft::dtype(kFloat64));
  Tensor y = graft::randn({512, 301}, graft::dtype(kFloat64));
  Tensor z = graft::mul(x.t(), y);
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>(), zv = z.to_vector<double>();
  ok = true;
  for (int i = 0; i < 512; ++i)
    for (int j = 0; j < 301; ++j) ok = ok && zv[i * 301 + j] == xv[j * 512 + i] * yv[i * 301 + j];
  CHECK(ok);
}

TEST_CASE("in-place binary ops write into self and bump the version exactly once") {
  Tensor x = make({1, 2, 3}, {3});
  Tensor y = make({10, 20, 30}, {3});
  int64_t v = x.version();
  x.add_(y);
  check_close(x, {11, 22, 33}, kExact);
  x.sub_(y, 2);
  check_close(x, {-9, -18, -27}, kExact);
  x.mul_(y);
  check_close(x, {-90, -360, -810}, kExact);
  x.div_(y);
  check_close(x, {-9, -18, -27}, kExact);
  x.add_(1);
  x.sub_(1);
  x.mul_(2);
  x.div_(2);
  check_close(x, {-9, -18, -27}, kExact);
  CHECK(x.version() == v + 8);
  CHECK(y.version() == 0);
  Tensor& ref = ops::add_(x, y);
  CHECK(ref.is_same(x));
}

TEST_CASE("in-place ops on views write through to the base") {
  Tensor base = make({1, 2, 3, 4, 5, 6}, {2, 3});
  int64_t v = base.version();
  Tensor col = base.slice(1, 1, 2);  // [2, 1]
  col.mul_(10);
  check_close(base, {1, 20, 3, 4, 50, 6}, kExact);
  Tensor t = base.t();  // a permuted output: walked in memory order
  t.add_(make({1, 2}, {2}));
  check_close(base, {2, 21, 4, 6, 52, 8}, kExact);
  // broadcast other into a 2-d self
  base.add_(make({100}, {1}));
  check_close(base, {102, 121, 104, 106, 152, 108}, kExact);
  CHECK(base.version() == v + 3);
}

TEST_CASE("in-place ops need the broadcast shape to be self's shape") {
  Tensor x = graft::zeros({3});
  CHECK_THROWS_WITH(x.add_(graft::zeros({2, 3})),
                    Contains("add_") && Contains("output with shape [3] doesn't match the broadcast shape [2, 3]"));
  CHECK_THROWS_WITH(x.mul_(graft::zeros({4})), Contains("mul_") && Contains("cannot be broadcast"));
  // also on the path that computes in a wider type first
  CHECK_THROWS_WITH(x.add_(graft::zeros({2, 3}, graft::dtype(kFloat64))),
                    Contains("output with shape [3] doesn't match the broadcast shape [2, 3]"));
  CHECK(x.version() == 0);
}

TEST_CASE("in-place ops refuse results that cannot be cast to self's dtype") {
  Tensor i = ints({1, 2}, {2});
  CHECK_THROWS_WITH(i.add_(make({1, 1}, {2})),
                    Contains("add_") && Contains("result type Float can't be cast to the desired output type Long"));
  CHECK_THROWS_WITH(i.add_(0.5), Contains("result type Float can't be cast to the desired output type Long"));
  CHECK_THROWS_WITH(i.div_(2), Contains("div_") && Contains("can't be cast"));
  Tensor b = bools({true}, {1});
  CHECK_THROWS_WITH(b.mul_(2), Contains("result type Long can't be cast to the desired output type Bool"));
  CHECK_THROWS_WITH(b.add_(ints({1}, {1})), Contains("Long can't be cast"));
  // allowed: int64 self with bool/int64 operands, float32 self with float64 operands
  i.add_(bools({true, false}, {2}));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{2, 2});
  CHECK(i.dtype() == kInt64);
}

TEST_CASE("float32 self with a float64 operand computes in float64 and rounds once") {
  // 1 + (2^-24 + 2^-50): in float64 the sum lies just above the midpoint between the float32
  // neighbours 1 and 1 + 2^-23, so it rounds up; casting the operand to float32 first would give
  // 1 + 2^-24, a tie that rounds to even (1).
  Tensor x = make({1, 1}, {2}, kFloat32);
  Tensor y = make({std::ldexp(1.0, -24) + std::ldexp(1.0, -50), 3}, {2}, kFloat64);
  int64_t v = x.version();
  x.add_(y);
  CHECK(x.dtype() == kFloat32);
  CHECK(x.version() == v + 1);
  check_close(x, {1 + std::ldexp(1.0, -23), 4}, kExact);
}

TEST_CASE("in-place ops with an overlapping operand read the original values") {
  Tensor x = make({1, 2, 3, 4}, {2, 2});
  x.add_(x.t());
  check_close(x, {2, 5, 5, 8}, kExact);
  // a row of self broadcast over self
  Tensor y = make({1, 2, 3, 4}, {2, 2});
  y.mul_(y[0]);
  check_close(y, {1, 4, 3, 8}, kExact);
  // a shifted window of the same storage
  Tensor z = make({1, 2, 3, 4, 5}, {5});
  Tensor lo = z.slice(0, 0, 4), hi = z.slice(0, 1, 5);
  lo.add_(hi);
  check_close(z, {3, 5, 7, 9, 5}, kExact);
  // exactly self: fine in place
  Tensor w = make({1, 2}, {2});
  w.mul_(w);
  check_close(w, {1, 4}, kExact);
}

TEST_CASE("in-place ops into an expanded tensor are refused") {
  Tensor e = graft::zeros({1}).expand({3});
  CHECK_THROWS_WITH(e.add_(graft::ones({3})), Contains("add_") && Contains("more than one element"));
  CHECK_THROWS_WITH(e.add_(graft::ones({3}, graft::dtype(kFloat64))), Contains("more than one element"));
}

TEST_CASE("addcmul_ addcdiv_ and lerp_ update self in place") {
  Tensor s = make({1, 2, 3}, {3}, kFloat64);
  Tensor a = make({2, 4, 6}, {3}, kFloat64), b = make({0.5, 2, 3}, {3}, kFloat64);
  int64_t v = s.version();
  ops::addcmul_(s, a, b, 2);
  check_close(s, {3, 18, 39}, kExact);
  ops::addcdiv_(s, a, b, 0.5);
  check_close(s, {5, 19, 40}, kExact);
  ops::lerp_(s, make({0, 0, 0}, {3}, kFloat64), 0.25);
  check_close(s, {3.75, 14.25, 30}, kExact);
  ops::lerp_(s, make({1, 1, 1}, {3}, kFloat64), 1.0);
  check_close(s, {1, 1, 1}, kExact);
  CHECK(s.version() == v + 4);
  // broadcast operands
  Tensor m = graft::zeros({2, 3});
  ops::addcmul_(m, make({1, 2, 3}, {3}), make({1, 10}, {2, 1}), 1);
  check_close(m, {1, 2, 3, 10, 20, 30}, kExact);
  // int64 addcmul_ with an integral value
  Tensor i = ints({1, 1}, {2});
  ops::addcmul_(i, ints({2, 3}, {2}), ints({4, 5}, {2}), 2);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{17, 31});
}

TEST_CASE("addcmul_ addcdiv_ and lerp_ report bad arguments") {
  Tensor s = graft::zeros({3});
  CHECK_THROWS_WITH(ops::addcmul_(s, graft::zeros({2, 3}), graft::zeros({3}), 1),
                    Contains("addcmul_") && Contains("output with shape [3] doesn't match the broadcast shape [2, 3]"));
  Tensor i = ints({1}, {1});
  CHECK_THROWS_WITH(ops::addcmul_(i, i, i, 0.5), Contains("addcmul_") && Contains("value must not be a floating"));
  CHECK_THROWS_WITH(ops::addcdiv_(s, ints({1, 1, 1}, {3}), ints({1, 1, 1}, {3}), 1),
                    Contains("addcdiv_") && Contains("integer division"));
  CHECK_THROWS_WITH(ops::addcdiv_(i, make({1}, {1}), make({1}, {1}), 1), Contains("can't be cast"));
  CHECK_THROWS_WITH(ops::lerp_(s, graft::zeros({3}, graft::dtype(kFloat64)), 0.5),
                    Contains("lerp_") && Contains("float32") && Contains("float64"));
  CHECK_THROWS_WITH(ops::lerp_(i, i, 0.5), Contains("lerp_") && Contains("floating"));
}

TEST_CASE("logaddexp is log(exp(a) + exp(b)) without overflow, with PyTorch's infinities") {
  // torch.logaddexp in float64: 2 + log1p(exp(-1)); 1000 + log 2 (exp(1000) alone overflows).
  Tensor a = make({1.0, 1000.0, -INFINITY, INFINITY, INFINITY, NAN, -1000.0}, {7}, kFloat64);
  Tensor b = make({2.0, 1000.0, -INFINITY, INFINITY, 1.0, 1.0, 0.0}, {7}, kFloat64);
  std::vector<double> got = graft::logaddexp(a, b).to_vector<double>();
  CHECK(got[0] == Approx(2.3132616875182228).epsilon(1e-15));
  CHECK(got[1] == Approx(1000.6931471805599).epsilon(1e-15));
  CHECK(got[2] == -INFINITY);
  CHECK(got[3] == INFINITY);
  CHECK(got[4] == INFINITY);
  CHECK(std::isnan(got[5]));
  CHECK(got[6] == 0.0);
  // Broadcasting, integers computed in float32, and d/da = sigmoid(a - b).
  Tensor x = make({0.5, -1.0}, {2, 1}, kFloat64).requires_grad_();
  Tensor y = make({0.0, 2.0, -3.0}, {3}, kFloat64).requires_grad_();
  Tensor out = graft::logaddexp(x, y);
  CHECK(out.sizes() == Shape{2, 3});
  CHECK(out.grad_fn()->name() == "LogaddexpBackward");
  out.sum().backward();
  double gx0 = 0;
  for (double v : {0.0, 2.0, -3.0}) gx0 += 1 / (1 + std::exp(v - 0.5));
  CHECK(x.grad().to_vector<double>()[0] == Approx(gx0).epsilon(1e-14));
  CHECK(graft::logaddexp(graft::tensor(std::vector<int64_t>{1}, {1}), graft::tensor(std::vector<int64_t>{2}, {1}))
            .dtype() == kFloat32);
  CHECK_THROWS_WITH(graft::logaddexp(a, make({1, 2}, {2}, kFloat64)), Contains("logaddexp"));
}
