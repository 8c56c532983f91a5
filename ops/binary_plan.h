#pragma once
// The device-independent half of the binary and ternary elementwise ops (arithmetic, comparisons,
// where, masked_fill, clamp and the optimizer updates): argument checks and PyTorch's type
// promotion, one `*_dtype` function per op family returning the dtype the op computes in, and
// the two drivers that build the shared TensorIterator. ops/binary.cpp (CPU) and
// cuda/binary_cuda.cpp supply only the loop, so both devices accept, promote and fail alike.
//
// Promotion: tensor-tensor takes the higher dtype (bool < int64 < float32 < float64); a Scalar only
// matters when it is of a higher category (result_type in tensor_iterator.h). True division of
// integers gives float32. In-place ops compute in the promoted dtype and need it castable to self
// ("result type Float can't be cast to the desired output type Long"); the broadcast shape must be
// self's shape.
#include <initializer_list>
#include <optional>

#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace graft::kernels {

// ---- dtype each op computes in, after its argument checks ----
DType add_dtype(const char* op, const Tensor& a, const Tensor& b, Scalar alpha);   // add, add_
DType sub_dtype(const char* op, const Tensor& a, const Tensor& b, Scalar alpha);   // sub, sub_ (no bool)
DType promote_dtype(const char* op, const Tensor& a, const Tensor& b);             // mul, maximum, minimum
DType div_dtype(const char* op, const Tensor& a, const Tensor& b);                 // true division
DType scalar_dtype(const char* op, const Tensor& a, Scalar b);                     // add/mul with a Scalar
DType sub_scalar_dtype(const char* op, const Tensor& a, Scalar b);                 // sub, sub_, rsub
DType div_scalar_dtype(const char* op, const Tensor& a, Scalar b);                 // div, div_, rdiv
DType pow_dtype(const Tensor& a, const Tensor& b);
// Comparisons and logical ops: the dtype both sides are compared in (the output is bool).
DType compare_dtype(const char* op, const Tensor& a, const Tensor& b);
DType compare_scalar_dtype(const char* op, const Tensor& a, Scalar b);
DType where_dtype(const Tensor& cond, const Tensor& a, const Tensor& b);
void check_masked_fill(const Tensor& x, const Tensor& mask);
DType clamp_dtype(const char* op, const Tensor& x, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);
DType addcmul_dtype(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value);
DType addcdiv_dtype(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value);
void check_lerp(const Tensor& self, const Tensor& end);

// ---- drivers: `run(it)` is the device's loop over the built iterator ----

// A new tensor of dtype r = op(inputs), every input read as r.
template <class Run>
Tensor elementwise_new(const char* op, DType r, std::initializer_list<Tensor> inputs, const Run& run) {
  TensorIterator it(op);
  for (const Tensor& t : inputs) it.add_input(t, r);
  it.build(r);
  run(it);
  return it.output();
}

// self = op(inputs) (inputs usually start with self), computed in the promoted dtype r.
template <class Run>
Tensor elementwise_inplace(const char* op, const Tensor& self, DType r, std::initializer_list<Tensor> inputs,
                           const Run& run) {
  check_inplace_cast(op, r, self);
  if (r == self.dtype()) {
    TensorIterator it(op);
    it.add_output(self);
    for (const Tensor& t : inputs) it.add_input(t, r);
    it.build();
    run(it);
    return self;
  }
  // A wider result (float32 self, float64 other): compute in it and round once into self, as PyTorch.
  check_no_internal_overlap(op, self);
  TensorIterator it(op);
  for (const Tensor& t : inputs) it.add_input(t, r);
  it.build(r);
  GRAFT_CHECK(it.output().sizes() == self.sizes(), op, ": output with shape ", shape_str(self.sizes()),
              " doesn't match the broadcast shape ", shape_str(it.output().sizes()));
  run(it);
  device_copy(self, it.output());
  return self;
}

}  // namespace graft::kernels
