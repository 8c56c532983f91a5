#pragma once
// The device-independent half of the unary elementwise ops: argument checks and the dtype rules,
// each building the shared TensorIterator the device then runs its loop on (ops/unary.cpp on the
// CPU, cuda/unary_cuda.cpp on CUDA).
//
// Dtype rules (PyTorch's): floating ops (exp, log, sin, sqrt, sigmoid, ...) on int64/bool give
// float32; neg/abs/sign/relu keep the input dtype (neg and relu refuse bool); in-place versions
// must be able to write their result type into self.
#include "ops/tensor_iterator.h"

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
