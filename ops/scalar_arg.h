#pragma once
// Host-side conversion of an op's non-tensor arguments to math::ScalarArg, the plain form both
// devices' elementwise functors are built from (ops/math/device_math.h).
#include <optional>
#include <type_traits>

#include "ops/math/device_math.h"
#include "runtime/scalar.h"

namespace graft::kernels {

inline math::ScalarArg scalar_arg(const Scalar& s) {
  return math::ScalarArg{s.to<double>(), s.to<int64_t>(), s.to<bool>(), true};
}
inline math::ScalarArg scalar_arg(const std::optional<Scalar>& s) {
  if (!s) return math::ScalarArg{0, 0, false, false};
  return scalar_arg(*s);
}
inline math::ScalarArg scalar_arg(double v) { return scalar_arg(Scalar(v)); }
inline math::ScalarArg scalar_arg(bool v) { return scalar_arg(Scalar(v)); }
inline math::ScalarArg scalar_arg(int64_t v) { return scalar_arg(Scalar(static_cast<long long>(v))); }
// An option enum (GeluApproximate, LossReduction) travels as its value.
template <class E>
  requires std::is_enum_v<E>
math::ScalarArg enum_arg(E e) {
  return math::ScalarArg{0, static_cast<int64_t>(e), false, true};
}

}  // namespace graft::kernels
