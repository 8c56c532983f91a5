#pragma once
// The device-independent half of the matrix products (mm, bmm, mm_accumulate_, matmul with
// torch.matmul semantics, linear): argument checks, error messages, output shapes, 1-D and
// broadcast-batch handling, and the description of each operand as a strided matrix. Every op
// then reduces to one device core,
//   out[batch..., n, m] = a[batch..., n, k] @ b[batch..., k, m] (+ bias[m]), or out += a @ b,
// with a and b padded to out's rank: oneDNN / blocked loops on the CPU (ops/linalg.cpp), cuBLAS on
// CUDA (cuda/linalg_cuda.cpp). Sharing this half is what makes both devices accept the same
// arguments and word their errors the same way.
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace graft::kernels {

// A strided view of a (batched) matrix operand without a TensorImpl: reading `t`'s data with
// these sizes and strides. Building one costs no allocation beyond the two small shapes.
struct MatOperand {
  Tensor t;  // owns the data; t.data_ptr() is the first element
  Shape sizes;
  Shape strides;
  int64_t rows() const { return sizes[sizes.size() - 2]; }
  int64_t cols() const { return sizes.back(); }
  int64_t row_stride() const { return strides[strides.size() - 2]; }
  int64_t col_stride() const { return strides.back(); }
};

// Pads `op` with leading size-1 dims up to `ndim`.
void pad_to(MatOperand& op, size_t ndim);
// A batch dim that was expanded (stride 0, size > 1) reads one matrix over and over: describe it
// as a size-1 dim instead, which the cores then broadcast like any other size-1 batch dim.
void unexpand_batch(MatOperand& op);
// Replaces the operand by a contiguous copy of what it describes, on its device (undispatched).
void materialize(MatOperand& op);
// Strides of size-1 dims are arbitrary in graft, but BLAS libraries check every stride: rewrites
// them so a row or column vector still reads as row- or column-major with a valid leading
// dimension, and a size-1 batch dim never overlaps the dims inside it.
void normalize_strides(MatOperand& op);
// What oneDNN's and cuBLAS's fast paths read in place: one unit stride in the matrix and a leading
// dimension that does not overlap rows (row-major) or columns (column-major).
inline bool row_major(const MatOperand& op) { return op.col_stride() == 1 && op.row_stride() >= op.cols(); }
inline bool col_major(const MatOperand& op) { return op.row_stride() == 1 && op.col_stride() >= op.rows(); }
// normalize_strides, then a contiguous copy where the matrix is neither row- nor column-major
// (steps in both dims, stride-0 rows or columns of an expanded view).
void prepare_blas_operand(MatOperand& op);

struct MatmulBackend {
  // out (contiguous, `out_sizes` = batch + [n, m]) = a @ b (+ bias), or += a @ b when accumulate.
  void (*core)(MatOperand a, MatOperand b, const Shape& out_sizes, const Tensor& out, const Tensor& bias,
               bool accumulate);
  // A contiguous copy on the tensor's device, without going through the dispatcher's modes.
  Tensor (*contiguous)(const Tensor& t);
};

Tensor mm_with(const MatmulBackend& be, const Tensor& a, const Tensor& b);
Tensor mm_accumulate_with(const MatmulBackend& be, const Tensor& self, const Tensor& a, const Tensor& b);
Tensor bmm_with(const MatmulBackend& be, const Tensor& a, const Tensor& b);
Tensor matmul_with(const MatmulBackend& be, const Tensor& a, const Tensor& b);
Tensor linear_with(const MatmulBackend& be, const Tensor& x, const Tensor& w, const Tensor& bias);

}  // namespace graft::kernels
