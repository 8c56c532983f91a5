#include <catch2/catch.hpp>

#include "graft.h"

using namespace graft;

namespace {
std::vector<float> vals(const Tensor& t) { return t.to_vector<float>(); }
}  // namespace

TEST_CASE("a fresh tensor is contiguous with row-major strides") {
  Tensor t = ops::zeros({2, 3, 4});
  CHECK(t.sizes() == Shape{2, 3, 4});
  CHECK(t.strides() == Shape{12, 4, 1});
  CHECK(t.numel() == 24);
  CHECK(t.dim() == 3);
  CHECK(t.is_contiguous());
  CHECK(t.version() == 0);
  CHECK(t.size(-1) == 4);
  CHECK_THROWS_WITH(t.size(3), Catch::Contains("dimension out of range"));
}

TEST_CASE("view, transpose, permute, slice, select, expand, squeeze and unsqueeze share storage") {
  Tensor x = arange(12, dtype(kFloat32));
  Tensor v = x.view({3, 4});
  CHECK(v.is_alias_of(x));
  CHECK(v.strides() == Shape{4, 1});

  Tensor t = v.t();
  CHECK(t.sizes() == Shape{4, 3});
  CHECK(t.strides() == Shape{1, 4});
  CHECK_FALSE(t.is_contiguous());
  CHECK(vals(t.contiguous()) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});

  Tensor p = x.view({2, 3, 2}).permute({2, 0, 1});
  CHECK(p.sizes() == Shape{2, 2, 3});
  CHECK(p.strides() == Shape{1, 6, 2});

  Tensor s = v.slice(1, 1, 4, 2);  // columns 1 and 3
  CHECK(s.sizes() == Shape{3, 2});
  CHECK(s.strides() == Shape{4, 2});
  CHECK(s.storage_offset() == 1);
  CHECK(vals(s) == std::vector<float>{1, 3, 5, 7, 9, 11});

  Tensor r = v.select(0, -1);
  CHECK(vals(r) == std::vector<float>{8, 9, 10, 11});
  CHECK(v[1].sizes() == Shape{4});

  Tensor e = x.view({1, 12}).expand({3, 12});
  CHECK(e.strides() == Shape{0, 1});
  CHECK(e.is_alias_of(x));

  Tensor u = x.unsqueeze(0).unsqueeze(2);
  CHECK(u.sizes() == Shape{1, 12, 1});
  CHECK(u.squeeze().sizes() == Shape{12});
  CHECK(u.squeeze(0).sizes() == Shape{12, 1});
  CHECK(u.squeeze(1).sizes() == Shape{1, 12, 1});  // size 12 is not squeezed

  for (const Tensor& view : {v, t, p, s, r, e, u}) CHECK(view.is_alias_of(x));
}

TEST_CASE("a write through any view bumps the one shared version counter") {
  Tensor x = ops::zeros({3, 4});
  Tensor col = x.select(1, 2);
  Tensor row = x.t().select(1, 0);
  CHECK(col.version() == 0);
  col.fill_(5);
  CHECK(x.version() == 1);
  CHECK(row.version() == 1);
  row.zero_();
  CHECK(x.version() == 2);
  CHECK(col.version() == 2);
  CHECK(vals(x) == std::vector<float>{0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 5, 0});
  // A clone has its own storage and counter.
  Tensor c = x.clone();
  CHECK(c.version() == 0);
  c.fill_(1);
  CHECK(x.version() == 2);
}

TEST_CASE("detach shares storage and version counter but is a different tensor") {
  Tensor x = ops::ones({3});
  Tensor d = x.detach();
  CHECK_FALSE(d.is_same(x));
  CHECK(d.is_alias_of(x));
  d.fill_(2);
  CHECK(x.version() == 1);
  CHECK(vals(x) == std::vector<float>{2, 2, 2});
}

