// Binary and ternary elementwise ops on CUDA: checks, type promotion and drivers from the shared
// plan (ops/binary_plan.h), as on the CPU; the math is in cuda/kernels/binary.cu.
#include <initializer_list>
#include <optional>
#include <string>

#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/binary.h"
#include "ops/binary_plan.h"
#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::add_dtype;
using kernels::sub_dtype;
using kernels::promote_dtype;
using kernels::div_dtype;
using kernels::scalar_dtype;
using kernels::sub_scalar_dtype;
using kernels::div_scalar_dtype;
using kernels::pow_dtype;
using kernels::compare_dtype;
using kernels::compare_scalar_dtype;
using kernels::where_dtype;
using kernels::check_masked_fill;
using kernels::clamp_dtype;
using kernels::addcmul_dtype;
using kernels::addcdiv_dtype;
using kernels::check_lerp;

// The shared drivers (binary_plan.h); `launch(geometry, stream)` runs the kernel on the plan.
template <class L>
Tensor arith(const char* op, DType r, std::initializer_list<Tensor> inputs, const L& launch) {
  DeviceGuard guard(inputs.begin()->device().index);
  return kernels::elementwise_new(op, r, inputs, [&](kernels::TensorIterator& it) { launch(geometry_of(it), current_stream()); });
}
template <class L>
Tensor arith_(const char* op, const Tensor& self, DType r, std::initializer_list<Tensor> inputs, const L& launch) {
  DeviceGuard guard(self.device().index);
  return kernels::elementwise_inplace(op, self, r, inputs,
                                      [&](kernels::TensorIterator& it) { launch(geometry_of(it), current_stream()); });
}

auto binary(BinaryOp code, DType r, ScalarArg param = {}) {
  return [=](const ElementwiseGeometry& g, cudaStream_t s) { launch_binary(code, r, g, param, s); };
}
auto scalar_op(ScalarOp code, DType r, const Scalar& v) {
  return [=](const ElementwiseGeometry& g, cudaStream_t s) { launch_scalar_op(code, r, g, to_scalar_arg(v), {}, s); };
}
auto ternary(TernaryOp code, DType r, const Scalar& v) {
  return [=](const ElementwiseGeometry& g, cudaStream_t s) { launch_ternary(code, r, g, to_scalar_arg(v), s); };
}

// ---- arithmetic ----

Tensor add_cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_dtype("add", a, b, alpha);
  return arith("add", r, {a, b}, binary(BinaryOp::Add, r, to_scalar_arg(alpha)));
}
Tensor add_inplace_cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_dtype("add_", a, b, alpha);
  return arith_("add_", a, r, {a, b}, binary(BinaryOp::Add, r, to_scalar_arg(alpha)));
}
Tensor sub_cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = sub_dtype("sub", a, b, alpha);
  return arith("sub", r, {a, b}, binary(BinaryOp::Sub, r, to_scalar_arg(alpha)));
}
Tensor sub_inplace_cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = sub_dtype("sub_", a, b, alpha);
  return arith_("sub_", a, r, {a, b}, binary(BinaryOp::Sub, r, to_scalar_arg(alpha)));
}
Tensor mul_cuda(const Tensor& a, const Tensor& b) {
  DType r = promote_dtype("mul", a, b);
  return arith("mul", r, {a, b}, binary(BinaryOp::Mul, r));
}
Tensor mul_inplace_cuda(const Tensor& a, const Tensor& b) {
  DType r = promote_dtype("mul_", a, b);
  return arith_("mul_", a, r, {a, b}, binary(BinaryOp::Mul, r));
}
Tensor div_cuda(const Tensor& a, const Tensor& b) {
  DType r = div_dtype("div", a, b);
  return arith("div", r, {a, b}, binary(BinaryOp::Div, r));
}
Tensor div_inplace_cuda(const Tensor& a, const Tensor& b) {
  DType r = div_dtype("div_", a, b);
  return arith_("div_", a, r, {a, b}, binary(BinaryOp::Div, r));
}

Tensor add_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = scalar_dtype("add", a, b);
  return arith("add", r, {a}, scalar_op(ScalarOp::Add, r, b));
}
Tensor add_inplace_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = scalar_dtype("add_", a, b);
  return arith_("add_", a, r, {a}, scalar_op(ScalarOp::Add, r, b));
}
Tensor sub_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = sub_scalar_dtype("sub", a, b);
  return arith("sub", r, {a}, scalar_op(ScalarOp::Sub, r, b));
}
Tensor sub_inplace_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = sub_scalar_dtype("sub_", a, b);
  return arith_("sub_", a, r, {a}, scalar_op(ScalarOp::Sub, r, b));
}
Tensor rsub_cuda(const Tensor& a, Scalar b) {
  DType r = sub_scalar_dtype("rsub", a, b);
  return arith("rsub", r, {a}, scalar_op(ScalarOp::Rsub, r, b));
}
Tensor mul_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = scalar_dtype("mul", a, b);
  return arith("mul", r, {a}, scalar_op(ScalarOp::Mul, r, b));
}
Tensor mul_inplace_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = scalar_dtype("mul_", a, b);
  return arith_("mul_", a, r, {a}, scalar_op(ScalarOp::Mul, r, b));
}
Tensor div_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = div_scalar_dtype("div", a, b);
  return arith("div", r, {a}, scalar_op(ScalarOp::Div, r, b));
}
Tensor div_inplace_scalar_cuda(const Tensor& a, Scalar b) {
  DType r = div_scalar_dtype("div_", a, b);
  return arith_("div_", a, r, {a}, scalar_op(ScalarOp::Div, r, b));
}
Tensor rdiv_cuda(const Tensor& a, Scalar b) {
  DType r = div_scalar_dtype("rdiv", a, b);
  return arith("rdiv", r, {a}, scalar_op(ScalarOp::Rdiv, r, b));
}

