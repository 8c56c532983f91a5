// Checks and type promotion shared by the CPU and CUDA binary/ternary kernels (binary_plan.h).
#include "ops/binary_plan.h"

#include <string>

namespace graft::kernels {

namespace {

void check_alpha(const char* op, DType r, Scalar alpha) {
  GRAFT_CHECK(!alpha.is_bool() || r == kBool, op, ": boolean alpha only supported for boolean results (result ", r,
              ", alpha ", alpha, ")");
  GRAFT_CHECK(is_floating(r) || alpha.is_integral(), op,
              ": for integral input tensors, argument alpha must not be a floating point number (result ", r,
              ", alpha ", alpha, ")");
}

void check_sub(const char* op, const Tensor& a, bool other_is_bool, const std::string& other) {
  GRAFT_CHECK(!(a.dtype() == kBool && other_is_bool), op,
              ": subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
              "`logical_xor()` operator instead (got ",
              describe(a), " and ", other, ")");
  GRAFT_CHECK(a.dtype() != kBool && !other_is_bool, op,
              ": subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to invert a "
              "mask, use the `~` or `logical_not()` operator instead (got ",
              describe(a), " and ", other, ")");
}

void check_defined2(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
}

DType addc_dtype(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  check_defined(self, op, "self");
  check_defined(a, op, "tensor1");
  check_defined(b, op, "tensor2");
  DType r = result_type(self, a, b);
  GRAFT_CHECK(r != kBool, op, ": not implemented for bool tensors (got ", describe(self), ", ", describe(a), " and ",
              describe(b), ")");
  GRAFT_CHECK(is_floating(r) || value.is_integral(), op,
              ": for integral input tensors, argument value must not be a floating point number (value ", value,
              ", result ", r, ")");
  return r;
}

}  // namespace

DType add_dtype(const char* op, const Tensor& a, const Tensor& b, Scalar alpha) {
  check_defined2(a, b, op);
  DType r = result_type(a, b);
  check_alpha(op, r, alpha);
  return r;
}

DType sub_dtype(const char* op, const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_dtype(op, a, b, alpha);
  check_sub(op, a, b.dtype() == kBool, describe(b));
  return r;
}

DType promote_dtype(const char* op, const Tensor& a, const Tensor& b) {
  check_defined2(a, b, op);
  return result_type(a, b);
}

DType div_dtype(const char* op, const Tensor& a, const Tensor& b) { return floating_result(promote_dtype(op, a, b)); }

DType scalar_dtype(const char* op, const Tensor& a, Scalar b) {
  check_defined(a, op, "self");
  return result_type(a.dtype(), b);
}

DType sub_scalar_dtype(const char* op, const Tensor& a, Scalar b) {
  check_defined(a, op, "self");
  check_sub(op, a, b.is_bool(), detail::str_cat("scalar ", b));
  return result_type(a.dtype(), b);
}

DType div_scalar_dtype(const char* op, const Tensor& a, Scalar b) { return floating_result(scalar_dtype(op, a, b)); }

DType pow_dtype(const char* op, const Tensor& a, const Tensor& b) {
  DType r = promote_dtype(op, a, b);
  GRAFT_CHECK(r != kBool, op, ": not implemented for bool tensors (got ", describe(a), " and ", describe(b), ")");
  return r;
}

DType compare_dtype(const char* op, const Tensor& a, const Tensor& b) { return promote_dtype(op, a, b); }

DType compare_scalar_dtype(const char* op, const Tensor& a, Scalar b) { return scalar_dtype(op, a, b); }

DType where_dtype(const char* op, const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_defined(cond, op, "condition");
  check_defined2(a, b, op);
  GRAFT_CHECK(cond.dtype() == kBool, op, ": expected condition to be a boolean tensor, but got ", describe(cond));
  return result_type(a, b);
}

DType masked_scale_dtype(const char* op, const Tensor& x, const Tensor& keep, Scalar) {
  check_defined(x, op, "self");
  check_defined(keep, op, "keep");
  // keep may also be bool: the mask a sign-only save decodes to (autograd/compress_saved.h).
  GRAFT_CHECK(is_floating(x.dtype()) && (keep.dtype() == x.dtype() || keep.dtype() == kBool), op,
              ": expected a floating self and a keep mask of the same dtype (or bool), got self ", describe(x),
              " and keep ", describe(keep));
  return x.dtype();
}

DType keep_where_dtype(const char* op, const Tensor& x, const Tensor& keep) {
  check_defined(x, op, "self");
  check_defined(keep, op, "keep");
  GRAFT_CHECK(is_floating(x.dtype()) && keep.dtype() == kBool, op,
              ": expected a floating self and a bool keep mask, got self ", describe(x), " and keep ", describe(keep));
  return x.dtype();
}

DType masked_fill_dtype(const char* op, const Tensor& x, const Tensor& mask, Scalar) {
  check_defined(x, op, "self");
  check_defined(mask, op, "mask");
  GRAFT_CHECK(mask.dtype() == kBool, op, ": only supports boolean masks, but got mask ", describe(mask));
  return x.dtype();
}

DType clamp_dtype(const char* op, const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  check_defined(x, op, "self");
  GRAFT_CHECK(lo || hi, op, ": at least one of 'min' or 'max' must not be None (self ", describe(x), ")");
  DType r = x.dtype();
  if (lo) r = result_type(r, *lo);
  if (hi) r = result_type(r, *hi);
  return r;
}

DType addcmul_dtype(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  return addc_dtype(op, self, a, b, value);
}

DType addcdiv_dtype(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  check_defined(a, op, "tensor1");
  check_defined(b, op, "tensor2");
  GRAFT_CHECK(!is_integral(a.dtype()) || !is_integral(b.dtype()), op, ": integer division with addcdiv is not ",
              "supported; use a floating point tensor1 or tensor2 (got ", describe(a), " and ", describe(b), ")");
  return addc_dtype(op, self, a, b, value);
}

DType lerp_dtype(const char* op, const Tensor& self, const Tensor& end, Scalar) {
  check_defined(self, op, "self");
  check_defined(end, op, "end");
  check_floating(self, op);
  GRAFT_CHECK(end.dtype() == self.dtype(), op, ": expected dtype ", self.dtype(), " for `end` but got ",
              describe(end), " (self ", describe(self), ")");
  return self.dtype();
}

}  // namespace graft::kernels
