// copy_, clone, to(dtype), contiguous and fill_: strided and broadcast sources, casts, overlap,
// and version counting. tril/triu against torch 2.x (tests/ops/data/print_tril_triu_fixtures.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "graft.h"

using namespace graft;
using Catch::Contains;

namespace {

Tensor make(const std::vector<double>& v, const Shape& shape, DType d = kFloat32) {
  return graft::tensor(v, shape, graft::dtype(d));
}
std::vector<double> iota(int n) {
  std::vector<double> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

}  // namespace

TEST_CASE("copy_ from a transposed source writes the transpose") {
  Tensor src = make(iota(6), {2, 3});
  Tensor dst = graft::zeros({3, 2});
  int64_t v = dst.version();
  dst.copy_(src.t());
  CHECK(dst.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(dst.version() == v + 1);
  CHECK(src.version() == 0);
}

TEST_CASE("copy_ into a strided destination touches only the view") {
  Tensor base = graft::zeros({3, 4});
  Tensor cols = base.slice(1, 1, 4, 2);  // columns 1 and 3
  cols.copy_(make({1, 2, 3, 4, 5, 6}, {3, 2}));
  CHECK(base.to_vector<double>() == std::vector<double>{0, 1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6});
  CHECK(base.version() == 1);
}

TEST_CASE("copy_ broadcasts a smaller source and refuses a larger one") {
  Tensor dst = graft::zeros({2, 3});
  dst.copy_(make({7, 8, 9}, {3}));
  CHECK(dst.to_vector<double>() == std::vector<double>{7, 8, 9, 7, 8, 9});
  dst.copy_(make({1, 2}, {2, 1}));
  CHECK(dst.to_vector<double>() == std::vector<double>{1, 1, 1, 2, 2, 2});
  dst.copy_(graft::scalar_tensor(5.0));
  CHECK(dst.to_vector<double>() == std::vector<double>(6, 5.0));
  Tensor small = graft::zeros({3});
  CHECK_THROWS_AS(small.copy_(graft::zeros({2, 3})), graft::Error);
  CHECK_THROWS_WITH(small.copy_(graft::zeros({2, 3})), Contains("copy_") && Contains("[2, 3]") && Contains("[3]"));
  CHECK_THROWS_WITH(small.copy_(graft::zeros({4})), Contains("copy_") && Contains("[4]"));
}

TEST_CASE("copy_ casts between dtypes") {
  Tensor f = graft::zeros({4});
  f.copy_(graft::tensor(std::vector<int64_t>{1, -2, 3, 4}, {4}));
  CHECK(f.dtype() == kFloat32);
  CHECK(f.to_vector<double>() == std::vector<double>{1, -2, 3, 4});
  Tensor i = graft::zeros({3}, graft::dtype(kInt64));
  i.copy_(make({1.9, -1.9, 0.2}, {3}));
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -1, 0});  // truncation toward zero
  Tensor b = graft::zeros({3}, graft::dtype(kBool));
  b.copy_(make({0, -0.5, 2}, {3}));
  CHECK(b.to_vector<bool>() == std::vector<bool>{false, true, true});
}

TEST_CASE("overlapping copy x.copy_(x.t()) gives the transpose of the original") {
  Tensor x = make(iota(9), {3, 3});
  x.copy_(x.t());
  CHECK(x.to_vector<double>() == std::vector<double>{0, 3, 6, 1, 4, 7, 2, 5, 8});
  // copying a tensor onto itself is a no-op that still counts as a write
  Tensor y = make(iota(4), {4});
  int64_t v = y.version();
  y.copy_(y);
  CHECK(y.to_vector<double>() == std::vector<double>{0, 1, 2, 3});
  CHECK(y.version() == v + 1);
  // a shifted window of the same storage
  Tensor z = make(iota(5), {5});
  z.slice(0, 1, 5).copy_(z.slice(0, 0, 4));
  CHECK(z.to_vector<double>() == std::vector<double>{0, 0, 1, 2, 3});
}

