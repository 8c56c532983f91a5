#pragma once
// Launchers for the binary and ternary elementwise ops (see elementwise.h). Every operand has the
// op's compute dtype unless noted; the glue has promoted and converted the inputs already.
#include <cuda_runtime_api.h>

#include "cuda/kernels/elementwise.h"

namespace graft::cuda {

enum class BinaryOp : int {
  // out = f(a, b), all of dtype T
  Add,      // a + alpha * b (param alpha); bool: a || (alpha && b)
  Sub,      // a - alpha * b (param alpha); not bool
  Mul,      // bool: a && b
  Div,      // floating
  Pow,      // floating pow; int64 with negative exponents as torch.pow; not bool
  Maximum,  // NaN-propagating
  Minimum,
  Lerp,     // self + weight * (end - self) (param weight); floating
  // out bool, a and b of dtype T
  Gt, Lt, Ge, Le, Eq, Ne, LogicalAnd, LogicalOr,
};
// Operands: out, a, b.
void launch_binary(BinaryOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream);

enum class ScalarOp : int {
  // out = f(a, s) of dtype T, s = p0 converted to T
  Add, Sub, Rsub, Mul, Div, Rdiv,  // Div/Rdiv floating; Sub/Rsub not bool
  ClampMin, ClampMax,              // bound p0
  ClampBoth,                       // min(max(a, p0), p1)
  // out bool
  Gt, Lt, Ge, Le, Eq, Ne,
};
// Operands: out, a.
void launch_scalar_op(ScalarOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg p0, ScalarArg p1,
                      cudaStream_t stream);

enum class TernaryOp : int {
  Where,       // operands out T, cond bool, a T, b T
  MaskedFill,  // operands out T, a T, mask bool; param value
  Addcmul,     // operands out, self, x, y of T: self + value * x * y; not bool
  Addcdiv,     // self + value * x / y; floating
};
void launch_ternary(TernaryOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream);

}  // namespace graft::cuda
