#pragma once
// The one comparison of tensor values in the tests. Every file used to carry its own, with its own
// default tolerance, NaN rule and failure message; one function keeps the rule the same everywhere
// and says on failure where and by how much, at the caller's line.
#include <initializer_list>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

#include "graft.h"

namespace graft::test {

// How close is close: |actual - expected| <= max(atol, rtol * |expected|) element by element. The
// larger of the two bounds, not their sum (torch.testing's), is Catch's Approx rule, which most of
// the tests used before; the sum is at most twice as loose. Unset rtol/atol: the defaults of the
// dtypes compared (default_tolerance). Infinities must match exactly; NaN matches NaN only with
// equal_nan.
struct Tolerance {
  std::optional<double> rtol = std::nullopt, atol = std::nullopt;
  bool equal_nan = false;
  // False for a reference computed in another dtype (a float64 reference for a float32 result):
  // the values are compared in float64 and the defaults are those of the less precise dtype.
  bool check_dtype = true;

  // rtol = atol = t: within t absolutely, or relatively for values above 1.
  static Tolerance within(double t) { return {.rtol = t, .atol = t}; }
  static Tolerance exact() { return within(0); }
};

// torch.testing.assert_close's defaults: float64 rtol 1e-7 atol 1e-7, float32 rtol 1.3e-6 atol
// 1e-5 (float16 rtol 1e-3, bfloat16 rtol 1.6e-2, both atol 1e-5, when graft has those dtypes);
// integers and bool exact.
Tolerance default_tolerance(DType dtype);

// What actual is compared with: a tensor (shape and, unless told otherwise, dtype must match), or
// values read in row-major order against actual's shape (a reference computed in double: only the
// number of elements must match and the dtype is not compared).
class Expected {
 public:
  Expected(const Tensor& tensor) : is_tensor_(true), tensor_(tensor) {}  // NOLINT: implicit on purpose
  Expected(std::vector<double> values) : values_(std::move(values)) {}   // NOLINT
  Expected(std::initializer_list<double> values) : values_(values) {}    // NOLINT
  bool is_tensor() const { return is_tensor_; }
  const Tensor& tensor() const { return tensor_; }
  const std::vector<double>& values() const { return values_; }

 private:
  bool is_tensor_ = false;
  Tensor tensor_;
  std::vector<double> values_;
};

// One Catch assertion, reported at the caller's line: on failure it names the shapes, dtypes, how
// many elements differ and the worst one (its index, both values, the difference and the bound).
// Tensors on any device are read on the CPU; strides and memory format do not matter.
void check_close(const Tensor& actual, const Expected& expected, Tolerance tol = {},
                 std::source_location where = std::source_location::current());

// What check_close reports on failure, or "" when actual is close: for the harness's own tests.
std::string close_mismatch(const Tensor& actual, const Expected& expected, const Tolerance& tol = {});

}  // namespace graft::test