TEST_CASE("clone of a strided tensor is a contiguous equal copy at version 0") {
  Tensor base = make(iota(12), {3, 4});
  Tensor t = base.t().slice(0, 1, 4, 2);  // [2, 3]: columns 1 and 3 of base
  Tensor c = t.clone();
  CHECK(c.is_contiguous());
  CHECK(c.sizes() == Shape{2, 3});
  CHECK(c.to_vector<double>() == std::vector<double>{1, 5, 9, 3, 7, 11});
  CHECK(c.version() == 0);
  CHECK_FALSE(c.is_alias_of(base));
  base.fill_(0);
  CHECK(c.to_vector<double>() == std::vector<double>{1, 5, 9, 3, 7, 11});
  // clone of an expanded tensor materialises every element
  Tensor e = make({1, 2}, {2}).expand({3, 2}).clone();
  CHECK(e.strides() == Shape{2, 1});
  CHECK(e.to_vector<double>() == std::vector<double>{1, 2, 1, 2, 1, 2});
}

TEST_CASE("to(dtype) casts strided inputs and returns self for the same dtype") {
  Tensor x = make({1.5, -2.5, 0, 3}, {2, 2});
  CHECK(x.to(kFloat32).is_same(x));
  Tensor d = x.t().to(kFloat64);
  CHECK(d.dtype() == kFloat64);
  CHECK(d.strides() == Shape{1, 2});  // memory_format=preserve, as PyTorch: a dense transpose keeps its strides
  CHECK(d.to_vector<double>() == std::vector<double>{1.5, 0, -2.5, 3});
  Tensor i = x.to(kInt64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 0, 3});
  Tensor b = x.to(kBool);
  CHECK(b.dtype() == kBool);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true, false, true});
  Tensor back = b.to(kFloat32);
  CHECK(back.to_vector<double>() == std::vector<double>{1, 1, 0, 1});
  Tensor nan_to_bool = make({std::nan("")}, {1}).to(kBool);
  CHECK(nan_to_bool.item<bool>());
}

TEST_CASE("contiguous returns self when already contiguous and a copy otherwise") {
  Tensor x = make(iota(6), {2, 3});
  CHECK(x.contiguous().is_same(x));
  Tensor t = x.t();
  Tensor c = t.contiguous();
  CHECK_FALSE(c.is_same(t));
  CHECK(c.is_contiguous());
  CHECK(c.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  // size-1 dims with odd strides still count as contiguous
  Tensor row = x.slice(0, 1, 2);
  CHECK(row.is_contiguous());
  CHECK(row.contiguous().is_same(row));
}

TEST_CASE("fill_ on a view writes only the view and bumps the version once") {
  Tensor base = graft::zeros({3, 3});
  Tensor diag_col = base.slice(1, 2, 3);  // last column
  int64_t v = base.version();
  diag_col.fill_(4);
  CHECK(base.version() == v + 1);
  CHECK(diag_col.version() == v + 1);
  CHECK(base.to_vector<double>() == std::vector<double>{0, 0, 4, 0, 0, 4, 0, 0, 4});
  base.t().slice(0, 0, 1).fill_(-1);  // first column through a transposed view
  CHECK(base.to_vector<double>() == std::vector<double>{-1, 0, 4, -1, 0, 4, -1, 0, 4});
  base.zero_();
  CHECK(base.to_vector<double>() == std::vector<double>(9, 0.0));
  CHECK(base.version() == v + 3);
}

TEST_CASE("fill_ casts the value to the tensor's dtype") {
  Tensor i = graft::zeros({2}, graft::dtype(kInt64));
  i.fill_(3);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{3, 3});
  Tensor b = graft::zeros({2}, graft::dtype(kBool));
  b.fill_(2);
  CHECK(b.to_vector<bool>() == std::vector<bool>{true, true});
  Tensor d = graft::zeros({2}, graft::dtype(kFloat64));
  d.fill_(0.1);
  CHECK(d.to_vector<double>() == std::vector<double>{0.1, 0.1});
}

TEST_CASE("large strided copies match element by element") {
  // 257 x 301 > kGrainSize: the copy may run on several threads.
  Tensor x = graft::randn({257, 301}, graft::dtype(kFloat64));
  Tensor y = x.t().contiguous();
  std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  bool ok = true;
  for (int i = 0; i < 301 && ok; ++i)
    for (int j = 0; j < 257; ++j) ok = ok && yv[i * 257 + j] == xv[j * 301 + i];
  CHECK(ok);
  Tensor f = x.to(kFloat32);
  std::vector<float> fv = f.to_vector<float>();
  ok = true;
  for (size_t k = 0; k < fv.size(); ++k) ok = ok && fv[k] == static_cast<float>(xv[k]);
  CHECK(ok);
}

