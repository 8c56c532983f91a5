// The shared TensorIterator (ops/tensor_iterator.h): the one plan CPU and CUDA elementwise kernels
// are built on. These pin its geometry and its safety copies directly, on CPU memory: negative
// strides (an input reaching below its data pointer into the output), zero-size dims,
// broadcasting (stride-0 operands, coalescing), overlap, and fills with no inputs.
#include <catch2/catch.hpp>

#include <vector>

#include "graft.h"
#include "ops/tensor_iterator.h"

using namespace graft;
using graft::kernels::TensorIterator;
using Catch::Contains;

namespace {

Tensor iota(int64_t n) {
  Tensor t = graft::empty({n}, graft::dtype(kFloat32));
  auto* p = static_cast<float*>(t.data_ptr());
  for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(i);
  return t;
}

// A view of t's storage with any strides, negative ones included (no public op makes those), built
// without the dispatcher like the kernels' own views.
Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), t.dtype(), sizes, strides, offset));
}

std::vector<float> values(const Tensor& t) {
  const auto* p = static_cast<const float*>(t.data_ptr());
  return std::vector<float>(p, p + t.numel());
}

// out = in, elementwise, through the iterator alone.
void copy_through(const Tensor& out, const Tensor& in) {
  TensorIterator it("copy_");
  it.add_output(out).add_input(in).build();
  it.for_each(kernels::elementwise_loop<float, float>([](float x) { return x; }));
}

}  // namespace

TEST_CASE("TensorIterator: an input with a negative stride reaching into the output is copied first") {
  // s = [0 1 2 3 4 5]; out is s[0:3]; in is s[3], s[2], s[1] (data pointer at 3, stride -1). Their
  // byte ranges intersect only below in's data pointer: a range check that ignores the sign of the
  // stride sees them as disjoint and, writing out[1] before reading in[2] = s[1], gets [3, 2, 2].
  Tensor s = iota(6);
  Tensor out = raw_view(s, {3}, {1}, 0);
  Tensor in = raw_view(s, {3}, {-1}, 3);
  CHECK(kernels::ranges_overlap(out, in));
  CHECK(kernels::ranges_overlap(in, out));
  copy_through(out, in);
  CHECK(values(s) == std::vector<float>{3, 2, 1, 3, 4, 5});
}

TEST_CASE("TensorIterator: negative-stride ranges that really are disjoint stay in place") {
  Tensor s = iota(8);
  Tensor out = raw_view(s, {3}, {1}, 0);        // s[0..2]
  Tensor in = raw_view(s, {3}, {-1}, 7);        // s[7], s[6], s[5]
  CHECK_FALSE(kernels::ranges_overlap(out, in));
  copy_through(out, in);
  CHECK(values(s) == std::vector<float>{7, 6, 5, 3, 4, 5, 6, 7});
  // A reversed 2-d view (both strides negative) read into a fresh output.
  Tensor m = iota(6);
  Tensor rev = raw_view(m, {2, 3}, {-3, -1}, 5);
  TensorIterator it("neg");
  it.add_input(rev).build(kFloat32);
  it.for_each(kernels::elementwise_loop<float, float>([](float x) { return -x; }));
  CHECK(values(it.output()) == std::vector<float>{-5, -4, -3, -2, -1, -0});
}

TEST_CASE("TensorIterator: zero-size dims give an empty output and never call the loop") {
  Tensor a = graft::zeros({2, 0, 3});
  Tensor b = graft::ones({3});
  TensorIterator it("add");
  it.add_input(a).add_input(b).build(kFloat32);
  CHECK(it.output().sizes() == Shape{2, 0, 3});
  CHECK(it.numel() == 0);
  int calls = 0;
  it.for_each([&](char**, const int64_t*, int64_t) { ++calls; });
  CHECK(calls == 0);
  // Broadcasting a size-0 dim against a size-1 dim keeps 0; against 2 it is an error.
  TensorIterator bad("add");
  bad.add_input(graft::zeros({0})).add_input(graft::zeros({2}));
  CHECK_THROWS_WITH(bad.build(kFloat32), Contains("add: shapes [0] and [2] cannot be broadcast"));
}

