#pragma once
// Host side of the CUDA elementwise ops (g++ only): the device-agnostic half of the CPU's
// TensorIterator, producing an ElementwiseGeometry for the kernels in cuda/kernels/.
//
// ops/tensor_iterator.h cannot be reused as is: its dtype conversion and overlap copies run CPU
// loops on the operands' memory. CudaIter keeps its contract (same use, same checks, same error
// messages) and does those copies on the device instead:
//   CudaIter it("add");
//   it.add_input(a, r).add_input(b, r).build(r);          // allocates the output on a's device
//   launch_binary(..., it.geometry(), current_stream());
//   return it.output();
// Invariants (as TensorIterator's):
// - Operand 0 is the output, inputs follow (at most 3). An allocated output is contiguous with the
//   broadcast shape of the inputs; a given output must have exactly that shape and no stride-0 dim.
// - An input added with a dtype is converted first (a contiguous device copy), so kernels see
//   exactly the dtypes they are instantiated for. When every operand already has its dtype, the
//   only allocation is the output.
// - An input that overlaps the output without lying exactly on it is copied first.
// - The geometry's dims are innermost first, size-1 dims dropped, mergeable dims merged, a given
//   strided output walked in its memory order. All operands contiguous with one shape: one flat dim.
// Callers hold a DeviceGuard for the operands' device while building (outputs are allocated here).
#include <array>

#include "cuda/kernels/elementwise.h"
#include "runtime/scalar.h"
#include "runtime/tensor.h"

namespace graft::cuda {

class CudaIter {
 public:
  // `op` names the op in error messages; it must outlive the iterator (pass a string literal).
  explicit CudaIter(const char* op) : op_(op) {}
  CudaIter(const CudaIter&) = delete;
  CudaIter& operator=(const CudaIter&) = delete;

  CudaIter& add_output(const Tensor& out);
  CudaIter& add_input(const Tensor& in);
  CudaIter& add_input(const Tensor& in, DType as);
  // Allocates the output (of `out_dtype`) unless one was given.
  CudaIter& build(DType out_dtype);
  // For a given output. With no inputs at all this describes the output alone (fills).
  CudaIter& build();

  const Tensor& output() const { return ops_[0]; }
  const Tensor& input(int i) const { return ops_[1 + i]; }
  int64_t numel() const { return geom_.numel; }
  const ElementwiseGeometry& geometry() const { return geom_; }

 private:
  void build_impl(bool allocate, DType out_dtype);
  bool try_flat(bool allocate, DType out_dtype);
  void separate_overlapping_inputs();
  void reorder_by_output();
  void coalesce();
  void finish();

  const char* op_;
  int nops_ = 1;
  bool have_output_ = false;
  std::array<Tensor, kMaxOperands> ops_;
  ElementwiseGeometry geom_;
};

ScalarArg to_scalar_arg(const Scalar& s);

// A view of t's storage with other sizes/strides (same offset), made without the dispatcher so
// no autograd history or version bump comes with it.
Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides);

// dst = src on one CUDA device, src broadcast to dst's shape and converted to dst's dtype. dst may
// be strided; src may overlap dst. Asynchronous on the current stream.
void copy_on_device(const Tensor& dst, const Tensor& src);
// A contiguous copy of the CUDA tensor t in `dtype`, or t itself when it already is one.
Tensor contiguous_cuda(const Tensor& t, DType dtype);

}  // namespace graft::cuda
