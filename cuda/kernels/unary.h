#pragma once
// Launchers for the unary elementwise ops and the fused activation derivatives (see elementwise.h).
#include <cuda_runtime_api.h>

#include "cuda/kernels/elementwise.h"

namespace graft::cuda {

enum class UnaryOp : int {
  // out dtype = in dtype, any dtype (neg/relu of bool are refused by the glue)
  Neg, Relu, Abs, Sign,
  // floating (float32/float64) only: the op table's rows (Exp, Log, ...; runtime/op_table/unary.def),
  // then gelu's two forms
#define GRAFT_UNARY_OP(name, Name, ...) Name,
#include "runtime/op_table/unary.def"
  GeluErf, GeluTanh,
  // pow(x, param) special cases and the general floating power (param.f is the exponent)
  Identity, One, Square, Cube, PowScalar,
  // int64 ** param.i, param.i >= 0
  IntPow,
  // any dtype in, bool out
  LogicalNot,
};

// out = op(in) over `g` (operand 0 out, operand 1 in). `dtype` is the input's dtype, which is the
// output's too except for LogicalNot (bool out).
void launch_unary(UnaryOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream);

enum class GradOp : int {
  ThresholdBackward,  // any dtype; param = threshold: x <= threshold ? 0 : grad
  GeluErfBackward, GeluTanhBackward, SigmoidBackward, TanhBackward,  // floating
};

// out = op(grad, x) over `g` (operands out, grad, x), every operand of `dtype`.
void launch_grad(GradOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream);

}  // namespace graft::cuda