TEST_CASE("TensorIterator: broadcasting gives stride-0 operands and coalesces what it can") {
  Tensor a = graft::ones({2, 1, 3});
  Tensor b = graft::ones({4, 1});
  TensorIterator it("mul");
  it.add_input(a).add_input(b).build(kFloat32);
  CHECK(it.output().sizes() == Shape{2, 4, 3});
  REQUIRE(it.ndim() == 3);  // nothing merges: a and b broadcast along different dims
  // Innermost first: dim 0 is the size-3 dim, where b is broadcast.
  CHECK(it.shape(0) == 3);
  CHECK(it.stride(0, 0) == 4);
  CHECK(it.stride(0, 1) == 4);
  CHECK(it.stride(0, 2) == 0);
  CHECK(it.shape(1) == 4);
  CHECK(it.stride(1, 1) == 0);
  CHECK(it.stride(1, 2) == 4);
  // Same shapes, contiguous: one flat dim.
  TensorIterator flat("add");
  flat.add_input(graft::ones({2, 3, 4})).add_input(graft::ones({2, 3, 4})).build(kFloat32);
  CHECK(flat.ndim() == 1);
  CHECK(flat.shape(0) == 24);
  // A scalar-like [1] operand against [2, 3]: the two result dims merge into one.
  TensorIterator merged("add");
  merged.add_input(graft::ones({2, 3})).add_input(graft::ones({1})).build(kFloat32);
  CHECK(merged.ndim() == 1);
  CHECK(merged.shape(0) == 6);
  CHECK(merged.stride(0, 2) == 0);
}

TEST_CASE("TensorIterator: overlap rules for in-place outputs") {
  // Exactly the output: read in place.
  Tensor x = iota(4);
  TensorIterator same("add_");
  same.add_output(x).add_input(x).add_input(x).build();
  CHECK(same.input(0).data_ptr() == x.data_ptr());
  same.for_each(kernels::elementwise_loop<float, float, float>([](float p, float q) { return p + q; }));
  CHECK(values(x) == std::vector<float>{0, 2, 4, 6});
  // A shifted window of the output: copied first, so x[1:] = x[:3] + 0 shifts correctly.
  Tensor y = iota(4);
  Tensor tail = raw_view(y, {3}, {1}, 1), head = raw_view(y, {3}, {1}, 0);
  copy_through(tail, head);
  CHECK(values(y) == std::vector<float>{0, 0, 1, 2});
  // The transpose of the output: copied first.
  Tensor m = iota(4);
  Tensor sq = raw_view(m, {2, 2}, {2, 1}, 0), tr = raw_view(m, {2, 2}, {1, 2}, 0);
  copy_through(sq, tr);
  CHECK(values(m) == std::vector<float>{0, 2, 1, 3});
  // An expanded output is rejected before anything is written.
  Tensor e = raw_view(iota(3), {2, 3}, {0, 1}, 0);
  TensorIterator bad("add_");
  bad.add_output(e).add_input(graft::ones({2, 3}));
  CHECK_THROWS_WITH(bad.build(), Contains("more than one element of the written-to tensor refers to a single memory location"));
}

TEST_CASE("TensorIterator: a fill has no inputs and walks a permuted output in memory order") {
  Tensor m = graft::zeros({3, 2});
  Tensor t = m.t();  // [2, 3] with strides [1, 2]
  TensorIterator it("fill_");
  it.add_output(t).build();
  CHECK(it.noperands() == 1);
  REQUIRE(it.ndim() == 1);  // transposed back to memory order, then merged
  CHECK(it.shape(0) == 6);
  CHECK(it.stride(0, 0) == 4);
  it.for_each([](char** d, const int64_t* s, int64_t n) {
    for (int64_t i = 0; i < n; ++i) *reinterpret_cast<float*>(d[0] + i * s[0]) = 7.f;
  });
  CHECK(values(m) == std::vector<float>(6, 7.f));
  // An allocating build without inputs is a caller error.
  TensorIterator none("full");
  CHECK_THROWS_WITH(none.build(kFloat32), Contains("needs at least one input"));
}

TEST_CASE("TensorIterator: dtype conversion makes a contiguous copy on the operand's device") {
  Tensor i = graft::tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}, graft::dtype(kInt64)).t();
  TensorIterator it("mul");
  it.add_input(i, kFloat32).add_input(graft::full({3, 2}, 0.5), kFloat32).build(kFloat32);
  CHECK(it.input(0).dtype() == kFloat32);
  CHECK(it.input(0).is_contiguous());
  it.for_each(kernels::elementwise_loop<float, float, float>([](float a, float b) { return a * b; }));
  CHECK(values(it.output()) == std::vector<float>{0.5f, 2.f, 1.f, 2.5f, 1.5f, 3.f});
}
