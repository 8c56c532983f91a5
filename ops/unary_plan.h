#pragma once
// The device-independent half of the unary elementwise ops: argument checks and the dtype each op
// computes in (its `dtype:` rule in codegen/ops/unary.yaml). Every rule takes the op's name and
// all of its arguments, so the generated kernels of both devices call it alike, then run the
// op's math functor (ops/math/unary_math.h) in the returned dtype.
//
// Dtype rules (PyTorch's): floating ops (exp, log, sin, sqrt, sigmoid, ...) on int64/bool give
// float32; neg/abs/sign/relu keep the input dtype (neg and relu refuse bool); in-place versions
// must be able to write their result type into self; gelu and the activation derivatives take
// floating tensors only.
#include "ops/tensor_iterator.h"
#include "runtime/op_options.h"
#include "runtime/scalar.h"

namespace graft::kernels {

// exp, log, ...: float32/float64 keep their dtype, integers and bool compute in float32.
DType floating_unary_dtype(const char* op, const Tensor& self);
// sin_, exp_, sqrt_: self must be able to hold the floating result.
DType floating_inplace_dtype(const char* op, const Tensor& self);
// gelu: a floating tensor.
DType floating_dtype(const char* op, const Tensor& self, GeluApproximate approximate);
// neg, neg_ (not bool), relu, relu_ (not bool), abs, sign, logical_not: self's dtype.
DType neg_dtype(const char* op, const Tensor& self);
DType relu_dtype(const char* op, const Tensor& self);
DType same_dtype(const char* op, const Tensor& self);
// pow(x, scalar): bool refused, integers need a non-negative integer exponent.
DType pow_scalar_dtype(const char* op, const Tensor& self, Scalar exponent);
// Activation derivatives f(grad, x): the promoted dtype (threshold_backward), floating only (the others).
DType grad_dtype(const char* op, const Tensor& grad, const Tensor& self, Scalar threshold);
DType floating_grad_dtype(const char* op, const Tensor& grad, const Tensor& output);
DType floating_grad_dtype(const char* op, const Tensor& grad, const Tensor& self, GeluApproximate approximate);

}  // namespace graft::kernels
