// Binary and ternary elementwise ops on CUDA: the CPU kernels' type promotion, checks and error
// messages (ops/binary.cpp), with the math in cuda/kernels/binary.cu.
#include <initializer_list>
#include <optional>
#include <string>

#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/binary.h"
#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::floating_result;
using kernels::result_type;

// A new tensor of dtype r = op(inputs), every input read as r. `launch(geometry, stream)` runs the
// kernel once the operands are in place.
template <class L>
Tensor arith(const char* op, DType r, std::initializer_list<Tensor> inputs, const L& launch) {
  DeviceGuard guard(inputs.begin()->device().index);
  CudaIter it(op);
  for (const Tensor& t : inputs) it.add_input(t, r);
  it.build(r);
  launch(it.geometry(), current_stream());
  return it.output();
}

// self = op(inputs) (inputs start with self), computed in the promoted dtype r.
template <class L>
Tensor arith_(const char* op, const Tensor& self, DType r, std::initializer_list<Tensor> inputs, const L& launch) {
  kernels::check_inplace_cast(op, r, self);
  DeviceGuard guard(self.device().index);
  if (r == self.dtype()) {
    CudaIter it(op);
    it.add_output(self);
    for (const Tensor& t : inputs) it.add_input(t, r);
    it.build();
    launch(it.geometry(), current_stream());
    return self;
  }
  // A wider result (float32 self, float64 other): compute in it and round once into self, as PyTorch.
  kernels::check_no_internal_overlap(op, self);
  CudaIter it(op);
  for (const Tensor& t : inputs) it.add_input(t, r);
  it.build(r);
  GRAFT_CHECK(it.output().sizes() == self.sizes(), op, ": output with shape ", shape_str(self.sizes()),
              " doesn't match the broadcast shape ", shape_str(it.output().sizes()));
  launch(it.geometry(), current_stream());
  copy_on_device(self, it.output());
  return self;
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

// ---- argument checks (the CPU's) ----

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

std::string scalar_str(Scalar s) { return detail::str_cat("scalar ", s); }

void check_defined2(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
}

// ---- arithmetic ----

DType add_result(const char* op, const Tensor& a, const Tensor& b, Scalar alpha) {
  check_defined2(a, b, op);
  DType r = result_type(a.dtype(), b.dtype());
  check_alpha(op, r, alpha);
  return r;
}

Tensor add_cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_result("add", a, b, alpha);
  return arith("add", r, {a, b}, binary(BinaryOp::Add, r, to_scalar_arg(alpha)));
}
Tensor add__cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_result("add_", a, b, alpha);
  return arith_("add_", a, r, {a, b}, binary(BinaryOp::Add, r, to_scalar_arg(alpha)));
}
Tensor sub_cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_result("sub", a, b, alpha);
  check_sub("sub", a, b.dtype() == kBool, describe(b));
  return arith("sub", r, {a, b}, binary(BinaryOp::Sub, r, to_scalar_arg(alpha)));
}
Tensor sub__cuda(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = add_result("sub_", a, b, alpha);
  check_sub("sub_", a, b.dtype() == kBool, describe(b));
  return arith_("sub_", a, r, {a, b}, binary(BinaryOp::Sub, r, to_scalar_arg(alpha)));
}
Tensor mul_cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "mul");
  DType r = result_type(a.dtype(), b.dtype());
  return arith("mul", r, {a, b}, binary(BinaryOp::Mul, r));
}
Tensor mul__cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "mul_");
  DType r = result_type(a.dtype(), b.dtype());
  return arith_("mul_", a, r, {a, b}, binary(BinaryOp::Mul, r));
}
Tensor div_cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "div");
  DType r = floating_result(result_type(a.dtype(), b.dtype()));
  return arith("div", r, {a, b}, binary(BinaryOp::Div, r));
}
Tensor div__cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "div_");
  DType r = floating_result(result_type(a.dtype(), b.dtype()));
  return arith_("div_", a, r, {a, b}, binary(BinaryOp::Div, r));
}

