#pragma once
// The device-independent half of the unary elementwise ops: argument checks and the dtype rules,
// each building the shared TensorIterator the device then runs its loop on (ops/unary.cpp on the
// CPU, cuda/unary_cuda.cpp on CUDA).
//
// Dtype rules (PyTorch's): floating ops (exp, log, sin, sqrt, sigmoid, ...) on int64/bool give
// float32; neg/abs/sign/relu keep the input dtype (neg and relu refuse bool); in-place versions
// must be able to write their result type into self.
#include "ops/tensor_iterator.h"

// The unary family's kernels outside the op table (runtime/op_table/unary.def), as (op name,
// kernel stem): every device defines stem##_<device> for each and registers the list with
// GRAFT_UNARY_KERNELS(its macro), so a device cannot register a different set by accident.
#define GRAFT_UNARY_KERNELS(X)                                                                      \
  X("neg", neg) X("relu", relu) X("abs", abs) X("sign", sign) X("gelu", gelu)                       \
  X("pow.Tensor_Scalar", pow_scalar) X("logical_not", logical_not) X("sin_", sin_inplace)           \
  X("exp_", exp_inplace) X("relu_", relu_inplace) X("neg_", neg_inplace) X("sqrt_", sqrt_inplace)   \
  X("threshold_backward", threshold_backward) X("gelu_backward", gelu_backward)                     \
  X("sigmoid_backward", sigmoid_backward) X("tanh_backward", tanh_backward)

namespace graft::kernels {

// y = f(x) in floating point: builds `it` (output allocated) and returns the dtype f runs in.
DType build_floating_unary(TensorIterator& it, const Tensor& x);
// x = f(x): only floating tensors can hold a floating result. Returns x's dtype.
DType build_floating_unary_inplace(TensorIterator& it, const Tensor& x);
// y = f(x) keeping x's dtype, into `out` when defined (the in-place forms pass x).
void build_same_dtype_unary(TensorIterator& it, const Tensor& x, const Tensor& out);

// The ops that keep the dtype: their checks before build_same_dtype_unary (`op` names the
// in-place form too: "neg_").
void check_neg(const Tensor& x, const char* op);
void check_relu(const Tensor& x, const char* op);

}  // namespace graft::kernels
