#include <catch2/catch.hpp>

#include <sstream>

#include "graft.h"

using namespace graft;

TEST_CASE("type promotion follows PyTorch's lattice") {
  CHECK(promote_types(kInt64, kFloat32) == kFloat32);
  CHECK(promote_types(kFloat32, kFloat64) == kFloat64);
  CHECK(promote_types(kBool, kInt64) == kInt64);
  CHECK(promote_types(kBool, kBool) == kBool);
  CHECK(promote_types(kFloat64, kBool) == kFloat64);
  CHECK(arithmetic_dtype(kBool) == kInt64);
  CHECK(arithmetic_dtype(kFloat32) == kFloat32);
}

TEST_CASE("dtypes know their sizes and names") {
  CHECK(element_size(kFloat32) == 4);
  CHECK(element_size(kFloat64) == 8);
  CHECK(element_size(kInt64) == 8);
  CHECK(element_size(kBool) == 1);
  CHECK(std::string(dtype_name(kFloat32)) == "float32");
  CHECK(std::string(dtype_type_name(kFloat32)) == "Float");
  CHECK(std::string(dtype_type_name(kInt64)) == "Long");
  CHECK(is_floating(kFloat64));
  CHECK_FALSE(is_floating(kInt64));
}

TEST_CASE("devices parse and print like libtorch's") {
  CHECK(Device("cpu") == kCPU);
  CHECK(Device("cuda") == Device(DeviceType::CUDA, 0));
  CHECK(Device("cuda:1").index == 1);
  CHECK(Device("cuda:1").str() == "cuda:1");
  CHECK(kCPU.str() == "cpu");
  CHECK(Device("cuda:0") != Device("cuda:1"));
  std::ostringstream os;
  os << Device("cuda:2");
  CHECK(os.str() == "cuda:2");
  CHECK_THROWS_WITH(Device("tpu"), Catch::Contains("invalid device string 'tpu'"));
  CHECK_THROWS_WITH(Device("cuda:x"), Catch::Contains("invalid device string"));
  CHECK_THROWS_WITH(Device("cpu:1"), Catch::Contains("CPU device index must be 0"));
}

TEST_CASE("scalars remember whether they are integral") {
  CHECK(Scalar(1).is_integral());
  CHECK_FALSE(Scalar(1.0).is_integral());
  CHECK(Scalar(true).is_bool());
  CHECK(Scalar(2.5).to<int64_t>() == 2);
  CHECK(Scalar(3).dtype() == kInt64);
  CHECK(Scalar(3.0).dtype() == kFloat64);
}

TEST_CASE("shape helpers broadcast and wrap dims with clear errors") {
  CHECK(broadcast_shapes({3, 1}, {1, 4}, "op") == Shape{3, 4});
  CHECK(broadcast_shapes({}, {2, 3}, "op") == Shape{2, 3});
  CHECK(broadcast_shapes({5, 1, 3}, {4, 1}, "op") == Shape{5, 4, 3});
  CHECK_THROWS_WITH(broadcast_shapes({2, 3}, {4, 3}, "add"), Catch::Contains("add: shapes [2, 3] and [4, 3] cannot be broadcast"));
  CHECK(wrap_dim(-1, 3, "op") == 2);
  CHECK(wrap_dim(0, 0, "op") == 0);
  CHECK_THROWS_WITH(wrap_dim(3, 3, "sum"), Catch::Contains("sum: dimension out of range"));
  CHECK(contiguous_strides({2, 3, 4}) == Shape{12, 4, 1});
  CHECK(shape_str({}) == "[]");
}

TEST_CASE("cuda availability answers false cleanly without a GPU") {
  if (cuda_device_count() > 0) {
    CHECK(cuda_is_available());
  } else {
    CHECK_FALSE(cuda_is_available());
    CHECK(cuda_device_count() == 0);
  }
}
