#pragma once
// Host side of the CUDA elementwise ops (g++ only). The plan is the shared kernels::TensorIterator
// (ops/tensor_iterator.h): the same checks, broadcasting, dtype conversion, overlap separation and
// coalescing, and so the same error messages, as on the CPU. This file only turns that plan into
// the ElementwiseGeometry the kernels in cuda/kernels/ take, and supplies the device copy the
// iterator makes its conversion and overlap copies with:
//   kernels::TensorIterator it("add");
//   it.add_input(a, r).add_input(b, r).build(r);          // allocates the output on a's device
//   launch_binary(..., geometry_of(it), current_stream());
//   return it.output();
// Callers hold a DeviceGuard for the operands' device while building (outputs are allocated here).
#include "cuda/kernels/elementwise.h"
#include "ops/tensor_iterator.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace graft::cuda {

// The iterator's plan with strides in elements of each operand's dtype, as the kernels index.
ElementwiseGeometry geometry_of(const kernels::TensorIterator& it);

ScalarArg to_scalar_arg(const Scalar& s);

// A view of t's storage with other sizes/strides (t's offset unless given), made without the dispatcher so
// no autograd history or version bump comes with it.
Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides);
Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides, int64_t offset);

// dst = src on one CUDA device, src broadcast to dst's shape and converted to dst's dtype. dst may
// be strided; src may overlap dst. Asynchronous on the current stream.
void copy_on_device(const Tensor& dst, const Tensor& src);

}  // namespace graft::cuda
