#pragma once
// The device-independent half of the binary and ternary elementwise ops (arithmetic, comparisons,
// where, masked_fill, clamp and the optimizer updates): argument checks and PyTorch's type
// promotion, one `*_dtype` function per op family returning the dtype the op computes in. The
// generated kernels of both devices call the op's rule, then the shared driver
// (ops/elementwise_plan.h) and their loop over the op's functor (ops/math/binary_math.h), so both
// devices accept, promote and fail alike.
//
// Promotion: PyTorch's result_type (tensor_iterator.h): tensors with dims take the higher dtype
// (promote_types); a 0-dim tensor, then a Scalar, only matters when it is of a higher category
// (bool < integral < floating). True division of integers gives float32. In-place ops compute in the promoted dtype and need it castable to self
// ("result type Float can't be cast to the desired output type Long"); the broadcast shape must be
// self's shape.
#include <initializer_list>
#include <optional>

#include "ops/elementwise_plan.h"
#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace graft::kernels {

// ---- dtype each op computes in, after its argument checks (the `dtype:` rules of
// codegen/ops/binary.yaml: the op's name, then all of its arguments) ----
DType add_dtype(const char* op, const Tensor& a, const Tensor& b, Scalar alpha);   // add, add_
DType sub_dtype(const char* op, const Tensor& a, const Tensor& b, Scalar alpha);   // sub, sub_ (no bool)
DType promote_dtype(const char* op, const Tensor& a, const Tensor& b);             // mul, maximum, minimum
DType div_dtype(const char* op, const Tensor& a, const Tensor& b);                 // true division, logaddexp
DType scalar_dtype(const char* op, const Tensor& a, Scalar b);                     // add/mul with a Scalar
DType sub_scalar_dtype(const char* op, const Tensor& a, Scalar b);                 // sub, sub_, rsub
DType div_scalar_dtype(const char* op, const Tensor& a, Scalar b);                 // div, div_, rdiv
DType pow_dtype(const char* op, const Tensor& a, const Tensor& b);
// Comparisons and logical ops: the dtype both sides are compared in (the output is bool).
DType compare_dtype(const char* op, const Tensor& a, const Tensor& b);
DType compare_scalar_dtype(const char* op, const Tensor& a, Scalar b);
DType where_dtype(const char* op, const Tensor& cond, const Tensor& a, const Tensor& b);
DType masked_scale_dtype(const char* op, const Tensor& x, const Tensor& keep, Scalar scale);  // _masked_scale
DType masked_fill_dtype(const char* op, const Tensor& x, const Tensor& mask, Scalar value);
DType keep_where_dtype(const char* op, const Tensor& x, const Tensor& keep);  // _keep_where_
DType clamp_dtype(const char* op, const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);
DType addcmul_dtype(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, Scalar value);
DType addcdiv_dtype(const char* op, const Tensor& self, const Tensor& a, const Tensor& b, Scalar value);
DType lerp_dtype(const char* op, const Tensor& self, const Tensor& end, Scalar weight);

}  // namespace graft::kernels
