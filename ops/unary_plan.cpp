// Checks and dtype rules shared by the CPU and CUDA unary kernels (unary_plan.h).
#include "ops/unary_plan.h"

#include "ops/kernel_utils.h"

namespace graft::kernels {

DType build_floating_unary(TensorIterator& it, const Tensor& x) {
  check_defined(x, it.op(), "self");
  DType r = floating_result(x.dtype());
  it.add_input(x, r).build(r);
  return r;
}

DType build_floating_unary_inplace(TensorIterator& it, const Tensor& x) {
  check_defined(x, it.op(), "self");
  check_inplace_cast(it.op(), floating_result(x.dtype()), x);
  it.add_output(x).add_input(x).build();
  return x.dtype();
}

void build_same_dtype_unary(TensorIterator& it, const Tensor& x, const Tensor& out) {
  if (out.defined()) it.add_output(out).add_input(x).build();
  else it.add_input(x).build(x.dtype());
}

void check_neg(const Tensor& x, const char* op) {
  check_defined(x, op, "self");
  GRAFT_CHECK(x.dtype() != kBool, op,
              ": negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, "
              "use the `~` or `logical_not()` operator instead (got ",
              describe(x), ")");
}

void check_relu(const Tensor& x, const char* op) {
  check_defined(x, op, "self");
  GRAFT_CHECK(x.dtype() != kBool, op, ": not implemented for bool tensors (got ", describe(x), ")");
}

}  // namespace graft::kernels
