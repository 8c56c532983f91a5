#include <catch2/catch.hpp>

#include "graft.h"

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