Tensor add_scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "add", "self");
  DType r = result_type(a.dtype(), b);
  return arith("add", r, {a}, scalar_op(ScalarOp::Add, r, b));
}
Tensor add__scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "add_", "self");
  DType r = result_type(a.dtype(), b);
  return arith_("add_", a, r, {a}, scalar_op(ScalarOp::Add, r, b));
}
Tensor sub_scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "sub", "self");
  check_sub("sub", a, b.is_bool(), scalar_str(b));
  DType r = result_type(a.dtype(), b);
  return arith("sub", r, {a}, scalar_op(ScalarOp::Sub, r, b));
}
Tensor sub__scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "sub_", "self");
  check_sub("sub_", a, b.is_bool(), scalar_str(b));
  DType r = result_type(a.dtype(), b);
  return arith_("sub_", a, r, {a}, scalar_op(ScalarOp::Sub, r, b));
}
Tensor rsub_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "rsub", "self");
  check_sub("rsub", a, b.is_bool(), scalar_str(b));
  DType r = result_type(a.dtype(), b);
  return arith("rsub", r, {a}, scalar_op(ScalarOp::Rsub, r, b));
}
Tensor mul_scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "mul", "self");
  DType r = result_type(a.dtype(), b);
  return arith("mul", r, {a}, scalar_op(ScalarOp::Mul, r, b));
}
Tensor mul__scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "mul_", "self");
  DType r = result_type(a.dtype(), b);
  return arith_("mul_", a, r, {a}, scalar_op(ScalarOp::Mul, r, b));
}
Tensor div_scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "div", "self");
  DType r = floating_result(result_type(a.dtype(), b));
  return arith("div", r, {a}, scalar_op(ScalarOp::Div, r, b));
}
Tensor div__scalar_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "div_", "self");
  DType r = floating_result(result_type(a.dtype(), b));
  return arith_("div_", a, r, {a}, scalar_op(ScalarOp::Div, r, b));
}
Tensor rdiv_cuda(const Tensor& a, Scalar b) {
  check_defined(a, "rdiv", "self");
  DType r = floating_result(result_type(a.dtype(), b));
  return arith("rdiv", r, {a}, scalar_op(ScalarOp::Rdiv, r, b));
}

Tensor pow_cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "pow");
  DType r = result_type(a.dtype(), b.dtype());
  GRAFT_CHECK(r != kBool, "pow: not implemented for bool tensors (got ", describe(a), " and ", describe(b), ")");
  return arith("pow", r, {a, b}, binary(BinaryOp::Pow, r));
}

Tensor maximum_cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "maximum");
  DType r = result_type(a.dtype(), b.dtype());
  return arith("maximum", r, {a, b}, binary(BinaryOp::Maximum, r));
}
Tensor minimum_cuda(const Tensor& a, const Tensor& b) {
  check_defined2(a, b, "minimum");
  DType r = result_type(a.dtype(), b.dtype());
  return arith("minimum", r, {a, b}, binary(BinaryOp::Minimum, r));
}

// ---- comparisons and logical ops: bool results, compared in the promoted dtype ----

Tensor compare(const char* op, BinaryOp code, const Tensor& a, const Tensor& b) {
  check_defined2(a, b, op);
  DType c = result_type(a.dtype(), b.dtype());
  DeviceGuard guard(a.device().index);
  CudaIter it(op);
  it.add_input(a, c).add_input(b, c).build(kBool);
  launch_binary(code, c, it.geometry(), {}, current_stream());
  return it.output();
}

Tensor compare_scalar(const char* op, ScalarOp code, const Tensor& a, Scalar s) {
  check_defined(a, op, "self");
  DType c = result_type(a.dtype(), s);
  DeviceGuard guard(a.device().index);
  CudaIter it(op);
  it.add_input(a, c).build(kBool);
  launch_scalar_op(code, c, it.geometry(), to_scalar_arg(s), {}, current_stream());
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
  check_defined(cond, "where", "condition");
  check_defined2(a, b, "where");
  GRAFT_CHECK(cond.dtype() == kBool, "where: expected condition to be a boolean tensor, but got ", describe(cond));
  DType r = result_type(a.dtype(), b.dtype());
  DeviceGuard guard(cond.device().index);
  CudaIter it("where");
  it.add_input(cond).add_input(a, r).add_input(b, r).build(r);
  launch_ternary(TernaryOp::Where, r, it.geometry(), {}, current_stream());
  return it.output();
}

Tensor masked_fill_cuda(const Tensor& x, const Tensor& mask, Scalar value) {
  check_defined(x, "masked_fill", "self");
  check_defined(mask, "masked_fill", "mask");
  GRAFT_CHECK(mask.dtype() == kBool, "masked_fill: only supports boolean masks, but got mask ", describe(mask));
  DeviceGuard guard(x.device().index);
  CudaIter it("masked_fill");
  it.add_input(x).add_input(mask).build(x.dtype());
  launch_ternary(TernaryOp::MaskedFill, x.dtype(), it.geometry(), to_scalar_arg(value), current_stream());
  return it.output();
}

