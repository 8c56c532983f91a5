// Type promotion against PyTorch 2.15's torch.result_type (tests/runtime/data/promotion.json, made
// by make_dtype_fixtures.py): promote_types, and the dtype the elementwise ops actually return for
// tensor-tensor, tensor-Scalar and 1-d tensor with 0-dim tensor operands.
#include <catch2/catch.hpp>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "graft.h"
#include "ops/tensor_iterator.h"
#include "support/fixtures.h"

using namespace graft;

namespace {

const nlohmann::json& table() {
  static const nlohmann::json j =
      nlohmann::json::parse(test::read_file(test::tests_path("runtime/data/promotion.json")));
  return j;
}

DType dtype_named(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == dtype_name(static_cast<DType>(i))) return static_cast<DType>(i);
  FAIL("promotion.json names an unknown dtype '" << name << "'");
  return kFloat32;
}

// The fixture's dtypes, every graft dtype among them.
std::vector<std::string> dtype_names() {
  auto names = table().at("dtypes").get<std::vector<std::string>>();
  REQUIRE(names.size() == static_cast<size_t>(kNumDTypes));
  return names;
}

Scalar scalar_named(const std::string& s) {
  if (s == "True") return Scalar(true);
  if (s == "2") return Scalar(2);
  if (s == "2.5") return Scalar(2.5);
  FAIL("promotion.json names an unknown scalar '" << s << "'");
  return {};
}

}  // namespace

TEST_CASE("promote_types equals PyTorch's table for every pair of dtypes") {
  const auto& tt = table().at("tensor_tensor");
  for (const auto& a : dtype_names())
    for (const auto& b : dtype_names()) {
      INFO(a << " with " << b);
      CHECK(dtype_name(promote_types(dtype_named(a), dtype_named(b))) == tt.at(a).at(b).get<std::string>());
    }
}

TEST_CASE("add, mul, maximum and eq on two 1-d tensors compute in PyTorch's result type") {
  const auto& tt = table().at("tensor_tensor");
  for (const auto& a : dtype_names())
    for (const auto& b : dtype_names()) {
      INFO(a << " with " << b);
      const DType want = dtype_named(tt.at(a).at(b).get<std::string>());
      Tensor x = ops::ones({3}, dtype_named(a)), y = ops::full({3}, 2, dtype_named(b));
      Tensor sum = ops::add(x, y), prod = ops::mul(x, y);
      CHECK(sum.dtype() == want);
      CHECK(prod.dtype() == want);
      CHECK(ops::maximum(x, y).dtype() == want);
      CHECK(ops::eq(x, y).dtype() == kBool);
      // The values, in the result type: y is 2 (true for bool); bool + bool is logical or.
      const double yv = dtype_named(b) == kBool ? 1 : 2;
      CHECK(sum.to(kFloat64).to_vector<double>() == std::vector<double>(3, want == kBool ? 1 : 1 + yv));
      CHECK(prod.to(kFloat64).to_vector<double>() == std::vector<double>(3, yv));
    }
}

TEST_CASE("add and mul with a Scalar compute in PyTorch's result type") {
  const auto& ts = table().at("tensor_scalar");
  for (const auto& a : dtype_names())
    for (const auto& [s, want_name] : ts.at(a).items()) {
      INFO(a << " with scalar " << s);
      const DType want = dtype_named(want_name.get<std::string>());
      Tensor x = ops::ones({3}, dtype_named(a));
      CHECK(kernels::result_type(dtype_named(a), scalar_named(s)) == want);
      CHECK(ops::add(x, scalar_named(s)).dtype() == want);
      CHECK(ops::mul(x, scalar_named(s)).dtype() == want);
    }
}

TEST_CASE("a 0-dim tensor next to a 1-d one takes part with lower priority, as PyTorch's result_type") {
  const auto& zd = table().at("zerodim");
  for (const auto& a : dtype_names())
    for (const auto& b : dtype_names()) {
      INFO("1-d " << a << " with 0-dim " << b);
      const DType want = dtype_named(zd.at(a).at(b).get<std::string>());
      Tensor x = ops::ones({3}, dtype_named(a)), z = ops::ones({}, dtype_named(b));
      CHECK(kernels::result_type(x, z) == want);
      CHECK(kernels::result_type(z, x) == want);
      CHECK(ops::add(x, z).dtype() == want);
      CHECK(ops::mul(z, x).dtype() == want);
      CHECK(ops::where(ops::ones({3}, kBool), x, z).dtype() == want);
      // Two 0-dim tensors are equal partners again.
      CHECK(ops::add(ops::ones({}, dtype_named(a)), z).dtype() == promote_types(dtype_named(a), dtype_named(b)));
    }
}

TEST_CASE("three operands: 0-dim tensors count below the ones with dims") {
  Tensor u8 = ops::ones({2}, kUInt8), i64_0d = ops::ones({}, kInt64), f64_0d = ops::ones({}, kFloat64);
  CHECK(kernels::result_type(u8, i64_0d, ops::ones({}, kInt32)) == kUInt8);
  CHECK(kernels::result_type(u8, i64_0d, f64_0d) == kFloat64);
  CHECK(kernels::result_type(ops::ones({2}, kBFloat16), f64_0d, i64_0d) == kBFloat16);
  CHECK(kernels::result_type(ops::ones({}, kInt32), i64_0d, ops::ones({}, kUInt8)) == kInt64);
  // addcmul_: self float32 [2] with 0-dim float64 factors computes in float32 (no cast error).
  Tensor self = ops::ones({2});
  CHECK(ops::addcmul_(self, f64_0d, ops::full({}, 2.0, kFloat64)).to_vector<float>() == std::vector<float>{3, 3});
}

TEST_CASE("in-place ops check the promoted type against self's") {
  Tensor u8 = ops::ones({3}, kUInt8);
  // A 0-dim int64 does not widen uint8; a 0-dim float does, and cannot be written into uint8.
  CHECK(ops::add_(u8, ops::full({}, 2, kInt64)).dtype() == kUInt8);
  CHECK(u8.to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{3, 3, 3});
  CHECK_THROWS_WITH(ops::add_(u8, ops::ones({}, kFloat32)),
                    Catch::Contains("result type Float can't be cast to the desired output type Byte"));
  Tensor bf = ops::ones({3}, kBFloat16);
  CHECK(ops::mul_(bf, ops::full({}, 3.0, kFloat64)).dtype() == kBFloat16);
  CHECK(bf.to(kFloat32).to_vector<float>() == std::vector<float>{3, 3, 3});
}
