// copy_, clone, to(dtype), contiguous and fill_: strided and broadcast sources, casts, overlap,
// and version counting.
#include <catch2/catch.hpp>

#include <cmath>
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
