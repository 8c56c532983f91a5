#include <catch2/catch.hpp>

#include "graft.h"
#include "ops/ops.h"

using namespace graft;

TEST_CASE("zeros, ones and full fill every element with the requested dtype") {
  CHECK(zeros({2, 2}).to_vector<float>() == std::vector<float>(4, 0));
  CHECK(ones({3}, dtype(kInt64)).to_vector<int64_t>() == std::vector<int64_t>{1, 1, 1});
  Tensor f = full({2}, 2.5, dtype(kFloat64));
  CHECK(f.dtype() == kFloat64);
  CHECK(f.to_vector<double>() == std::vector<double>{2.5, 2.5});
  CHECK(full({2}, true, dtype(kBool)).to_vector<bool>() == std::vector<bool>{true, true});
  CHECK(zeros({}).dim() == 0);
  CHECK(zeros({}).numel() == 1);
  CHECK(zeros({0, 5}).numel() == 0);
}

TEST_CASE("arange picks int64 for integer bounds and float32 otherwise, like torch.arange") {
  Tensor a = arange(5);
  CHECK(a.dtype() == kInt64);
  CHECK(a.to_vector<int64_t>() == std::vector<int64_t>{0, 1, 2, 3, 4});
  Tensor b = arange(0, 1, 0.25);
  CHECK(b.dtype() == kFloat32);
  CHECK(b.to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
  CHECK(arange(5, 0, -2).to_vector<int64_t>() == std::vector<int64_t>{5, 3, 1});
  CHECK(arange(3, dtype(kFloat64)).dtype() == kFloat64);
  CHECK_THROWS_WITH(arange(0, 5, 0), Catch::Contains("step must be nonzero"));
  CHECK_THROWS_WITH(arange(5, 0, 1), Catch::Contains("inconsistent with step sign"));
}

TEST_CASE("tensor() builds tensors from values and checks their count") {
  Tensor t = tensor({1, 2, 3});
  CHECK(t.dtype() == kFloat32);
  CHECK(t.sizes() == Shape{3});
  Tensor d = tensor(std::vector<double>{1, 2, 3, 4}, {2, 2});
  CHECK(d.dtype() == kFloat64);
  CHECK(d.sizes() == Shape{2, 2});
  Tensor i = tensor(std::vector<int64_t>{4, 5}, {2});
  CHECK(i.dtype() == kInt64);
  CHECK(tensor({1.5, 2}, dtype(kInt64)).to_vector<int64_t>() == std::vector<int64_t>{1, 2});
  CHECK_THROWS_WITH(tensor(std::vector<float>{1, 2, 3}, {2, 2}), Catch::Contains("3 values do not fill shape [2, 2]"));
  CHECK_THROWS_WITH(zeros({2, -1}), Catch::Contains("negative dimension"));
}

TEST_CASE("the *_like factories copy shape, dtype and device") {
  Tensor x = ones({2, 3}, dtype(kFloat64));
  Tensor z = zeros_like(x);
  CHECK(z.sizes() == x.sizes());
  CHECK(z.dtype() == kFloat64);
  CHECK(ones_like(x, dtype(kInt64)).dtype() == kInt64);
  CHECK(full_like(x, 3).to_vector<double>() == std::vector<double>(6, 3));
  CHECK(empty_like(x).sizes() == Shape{2, 3});
  CHECK(randn_like(x).dtype() == kFloat64);
}

TEST_CASE("factories leave the version counter at zero") {
  CHECK(zeros({3}).version() == 0);
  CHECK(randn({3}).version() == 0);
  CHECK(randint(0, 3, {3}).version() == 0);
  CHECK(tensor({1, 2}).version() == 0);
  CHECK(arange(4).version() == 0);
}

TEST_CASE("options remember whether a device was given, so *_like keeps the source's device otherwise") {
  CHECK_FALSE(TensorOptions{}.dtype(kInt64).has_device());
  CHECK(TensorOptions{}.device(kCPU).has_device());
  CHECK(dtype(kInt64).device(Device("cuda:0")).has_device());
  Tensor x = ones({2}, dtype(kFloat64));
  Tensor z = zeros_like(x, dtype(kInt64));
  CHECK(z.device() == x.device());
  CHECK(z.dtype() == kInt64);
}

TEST_CASE("the *_like factories preserve the source's layout, as PyTorch's preserve_format") {
  // Strides and versions from torch 2.15: zeros_like/randn_like/full_like of a channels-last
  // [2, 3, 4, 5] give (60, 1, 15, 3); of a transposed [4, 3] matrix (1, 4); of x[:, ::2] (a
  // non-dense slice) contiguous; of a channels-last tensor sliced in W (non-dense) channels-last
  // (36, 1, 9, 3); of an expanded tensor contiguous; every one at version 0. The rest below too.
  Tensor x = randn({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  for (const Tensor& r : {zeros_like(x), ones_like(x), full_like(x, 2), empty_like(x), randn_like(x), rand_like(x),
                          zeros_like(x, dtype(kBFloat16)), randn_like(x, dtype(kFloat64))}) {
    CHECK(r.sizes() == x.sizes());
    CHECK(r.strides() == Shape{60, 1, 15, 3});
    CHECK(r.version() == 0);
  }
  CHECK(zeros_like(x).sum().item<float>() == 0);
  CHECK(full_like(x, 2).sum().item<float>() == 240);
  Tensor u = rand_like(x);
  CHECK(u.min().item<float>() >= 0);
  CHECK(u.max().item<float>() < 1);
  CHECK(randn_like(x).std().item<float>() == Approx(1).margin(0.3));
  // A leaf that requires grad, when asked.
  Tensor g = zeros_like(x, requires_grad());
  CHECK(g.requires_grad());
  CHECK(g.is_leaf());
  CHECK(g.strides() == Shape{60, 1, 15, 3});

  CHECK(empty_like(randn({3, 4}).t()).strides() == Shape{1, 4});
  CHECK(ones_like(randn({3, 8}).slice(1, 0, 8, 2)).strides() == Shape{4, 1});
  Tensor sliced = x.slice(3, 0, 5, 2);
  CHECK(sliced.strides() == Shape{60, 1, 15, 6});
  CHECK(zeros_like(sliced).strides() == Shape{36, 1, 9, 3});
  CHECK(zeros_like(randn({4, 1}).expand({4, 3})).strides() == Shape{3, 1});
  CHECK(zeros_like(randn({2, 3})).strides() == Shape{3, 1});
  // Dense: the strides exactly, size-1 dims' included; strided: the same order of dims, a 0-stride
  // dim kept in place.
  CHECK(zeros_like(ops::as_strided(randn({6}), {2, 3, 1, 1}, {3, 1, 3, 3}, 0)).strides() == Shape{3, 1, 3, 3});
  Tensor y = randn({2, 3, 4}).permute({2, 0, 1}).slice(2, 0, 3, 2);
  CHECK(y.strides() == Shape{1, 12, 8});
  CHECK(zeros_like(y).strides() == Shape{1, 8, 4});
  Tensor z = randn({5, 1}).expand({5, 4}).t();
  CHECK(z.strides() == Shape{0, 1});
  CHECK(zeros_like(z).strides() == Shape{5, 1});
}
