// Checks and dtype rules shared by the CPU and CUDA unary kernels (unary_plan.h).
#include "ops/unary_plan.h"

#include "ops/kernel_utils.h"

namespace graft::kernels {

DType floating_unary_dtype(const char* op, const Tensor& self) {
  check_defined(self, op, "self");
  return floating_result(self.dtype());
}

DType floating_inplace_dtype(const char* op, const Tensor& self) {
  check_defined(self, op, "self");
  check_inplace_cast(op, floating_result(self.dtype()), self);
  return self.dtype();
}

DType floating_dtype(const char* op, const Tensor& self, GeluApproximate) {
  check_defined(self, op, "self");
  check_floating(self, op);
  return self.dtype();
}

DType neg_dtype(const char* op, const Tensor& self) {
  check_defined(self, op, "self");
  GRAFT_CHECK(self.dtype() != kBool, op,
              ": negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
              "use the `~` or `logical_not()` operator instead (got ",
              describe(self), ")");
  return self.dtype();
}

DType relu_dtype(const char* op, const Tensor& self) {
  check_defined(self, op, "self");
  GRAFT_CHECK(self.dtype() != kBool, op, ": not implemented for bool tensors (got ", describe(self), ")");
  return self.dtype();
}

DType same_dtype(const char* op, const Tensor& self) {
  check_defined(self, op, "self");
  return self.dtype();
}

DType pow_scalar_dtype(const char* op, const Tensor& self, Scalar exponent) {
  check_defined(self, op, "self");
  DType r = result_type(self.dtype(), exponent);
  GRAFT_CHECK(r != kBool, op, ": not implemented for bool tensors (got ", describe(self), " and exponent ", exponent,
              ")");
  GRAFT_CHECK(r != kInt64 || exponent.to_int() >= 0, op,
              ": integers to negative integer powers are not allowed (", describe(self), " ** ", exponent.to_int(), ")");
  return r;
}

namespace {
DType promoted(const char* op, const Tensor& grad, const Tensor& x, bool need_floating) {
  check_defined(grad, op, "grad_output");
  check_defined(x, op, "self");
  DType r = result_type(grad.dtype(), x.dtype());
  GRAFT_CHECK(!need_floating || is_floating(r), op, ": expected floating point tensors, got ", describe(grad),
              " and ", describe(x));
  return r;
}
}  // namespace

DType grad_dtype(const char* op, const Tensor& grad, const Tensor& self, Scalar) {
  return promoted(op, grad, self, false);
}
DType floating_grad_dtype(const char* op, const Tensor& grad, const Tensor& output) {
  return promoted(op, grad, output, true);
}
DType floating_grad_dtype(const char* op, const Tensor& grad, const Tensor& self, GeluApproximate) {
  return promoted(op, grad, self, true);
}

}  // namespace graft::kernels
