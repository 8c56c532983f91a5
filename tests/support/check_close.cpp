#include "support/check_close.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>

namespace graft::test {

namespace {

// One Catch assertion at `where`, as FAIL_CHECK / SUCCEED would make it at that line.
void report(const std::source_location& where, bool ok, const std::string& message) {
  Catch::AssertionHandler handler("check_close", Catch::SourceLineInfo(where.file_name(), where.line()),
                                  Catch::StringRef(), Catch::ResultDisposition::ContinueOnFailure);
  handler.handleMessage(ok ? Catch::ResultWas::Ok : Catch::ResultWas::ExplicitFailure, message);
  handler.complete();
}

std::vector<double> read_values(const Tensor& t) { return t.cpu().to(kFloat64).contiguous().to_vector<double>(); }

// [i0, i1, ...] of the row-major element `flat` of `shape`.
std::string index_str(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(idx);
}

}  // namespace

Tolerance default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::Float64: return {.rtol = 1e-7, .atol = 1e-7};
    case DType::Float32: return {.rtol = 1.3e-6, .atol = 1e-5};
    // PyTorch's assert_close defaults: one rounding of each 16-bit format is within these.
    case DType::BFloat16: return {.rtol = 1.6e-2, .atol = 1e-5};
    case DType::Float16: return {.rtol = 1e-3, .atol = 1e-5};
    case DType::Int64:
    case DType::Int32:
    case DType::UInt8:
    case DType::Bool: return {.rtol = 0.0, .atol = 0.0};
  }
  return {.rtol = 0.0, .atol = 0.0};
}

std::string close_mismatch(const Tensor& actual, const Expected& expected, const Tolerance& tol) {
  if (!actual.defined() || (expected.is_tensor() && !expected.tensor().defined()))
    return std::string("check_close: ") + (actual.defined() ? "expected" : "actual") + " is an undefined tensor";
  const Tensor& et = expected.tensor();
  // A reference given as values is float64 in actual's shape.
  const DType edtype = expected.is_tensor() ? et.dtype() : kFloat64;
  std::ostringstream what;
  what << "actual: " << dtype_name(actual.dtype()) << ' ' << shape_str(actual.sizes()) << ", expected: ";
  if (expected.is_tensor()) what << dtype_name(edtype) << ' ' << shape_str(et.sizes());
  else what << expected.values().size() << " float64 values";

  if (expected.is_tensor() && et.sizes() != actual.sizes()) return "check_close: the shapes differ\n  " + what.str();
  if (!expected.is_tensor() && static_cast<int64_t>(expected.values().size()) != actual.numel())
    return "check_close: the numbers of elements differ\n  " + what.str();
  if (expected.is_tensor() && tol.check_dtype && edtype != actual.dtype())
    return "check_close: the dtypes differ (Tolerance::check_dtype = false compares the values anyway)\n  " +
           what.str();

  // The defaults of the less precise of the two dtypes.
  const Tolerance da = default_tolerance(actual.dtype()), de = default_tolerance(edtype);
  const double rtol = tol.rtol.value_or(std::max(*da.rtol, *de.rtol));
  const double atol = tol.atol.value_or(std::max(*da.atol, *de.atol));

  const std::vector<double> a = read_values(actual);
  const std::vector<double> e = expected.is_tensor() ? read_values(et) : expected.values();
  int64_t bad = 0, worst = -1;
  double worst_diff = -1;
  for (size_t i = 0; i < a.size(); ++i) {
    bool ok;
    double diff;
    if (std::isnan(a[i]) || std::isnan(e[i])) {
      ok = tol.equal_nan && std::isnan(a[i]) && std::isnan(e[i]);
      diff = std::numeric_limits<double>::infinity();
    } else if (std::isinf(a[i]) || std::isinf(e[i])) {
      ok = a[i] == e[i];
      diff = std::numeric_limits<double>::infinity();
    } else {
      diff = std::abs(a[i] - e[i]);
      ok = diff <= std::max(atol, rtol * std::abs(e[i]));
    }
    if (ok) continue;
    ++bad;
    if (diff > worst_diff) {
      worst_diff = diff;
      worst = static_cast<int64_t>(i);
    }
  }
  if (bad == 0) return "";
  const bool single = actual.dtype() != kFloat64 && edtype != kFloat64;
  const size_t w = static_cast<size_t>(worst);
  std::ostringstream msg;
  msg << "check_close: " << bad << " of " << a.size() << " elements differ by more than max(atol " << atol
      << ", rtol " << rtol << " * |expected|)" << (tol.equal_nan ? ", NaN equal to NaN" : "") << "\n  worst at "
      << index_str(actual.sizes(), worst) << " (element " << worst << "): ";
  const auto digits = msg.precision(single ? std::numeric_limits<float>::max_digits10
                                            : std::numeric_limits<double>::max_digits10);
  msg << "actual " << a[w] << ", expected " << e[w];
  msg.precision(digits);
  msg << ", |difference| " << std::abs(a[w] - e[w]) << ", allowed " << std::max(atol, rtol * std::abs(e[w])) << "\n  "
      << what.str();
  if (expected.is_tensor() && edtype != actual.dtype()) msg << " (dtype not compared)";
  return msg.str();
}

void check_close(const Tensor& actual, const Expected& expected, Tolerance tol, std::source_location where) {
  const std::string mismatch = close_mismatch(actual, expected, tol);
  report(where, mismatch.empty(), mismatch);
}

}  // namespace graft::test