TEST_CASE("strided copies whose last dim is dense on both sides convert row by row, as element by element") {
  // A narrowed view (attention's q out of a fused qkv): rows of 64 dense elements, 192 apart; more
  // rows than one task takes.
  Tensor x = graft::randn({64, 17, 192});
  Tensor q = x.narrow(2, 64, 64);
  REQUIRE_FALSE(q.is_contiguous());
  std::vector<float> xv = x.to_vector<float>();
  auto source = [&](size_t i, size_t j, size_t k) { return xv[(i * 17 + j) * 192 + 64 + k]; };
  for (DType d : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO(d);
    auto expected = [&](float v) {
      if (d == kBFloat16) return static_cast<float>(BFloat16(v));
      if (d == kFloat16) return static_cast<float>(Half(v));
      return v;
    };
    std::vector<float> got = q.to(d).contiguous().to(kFloat32).to_vector<float>();
    bool ok = true;
    for (size_t i = 0; i < 64 && ok; ++i)
      for (size_t j = 0; j < 17; ++j)
        for (size_t k = 0; k < 64; ++k) ok = ok && got[(i * 17 + j) * 64 + k] == expected(source(i, j, k));
    CHECK(ok);
  }
  // Into a strided destination: the rows land in place and nothing else is written.
  Tensor dst = graft::zeros({64, 17, 128});
  dst.narrow(2, 32, 64).copy_(q);
  std::vector<float> dv = dst.to_vector<float>();
  bool ok = true;
  for (size_t i = 0; i < 64 && ok; ++i)
    for (size_t j = 0; j < 17; ++j)
      for (size_t k = 0; k < 128; ++k) {
        const float want = k >= 32 && k < 96 ? source(i, j, k - 32) : 0.0f;
        ok = ok && dv[(i * 17 + j) * 128 + k] == want;
      }
  CHECK(ok);
}

TEST_CASE("transposing copies (channels-last made row-major) run by blocks, as element by element") {
  // [N, C, H, W] stored NHWC: the row-major copy reads C densely and writes W densely, so it takes
  // the blocked transpose; sizes are not multiples of the 16 x 16 blocks.
  Tensor x = graft::randn({5, 37, 6, 9}).contiguous(MemoryFormat::ChannelsLast);
  const float* raw = static_cast<const float*>(x.data_ptr());  // NHWC order
  std::vector<float> xv(raw, raw + x.numel());
  auto source = [&](size_t n, size_t c, size_t h, size_t w) { return xv[((n * 6 + h) * 9 + w) * 37 + c]; };
  for (DType d : {kFloat32, kFloat64, kBFloat16, kInt32}) {
    INFO(d);
    Tensor src = x.to(d);
    REQUIRE(src.is_contiguous(MemoryFormat::ChannelsLast));
    std::vector<double> want_v;
    for (size_t n = 0; n < 5; ++n)
      for (size_t c = 0; c < 37; ++c)
        for (size_t h = 0; h < 6; ++h)
          for (size_t w = 0; w < 9; ++w) want_v.push_back(source(n, c, h, w));
    // Same dtype (bits as they are), and cast on the way (to float64, then compared in float64).
    CHECK(src.contiguous().to(kFloat64).to_vector<double>() == make(want_v, x.sizes()).to(d).to(kFloat64).to_vector<double>());
    Tensor cast = graft::empty(x.sizes(), graft::dtype(kFloat64));
    cast.copy_(src);
    CHECK(cast.to_vector<double>() == make(want_v, x.sizes()).to(d).to(kFloat64).to_vector<double>());
  }
  // A bfloat16 NaN's payload survives a transposing copy (a copy is not a rounding).
  Tensor nan_bits = graft::zeros({40, 33}, graft::dtype(kBFloat16));
  nan_bits.fill_(1.0);
  reinterpret_cast<uint16_t*>(nan_bits.data_ptr())[5] = 0x7F81;  // signalling-pattern NaN, low payload bit
  Tensor t = nan_bits.t().contiguous();
  CHECK(reinterpret_cast<const uint16_t*>(t.data_ptr())[5 * 40] == 0x7F81);
  // And through the element-at-a-time path (every other column: no dense dim on the source side).
  Tensor stepped = ops::slice(nan_bits, 1, 1, 33, 2).contiguous();
  CHECK(reinterpret_cast<const uint16_t*>(stepped.data_ptr())[2] == 0x7F81);
}