Tensor pow_cuda(const Tensor& a, const Tensor& b) {
  DType r = promote_dtype("pow", a, b);
  GRAFT_CHECK(r != kBool, "pow: not implemented for bool tensors (got ", describe(a), " and ", describe(b), ")");
  return arith("pow", r, {a, b}, binary(BinaryOp::Pow, r));
}

Tensor maximum_cuda(const Tensor& a, const Tensor& b) {
  DType r = promote_dtype("maximum", a, b);
  return arith("maximum", r, {a, b}, binary(BinaryOp::Maximum, r));
}
Tensor minimum_cuda(const Tensor& a, const Tensor& b) {
  DType r = promote_dtype("minimum", a, b);
  return arith("minimum", r, {a, b}, binary(BinaryOp::Minimum, r));
}

// ---- comparisons and logical ops: bool results, compared in the promoted dtype ----

Tensor compare(const char* op, BinaryOp code, const Tensor& a, const Tensor& b) {
  DType c = compare_dtype(op, a, b);
  DeviceGuard guard(a.device().index);
  kernels::TensorIterator it(op);
  it.add_input(a, c).add_input(b, c).build(kBool);
  launch_binary(code, c, geometry_of(it), {}, current_stream());
  return it.output();
}

Tensor compare_scalar(const char* op, ScalarOp code, const Tensor& a, Scalar s) {
  DType c = compare_scalar_dtype(op, a, s);
  DeviceGuard guard(a.device().index);
  kernels::TensorIterator it(op);
  it.add_input(a, c).build(kBool);
  launch_scalar_op(code, c, geometry_of(it), to_scalar_arg(s), {}, current_stream());
  return it.output();
}

#define GRAFT_COMPARISON(name, Code)                                                                         \
  Tensor name##_cuda(const Tensor& a, const Tensor& b) { return compare(#name, BinaryOp::Code, a, b); }       \
  Tensor name##_scalar_cuda(const Tensor& a, Scalar b) { return compare_scalar(#name, ScalarOp::Code, a, b); }
GRAFT_COMPARISON(gt, Gt)
GRAFT_COMPARISON(lt, Lt)
GRAFT_COMPARISON(ge, Ge)
GRAFT_COMPARISON(le, Le)
GRAFT_COMPARISON(eq, Eq)
GRAFT_COMPARISON(ne, Ne)
#undef GRAFT_COMPARISON

Tensor logical_and_cuda(const Tensor& a, const Tensor& b) { return compare("logical_and", BinaryOp::LogicalAnd, a, b); }
Tensor logical_or_cuda(const Tensor& a, const Tensor& b) { return compare("logical_or", BinaryOp::LogicalOr, a, b); }

// ---- selection ----

Tensor where_cuda(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType r = where_dtype(cond, a, b);
  DeviceGuard guard(cond.device().index);
  kernels::TensorIterator it("where");
  it.add_input(cond).add_input(a, r).add_input(b, r).build(r);
  launch_ternary(TernaryOp::Where, r, geometry_of(it), {}, current_stream());
  return it.output();
}

Tensor masked_fill_cuda(const Tensor& x, const Tensor& mask, Scalar value) {
  check_masked_fill(x, mask);
  DeviceGuard guard(x.device().index);
  kernels::TensorIterator it("masked_fill");
  it.add_input(x).add_input(mask).build(x.dtype());
  launch_ternary(TernaryOp::MaskedFill, x.dtype(), geometry_of(it), to_scalar_arg(value), current_stream());
  return it.output();
}

// ---- clamp ----

auto clamp_launch(DType r, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return [=](const ElementwiseGeometry& g, cudaStream_t s) {
    if (lo && hi) launch_scalar_op(ScalarOp::ClampBoth, r, g, to_scalar_arg(*lo), to_scalar_arg(*hi), s);
    else if (lo) launch_scalar_op(ScalarOp::ClampMin, r, g, to_scalar_arg(*lo), {}, s);
    else launch_scalar_op(ScalarOp::ClampMax, r, g, to_scalar_arg(*hi), {}, s);
  };
}