// ---- clamp ----

DType clamp_result(const char* op, const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi) {
  check_defined(x, op, "self");
  GRAFT_CHECK(lo || hi, op, ": at least one of 'min' or 'max' must not be None (self ", describe(x), ")");
  DType r = x.dtype();
  if (lo) r = result_type(r, *lo);
  if (hi) r = result_type(r, *hi);
  return r;
}

auto clamp_launch(DType r, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return [=](const ElementwiseGeometry& g, cudaStream_t s) {
    if (lo && hi) launch_scalar_op(ScalarOp::ClampBoth, r, g, to_scalar_arg(*lo), to_scalar_arg(*hi), s);
    else if (lo) launch_scalar_op(ScalarOp::ClampMin, r, g, to_scalar_arg(*lo), {}, s);
    else launch_scalar_op(ScalarOp::ClampMax, r, g, to_scalar_arg(*hi), {}, s);
  };
}

Tensor clamp_cuda(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  DType r = clamp_result("clamp", x, lo, hi);
  return arith("clamp", r, {x}, clamp_launch(r, lo, hi));
}
Tensor clamp__cuda(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  DType r = clamp_result("clamp_", x, lo, hi);
  return arith_("clamp_", x, r, {x}, clamp_launch(r, lo, hi));
}

// ---- optimizer updates ----

DType addc_result(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  check_defined(self, op, "self");
  check_defined(a, op, "tensor1");
  check_defined(b, op, "tensor2");
  DType r = result_type(result_type(self.dtype(), a.dtype()), b.dtype());
  GRAFT_CHECK(r != kBool, op, ": not implemented for bool tensors (got ", describe(self), ", ", describe(a), " and ",
              describe(b), ")");
  GRAFT_CHECK(is_floating(r) || value.is_integral(), op,
              ": for integral input tensors, argument value must not be a floating point number (value ", value,
              ", result ", r, ")");
  return r;
}

Tensor addcmul__cuda(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  DType r = addc_result("addcmul_", self, a, b, value);
  return arith_("addcmul_", self, r, {self, a, b}, ternary(TernaryOp::Addcmul, r, value));
}

Tensor addcdiv__cuda(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  check_defined(a, "addcdiv_", "tensor1");
  check_defined(b, "addcdiv_", "tensor2");
  GRAFT_CHECK(!is_integral(a.dtype()) || !is_integral(b.dtype()), "addcdiv_: integer division with addcdiv is not ",
              "supported; use a floating point tensor1 or tensor2 (got ", describe(a), " and ", describe(b), ")");
  DType r = addc_result("addcdiv_", self, a, b, value);
  return arith_("addcdiv_", self, r, {self, a, b}, ternary(TernaryOp::Addcdiv, r, value));
}

Tensor lerp__cuda(const Tensor& self, const Tensor& end, Scalar weight) {
  check_defined(self, "lerp_", "self");
  check_defined(end, "lerp_", "end");
  kernels::check_floating(self, "lerp_");
  GRAFT_CHECK(end.dtype() == self.dtype(), "lerp_: expected dtype ", self.dtype(), " for `end` but got ",
              describe(end), " (self ", describe(self), ")");
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
GRAFT_KERNEL("add_.Tensor", CUDA, add__cuda);
GRAFT_KERNEL("add_.Scalar", CUDA, add__scalar_cuda);
GRAFT_KERNEL("sub_.Tensor", CUDA, sub__cuda);
GRAFT_KERNEL("sub_.Scalar", CUDA, sub__scalar_cuda);
GRAFT_KERNEL("mul_.Tensor", CUDA, mul__cuda);
GRAFT_KERNEL("mul_.Scalar", CUDA, mul__scalar_cuda);
GRAFT_KERNEL("div_.Tensor", CUDA, div__cuda);
GRAFT_KERNEL("div_.Scalar", CUDA, div__scalar_cuda);
GRAFT_KERNEL("clamp_", CUDA, clamp__cuda);
GRAFT_KERNEL("addcmul_", CUDA, addcmul__cuda);
GRAFT_KERNEL("addcdiv_", CUDA, addcdiv__cuda);
GRAFT_KERNEL("lerp_.Scalar", CUDA, lerp__cuda);

}  // namespace graft::cuda
