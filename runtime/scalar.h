#pragma once
// Scalar: a number passed to an op next to tensors (x + 1, x * 0.5). It remembers whether it was
// written as an integer, so int64 tensors stay int64 under integer scalars, as in libtorch.
#include <cstdint>
#include <ostream>

#include "runtime/dtype.h"

namespace graft {

class Scalar {
 public:
  Scalar() = default;
  Scalar(double v) : d_(v), i_(static_cast<int64_t>(v)), integral_(false) {}  // NOLINT
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
    else return integral_ ? static_cast<T>(i_) : static_cast<T>(d_);
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