Tensor clamp_cuda(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  DType r = clamp_dtype("clamp", x, lo, hi);
  return arith("clamp", r, {x}, clamp_launch(r, lo, hi));
}
Tensor clamp_inplace_cuda(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  DType r = clamp_dtype("clamp_", x, lo, hi);
  return arith_("clamp_", x, r, {x}, clamp_launch(r, lo, hi));
}

// ---- optimizer updates ----

Tensor addcmul_inplace_cuda(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  DType r = addcmul_dtype(self, a, b, value);
  return arith_("addcmul_", self, r, {self, a, b}, ternary(TernaryOp::Addcmul, r, value));
}

Tensor addcdiv_inplace_cuda(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  DType r = addcdiv_dtype(self, a, b, value);
  return arith_("addcdiv_", self, r, {self, a, b}, ternary(TernaryOp::Addcdiv, r, value));
}

Tensor lerp_inplace_cuda(const Tensor& self, const Tensor& end, Scalar weight) {
  check_lerp(self, end);
  return arith_("lerp_", self, self.dtype(), {self, end}, binary(BinaryOp::Lerp, self.dtype(), to_scalar_arg(weight)));
}

}  // namespace

GRAFT_KERNEL("add.Tensor", CUDA, add_cuda);
GRAFT_KERNEL("add.Scalar", CUDA, add_scalar_cuda);
GRAFT_KERNEL("sub.Tensor", CUDA, sub_cuda);
GRAFT_KERNEL("sub.Scalar", CUDA, sub_scalar_cuda);
GRAFT_KERNEL("rsub.Scalar", CUDA, rsub_cuda);
GRAFT_KERNEL("mul.Tensor", CUDA, mul_cuda);
GRAFT_KERNEL("mul.Scalar", CUDA, mul_scalar_cuda);
GRAFT_KERNEL("div.Tensor", CUDA, div_cuda);
GRAFT_KERNEL("div.Scalar", CUDA, div_scalar_cuda);
GRAFT_KERNEL("rdiv.Scalar", CUDA, rdiv_cuda);
GRAFT_KERNEL("pow.Tensor_Tensor", CUDA, pow_cuda);
GRAFT_KERNEL("maximum", CUDA, maximum_cuda);
GRAFT_KERNEL("minimum", CUDA, minimum_cuda);
GRAFT_KERNEL("gt.Tensor", CUDA, gt_cuda);
GRAFT_KERNEL("lt.Tensor", CUDA, lt_cuda);
GRAFT_KERNEL("ge.Tensor", CUDA, ge_cuda);
GRAFT_KERNEL("le.Tensor", CUDA, le_cuda);
GRAFT_KERNEL("eq.Tensor", CUDA, eq_cuda);
GRAFT_KERNEL("ne.Tensor", CUDA, ne_cuda);
GRAFT_KERNEL("gt.Scalar", CUDA, gt_scalar_cuda);
GRAFT_KERNEL("lt.Scalar", CUDA, lt_scalar_cuda);
GRAFT_KERNEL("ge.Scalar", CUDA, ge_scalar_cuda);
GRAFT_KERNEL("le.Scalar", CUDA, le_scalar_cuda);
GRAFT_KERNEL("eq.Scalar", CUDA, eq_scalar_cuda);
GRAFT_KERNEL("ne.Scalar", CUDA, ne_scalar_cuda);
GRAFT_KERNEL("logical_and", CUDA, logical_and_cuda);
GRAFT_KERNEL("logical_or", CUDA, logical_or_cuda);
GRAFT_KERNEL("where.self", CUDA, where_cuda);
GRAFT_KERNEL("clamp", CUDA, clamp_cuda);
GRAFT_KERNEL("masked_fill.Scalar", CUDA, masked_fill_cuda);
GRAFT_KERNEL("add_.Tensor", CUDA, add_inplace_cuda);
GRAFT_KERNEL("add_.Scalar", CUDA, add_inplace_scalar_cuda);
GRAFT_KERNEL("sub_.Tensor", CUDA, sub_inplace_cuda);
GRAFT_KERNEL("sub_.Scalar", CUDA, sub_inplace_scalar_cuda);
GRAFT_KERNEL("mul_.Tensor", CUDA, mul_inplace_cuda);
GRAFT_KERNEL("mul_.Scalar", CUDA, mul_inplace_scalar_cuda);
GRAFT_KERNEL("div_.Tensor", CUDA, div_inplace_cuda);
GRAFT_KERNEL("div_.Scalar", CUDA, div_inplace_scalar_cuda);
GRAFT_KERNEL("clamp_", CUDA, clamp_inplace_cuda);
GRAFT_KERNEL("addcmul_", CUDA, addcmul_inplace_cuda);
GRAFT_KERNEL("addcdiv_", CUDA, addcdiv_inplace_cuda);
GRAFT_KERNEL("lerp_.Scalar", CUDA, lerp_inplace_cuda);

}  // namespace graft::cuda