namespace {
// from, from + 1, ... in `shape`.
Tensor arange_from(double from, const Shape& shape, DType d = kFloat32) {
  std::vector<double> v(static_cast<size_t>(shape_numel(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = from + static_cast<double>(i);
  return make(v, shape, d);
}
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }
}  // namespace

TEST_CASE("tril and triu keep PyTorch's triangles for every diagonal") {
  const Tensor m = arange_from(1, {3, 4});
  struct Case {
    int64_t diagonal;
    std::vector<double> tril, triu;
  };
  for (const Case& c : std::vector<Case>{
           {-3, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}},
           {-1, {0, 0, 0, 0, 5, 0, 0, 0, 9, 10, 0, 0}, {1, 2, 3, 4, 5, 6, 7, 8, 0, 10, 11, 12}},
           {0, {1, 0, 0, 0, 5, 6, 0, 0, 9, 10, 11, 0}, {1, 2, 3, 4, 0, 6, 7, 8, 0, 0, 11, 12}},
           {1, {1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12}, {0, 2, 3, 4, 0, 0, 7, 8, 0, 0, 0, 12}},
           {3, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0}},
           {5, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}},
       }) {
    INFO("diagonal " << c.diagonal);
    CHECK(values(tril(m, c.diagonal)) == c.tril);
    CHECK(values(m.triu(c.diagonal)) == c.triu);
  }
  // Extreme diagonals cannot overflow the column arithmetic.
  CHECK(values(tril(m, std::numeric_limits<int64_t>::max())) == values(m));
  CHECK(values(triu(m, std::numeric_limits<int64_t>::min())) == values(m));
  CHECK(values(triu(m, std::numeric_limits<int64_t>::max())) == std::vector<double>(12, 0.0));
}

TEST_CASE("tril and triu are batched over leading dims and take strided inputs and any dtype") {
  const Tensor b = arange_from(1, {2, 3, 3});
  CHECK(values(tril(b, -1)) == std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0, 0, 0, 0, 13, 0, 0, 16, 17, 0});
  CHECK(values(triu(b, 1)) == std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0, 0, 11, 12, 0, 0, 15, 0, 0, 0});
  const Tensor tall = arange_from(1, {4, 2});
  CHECK(values(tril(tall)) == std::vector<double>{1, 0, 3, 4, 5, 6, 7, 8});
  CHECK(values(triu(tall, -2)) == std::vector<double>{1, 2, 3, 4, 5, 6, 0, 8});
  // A transposed view: the triangle of what the view shows.
  const Tensor t = arange_from(1, {2, 4}).t();  // [4, 2], rows (1, 5), (2, 6), (3, 7), (4, 8)
  CHECK(values(tril(t)) == std::vector<double>{1, 0, 2, 6, 3, 7, 4, 8});
  for (DType d : {kFloat64, kBFloat16, kFloat16, kInt64, kInt32, kUInt8}) {
    INFO(d);
    const Tensor r = tril(arange_from(1, {3, 4}, d), 1);
    CHECK(r.dtype() == d);
    CHECK(values(r) == std::vector<double>{1, 2, 0, 0, 5, 6, 7, 0, 9, 10, 11, 12});
  }
  const Tensor mask = tril(ones({3, 3}, dtype(kBool)));
  CHECK(mask.dtype() == kBool);
  CHECK(values(mask) == std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1});
  CHECK(tril(zeros({0, 3})).sizes() == Shape{0, 3});
}

TEST_CASE("tril and triu refuse fewer than 2 dims and pass the triangle of the gradient") {
  CHECK_THROWS_WITH(tril(ones({3})), Contains("tril: input tensor must have at least 2 dimensions"));
  CHECK_THROWS_WITH(triu(scalar_tensor(1.0)), Contains("triu: input tensor must have at least 2 dimensions"));
  const Tensor x = ones({2, 3}, dtype(kFloat64)).requires_grad_();
  (tril(x) * arange_from(1, {2, 3}, kFloat64)).sum().backward();
  CHECK(values(x.grad()) == std::vector<double>{1, 0, 0, 4, 5, 0});
}
