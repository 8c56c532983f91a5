#pragma once
// Scalar: a number passed to an op next to tensors (x + 1, x * 0.5). It remembers whether it was
// written as an integer, so int64 tensors stay int64 under integer scalars, as in libtorch.
#include <cstdint>
#include <limits>
#include <ostream>
#include <type_traits>

#include "runtime/dtype.h"

namespace graft {

// A floating value as a signed integer the way x86's truncating conversion gives it (and so
// PyTorch): toward zero; NaN, infinities and values out of range give the type's minimum. Spelled
// out because the C++ cast is undefined there, and the compiler may fold it to anything.
template <class I>
constexpr I float_to_int(double v) {
  constexpr double lo = -static_cast<double>(uint64_t{1} << (8 * sizeof(I) - 1));
  if (!(v > lo - 1.0 && v < -lo)) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}
// A floating value as an integer type T, as PyTorch's casts: uint8 goes through int64 and wraps
// (-1.0 -> 255, 300.5 -> 44), the signed types truncate (float_to_int), bool is "nonzero".
template <class T>
constexpr T float_to_integral(double v) {
  if constexpr (std::is_same_v<T, bool>) return v != 0;
  else if constexpr (std::is_unsigned_v<T>) return static_cast<T>(float_to_int<int64_t>(v));
  else return float_to_int<T>(v);
}

class Scalar {
 public:
  Scalar() = default;
  Scalar(double v) : d_(v), i_(float_to_int<int64_t>(v)), integral_(false) {}  // NOLINT
  Scalar(float v) : Scalar(static_cast<double>(v)) {}                          // NOLINT
  Scalar(int v) : d_(v), i_(v), integral_(true) {}                             // NOLINT
  Scalar(long v) : d_(static_cast<double>(v)), i_(v), integral_(true) {}       // NOLINT
  Scalar(long long v) : d_(static_cast<double>(v)), i_(v), integral_(true) {}  // NOLINT
  Scalar(bool v) : d_(v), i_(v), integral_(true), boolean_(true) {}            // NOLINT

  double to_double() const { return d_; }
  int64_t to_int() const { return i_; }
  bool is_integral() const { return integral_; }
  bool is_bool() const { return boolean_; }
  // The dtype this scalar takes part in promotion as ("weak": it never widens a tensor's kind
  // within the same category).
  DType dtype() const { return boolean_ ? DType::Bool : integral_ ? DType::Int64 : DType::Float64; }
  template <class T> T to() const {
    if constexpr (std::is_floating_point_v<T>) return static_cast<T>(d_);
    else if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) return T(static_cast<float>(d_));
    else if constexpr (std::is_same_v<T, bool>) return d_ != 0;
    else return integral_ ? static_cast<T>(i_) : float_to_integral<T>(d_);
  }

 private:
  double d_ = 0;
  int64_t i_ = 0;
  bool integral_ = false;
  bool boolean_ = false;
};

inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to_int() ? "True" : "False");
  if (s.is_integral()) return os << s.to_int();
  return os << s.to_double();
}

}  // namespace graft