TEST_CASE("reshape views when it can and copies when it must") {
  Tensor x = arange(6, dtype(kFloat32)).view({2, 3});
  Tensor r = x.reshape({3, 2});
  CHECK(r.is_alias_of(x));
  Tensor rt = x.t().reshape({6});
  CHECK_FALSE(rt.is_alias_of(x));
  CHECK(vals(rt) == std::vector<float>{0, 3, 1, 4, 2, 5});
  CHECK(x.reshape({-1}).sizes() == Shape{6});
  CHECK(x.reshape({-1, 2}).sizes() == Shape{3, 2});
  // A view of a transposed tensor that keeps its contiguous chunks is allowed.
  Tensor y = ops::zeros({4, 2, 3}).transpose(0, 1);  // [2, 4, 3], strides [3, 6, 1]
  CHECK(y.view({2, 4, 3}).sizes() == Shape{2, 4, 3});
  CHECK(y.view({2, 4, 3, 1}).sizes() == Shape{2, 4, 3, 1});
  CHECK_THROWS_WITH(y.view({8, 3}), Catch::Contains("view: size [8, 3] is not compatible"));
  CHECK(x.flatten().sizes() == Shape{6});
  CHECK(ops::zeros({2, 3, 4}).flatten(1).sizes() == Shape{2, 12});
}

TEST_CASE("view and shape errors name the shapes") {
  Tensor x = ops::zeros({2, 3});
  CHECK_THROWS_WITH(x.view({4, 2}), Catch::Contains("shape [4, 2] is invalid for input of size 6"));
  CHECK_THROWS_WITH(x.view({-1, -1}), Catch::Contains("only one dimension can be inferred"));
  CHECK_THROWS_WITH(x.transpose(0, 2), Catch::Contains("dimension out of range (expected to be in range of [-2, 1], but got 2)"));
  CHECK_THROWS_WITH(x.select(0, 2), Catch::Contains("index 2 is out of bounds for dimension 0 with size 2"));
  CHECK_THROWS_WITH(x.expand({4, 3}), Catch::Contains("must match the existing size (2) at non-singleton dimension 0"));
  CHECK_THROWS_WITH(x.permute({0, 0}), Catch::Contains("repeated dim"));
  CHECK_THROWS_WITH(x.permute({0}), Catch::Contains("does not match the input's 2 dims"));
  CHECK_THROWS_WITH(x.narrow(1, 2, 2), Catch::Contains("exceeds dimension size (3)"));
  CHECK_THROWS_WITH(ops::zeros({2, 2, 2}).t(), Catch::Contains("t: expects a tensor with <= 2 dimensions"));
  CHECK_THROWS_WITH(ops::as_strided(x, {3, 3}, {3, 1}, 0), Catch::Contains("out of bounds for a storage of 6 elements"));
  Tensor u;
  CHECK_THROWS_WITH(u.sizes(), Catch::Contains("undefined tensor"));
}

TEST_CASE("slices clamp their bounds like Python") {
  Tensor x = arange(5, dtype(kFloat32));
  CHECK(vals(x.slice(0, -2, 100)) == std::vector<float>{3, 4});
  CHECK(x.slice(0, 4, 2).numel() == 0);
  CHECK(vals(x.slice(0, 0, 5, 3)) == std::vector<float>{0, 3});
  CHECK_THROWS_WITH(x.slice(0, 0, 5, 0), Catch::Contains("step must be positive"));
}

TEST_CASE("item and to_vector read values and check the element count") {
  Tensor x = tensor({1.5, 2.5});
  CHECK(x.to_vector<double>() == std::vector<double>{1.5, 2.5});
  CHECK(x.select(0, 1).item<float>() == 2.5f);
  CHECK_THROWS_WITH(x.item<float>(), Catch::Contains("a Tensor with 2 elements cannot be converted to Scalar"));
  CHECK_THROWS_WITH(x.data_ptr<double>(), Catch::Contains("expected dtype float64 but the tensor is float32"));
}

TEST_CASE("writing into an expanded view is an error, not a silent race") {
  Tensor x = ops::zeros({1, 3}).expand({4, 3});
  CHECK_THROWS_WITH(x.fill_(1), Catch::Contains("more than one element of the written-to tensor refers to a single memory location"));
  CHECK_THROWS_WITH(x.copy_(ops::ones({4, 3})), Catch::Contains("single memory location"));
  CHECK(x.version() == 0);
}
