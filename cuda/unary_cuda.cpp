// Unary ops and activation derivatives on CUDA: the CPU kernels' checks, dtype rules and error
// messages (ops/unary.cpp), with the math in cuda/kernels/unary.cu.
#include <string>

#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/unary.h"
#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"
#include "ops/unary_plan.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::floating_result;
using kernels::result_type;

// y = f(x) in floating point: integers and bool give float32.
Tensor floating_unary(const char* op, UnaryOp code, const Tensor& x, ScalarArg param = {}) {
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it(op);
  DType r = kernels::build_floating_unary(it, x);
  launch_unary(code, r, geometry_of(it), param, current_stream());
  return it.output();
}

// x = f(x): only floating tensors can hold a floating result.
Tensor floating_unary_(const char* op, UnaryOp code, const Tensor& x) {
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it(op);
  DType r = kernels::build_floating_unary_inplace(it, x);
  launch_unary(code, r, geometry_of(it), {}, current_stream());
  return x;
}

// y = f(x) keeping the dtype; into `out` when given (the in-place forms pass x).
Tensor same_dtype_unary(const char* op, UnaryOp code, const Tensor& x, const Tensor& out) {
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it(op);
  kernels::build_same_dtype_unary(it, x, out);
  launch_unary(code, x.dtype(), geometry_of(it), {}, current_stream());
  return it.output();
}

Tensor neg_cuda(const Tensor& x) {
  kernels::check_neg(x, "neg");
  return same_dtype_unary("neg", UnaryOp::Neg, x, Tensor());
}
Tensor neg_inplace_cuda(const Tensor& x) {
  kernels::check_neg(x, "neg_");
  return same_dtype_unary("neg_", UnaryOp::Neg, x, x);
}
Tensor relu_cuda(const Tensor& x) {
  kernels::check_relu(x, "relu");
  return same_dtype_unary("relu", UnaryOp::Relu, x, Tensor());
}
Tensor relu_inplace_cuda(const Tensor& x) {
  kernels::check_relu(x, "relu_");
  return same_dtype_unary("relu_", UnaryOp::Relu, x, x);
}
Tensor abs_cuda(const Tensor& x) {
  check_defined(x, "abs", "self");
  return same_dtype_unary("abs", UnaryOp::Abs, x, Tensor());
}
Tensor sign_cuda(const Tensor& x) {
  check_defined(x, "sign", "self");
  return same_dtype_unary("sign", UnaryOp::Sign, x, Tensor());
}

#define GRAFT_UNARY_OP(name, Name, ...) \
  Tensor name##_cuda(const Tensor& x) { return floating_unary(#name, UnaryOp::Name, x); }
#include "runtime/op_table/unary.def"
Tensor sin_inplace_cuda(const Tensor& x) { return floating_unary_("sin_", UnaryOp::Sin, x); }
Tensor exp_inplace_cuda(const Tensor& x) { return floating_unary_("exp_", UnaryOp::Exp, x); }
Tensor sqrt_inplace_cuda(const Tensor& x) { return floating_unary_("sqrt_", UnaryOp::Sqrt, x); }

Tensor logical_not_cuda(const Tensor& x) {
  check_defined(x, "logical_not", "self");
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it("logical_not");
  it.add_input(x).build(kBool);
  launch_unary(UnaryOp::LogicalNot, x.dtype(), geometry_of(it), {}, current_stream());
  return it.output();
}

bool gelu_is_tanh(const std::string& approximate, const char* op) {
  GRAFT_CHECK(approximate == "none" || approximate == "tanh", op,
              ": approximate argument must be either none or tanh, got '", approximate, "'");
  return approximate == "tanh";
}

Tensor gelu_cuda(const Tensor& x, const std::string& approximate) {
  check_defined(x, "gelu", "self");
  bool tanh_approx = gelu_is_tanh(approximate, "gelu");
  kernels::check_floating(x, "gelu");
  return floating_unary("gelu", tanh_approx ? UnaryOp::GeluTanh : UnaryOp::GeluErf, x);
}

Tensor pow_scalar_cuda(const Tensor& x, Scalar exponent) {
  check_defined(x, "pow", "self");
  DType r = result_type(x.dtype(), exponent);
  GRAFT_CHECK(r != kBool, "pow: not implemented for bool tensors (got ", describe(x), " and exponent ", exponent, ")");
  ScalarArg p;
  UnaryOp code;
  if (r == kInt64) {
    int64_t e = exponent.to_int();
    GRAFT_CHECK(e >= 0, "pow: integers to negative integer powers are not allowed (", describe(x), " ** ", e, ")");
    p.i = e;
    code = UnaryOp::IntPow;
  } else {
    // The common exponents avoid pow: exact and cheaper (the same special cases as the CPU).
    double e = exponent.to_double();
    p.f = e;
    code = e == 2      ? UnaryOp::Square
           : e == 1    ? UnaryOp::Identity
           : e == 0    ? UnaryOp::One
           : e == 3    ? UnaryOp::Cube
           : e == 0.5  ? UnaryOp::Sqrt
           : e == -1   ? UnaryOp::Reciprocal
           : e == -0.5 ? UnaryOp::Rsqrt
                       : UnaryOp::PowScalar;
  }
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it("pow");
  it.add_input(x, r).build(r);
  launch_unary(code, r, geometry_of(it), p, current_stream());
  return it.output();
}

// out = f(grad, x) over broadcast shapes in the promoted dtype.
Tensor grad_binary(const char* op, GradOp code, bool need_floating, const Tensor& grad, const Tensor& x,
                   ScalarArg param = {}) {
  check_defined(grad, op, "grad_output");
  check_defined(x, op, "self");
  DType r = result_type(grad.dtype(), x.dtype());
  GRAFT_CHECK(!need_floating || is_floating(r), op, ": expected floating point tensors, got ", describe(grad),
              " and ", describe(x));
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it(op);
  it.add_input(grad, r).add_input(x, r).build(r);
  launch_grad(code, r, geometry_of(it), param, current_stream());
  return it.output();
}

Tensor threshold_backward_cuda(const Tensor& grad, const Tensor& x, Scalar threshold) {
  return grad_binary("threshold_backward", GradOp::ThresholdBackward, false, grad, x, to_scalar_arg(threshold));
}

Tensor gelu_backward_cuda(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  bool tanh_approx = gelu_is_tanh(approximate, "gelu_backward");
  return grad_binary("gelu_backward", tanh_approx ? GradOp::GeluTanhBackward : GradOp::GeluErfBackward, true, grad,
                     x);
}

Tensor sigmoid_backward_cuda(const Tensor& grad, const Tensor& y) {
  return grad_binary("sigmoid_backward", GradOp::SigmoidBackward, true, grad, y);
}

Tensor tanh_backward_cuda(const Tensor& grad, const Tensor& y) {
  return grad_binary("tanh_backward", GradOp::TanhBackward, true, grad, y);
}

}  // namespace

#define GRAFT_UNARY_OP(name, ...) GRAFT_KERNEL(#name, CUDA, name##_cuda);
#include "runtime/op_table/unary.def"
#define GRAFT_CUDA_UNARY_KERNEL(name, stem) GRAFT_KERNEL(name, CUDA, stem##_cuda);
GRAFT_UNARY_KERNELS(GRAFT_CUDA_UNARY_KERNEL)
#undef GRAFT_CUDA_UNARY_KERNEL

}  // namespace graft::cuda
