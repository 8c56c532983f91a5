// The float fallback behind every kernel without a native 16-bit path
// (ops/reduced_precision_fallback.h): one rounding per result, promotion kept, in-place writes
// back into the caller's tensor, a named dtype respected.
#include <catch2/catch.hpp>

#include <vector>

#include "graft.h"
#include "ops/kernel_utils.h"
#include "ops/reduced_precision_fallback.h"
#include "runtime/dispatcher.h"

using namespace graft;

namespace {

std::vector<float> as_floats(const Tensor& t) { return t.to(kFloat32).to_vector<float>(); }

// A float32/float64-only kernel, registered the way the generator registers one (behind the
// fallback), for what no declared op exercises today: a written argument and a dtype argument.
Tensor scale_f32(const Tensor& self, double s) {
  kernels::dispatch_floating(self.dtype(), "test_fallback_scale_", [&]<class T>() {
    T* p = self.data_ptr<T>();
    for (int64_t i = 0; i < self.numel(); ++i) p[i] = static_cast<T>(p[i] * s);
  });
  return self;
}
Tensor cast_f32(const Tensor& self, DType dtype) {
  Tensor f = self.to(kFloat32);  // the fallback hands float32 here
  REQUIRE(self.dtype() == kFloat32);
  return f.to(dtype);
}
OpResult scale_kernel(Stack& s) {
  GRAFT_OP_HANDLE(op, "test_fallback_scale_");
  return kernels::reduced_precision_fallback(op, s, &boxed<&scale_f32>);
}
OpResult cast_kernel(Stack& s) {
  GRAFT_OP_HANDLE(op, "test_fallback_cast");
  return kernels::reduced_precision_fallback(op, s, &boxed<&cast_f32>);
}
GRAFT_DEFINE_OP("test_fallback_scale_(Tensor(a!) self, float s) -> Tensor(a!)");
GRAFT_DEFINE_OP("test_fallback_cast(Tensor self, ScalarType dtype) -> Tensor");
KernelRegistrar scale_registrar("test_fallback_scale_", DeviceType::CPU, &scale_kernel);
KernelRegistrar cast_registrar("test_fallback_cast", DeviceType::CPU, &cast_kernel);

}  // namespace

TEST_CASE("a kernel without a 16-bit path computes in float32 and rounds each result once") {
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO(dt);
    manual_seed(5);
    Tensor x = randn({2, 3, 6, 6}).to(dt);
    Tensor y = avg_pool2d(x, {3, 3});  // a sum of nine and a division: rounding each would differ
    CHECK(y.dtype() == dt);
    CHECK(as_floats(y) == as_floats(avg_pool2d(x.to(kFloat32), {3, 3}).to(dt)));
    Tensor idx = randint(0, 6, {2, 3, 6, 6});
    Tensor z = scatter_add(x, 3, idx, x);
    CHECK(z.dtype() == dt);
    CHECK(as_floats(z) == as_floats(scatter_add(x.to(kFloat32), 3, idx, x.to(kFloat32)).to(dt)));
  }
}

TEST_CASE("a 16-bit tensor next to a float32 one gives the promoted float32 result, as PyTorch") {
  Tensor a = randn({2, 3}).to(kBFloat16), b = randn({1, 3});
  Tensor c = cat({a, b});
  CHECK(c.dtype() == kFloat32);
  CHECK(as_floats(c) == as_floats(cat({a.to(kFloat32), b})));
  CHECK(cat({a, a}).dtype() == kBFloat16);
}

TEST_CASE("an in-place op behind the fallback writes back into self and returns it") {
  GRAFT_OP_HANDLE(op, "test_fallback_scale_");
  Tensor x = tensor({1.0, 3.0, -0.1}, dtype(kBFloat16));
  const std::vector<float> before = as_floats(x);
  const int64_t v0 = x.version();
  OpResult r = call_op(op, x, 1.0 / 3);
  REQUIRE(r.size() == 1);
  CHECK(r[0].is_same(x));
  CHECK(x.dtype() == kBFloat16);
  CHECK(x.version() == v0 + 1);
  std::vector<float> want;
  for (float v : before) want.push_back(static_cast<float>(BFloat16(static_cast<float>(v * (1.0 / 3)))));
  CHECK(as_floats(x) == want);
}

TEST_CASE("a dtype argument names the result's dtype, which the fallback does not round") {
  GRAFT_OP_HANDLE(op, "test_fallback_cast");
  Tensor x = tensor({1.0 / 3, 2.5}, dtype(kBFloat16));
  OpResult r = call_op(op, x, kFloat32);
  REQUIRE(r.size() == 1);
  CHECK(r[0].dtype() == kFloat32);
  CHECK(as_floats(r[0]) == as_floats(x));
}
