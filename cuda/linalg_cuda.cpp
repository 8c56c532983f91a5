// CUDA kernels for the matrix products: mm, bmm, mm_accumulate_, matmul (torch.matmul semantics)
// and linear. Argument checks and messages mirror ops/linalg.cpp, whose kernels these are.
//
// Every op reduces to the same core as on the CPU:
//   out[batch..., n, m] = a[batch..., n, k] @ b[batch..., k, m]  (+ bias[m])  (or out += a @ b)
// with a and b padded to out's rank and their batch dims broadcast.
//   float32 / float64 -> cuBLAS (S/D gemm, strided-batched where the batch layout allows),
//                        reading transposed operands in place;
//   int64             -> the tiled kernel in kernels/matmul_int.cu, which reads any strides.
// Bias: the output is first filled with the bias broadcast over rows (kernels/matmul_int.cu),
// then the GEMM runs with beta = 1. This keeps one GEMM path for all dtypes, is what
// mm_accumulate_ needs anyway, and costs one extra write of the output next to the GEMM.
#include <algorithm>
#include <memory>
#include <type_traits>

#include "cuda/cublas_gemm.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/matmul_int.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

// A strided view of a (batched) matrix operand without a TensorImpl: reading `t`'s data with
// these sizes and strides.
struct MatOperand {
  Tensor t;  // owns the data; t.data_ptr() is the first element
  Shape sizes;
  Shape strides;
  int64_t rows() const { return sizes[sizes.size() - 2]; }
  int64_t cols() const { return sizes.back(); }
  int64_t row_stride() const { return strides[strides.size() - 2]; }
  int64_t col_stride() const { return strides.back(); }
};

void pad_to(MatOperand& op, size_t ndim) {
  size_t extra = ndim - op.sizes.size();
  op.sizes.insert(op.sizes.begin(), extra, 1);
  op.strides.insert(op.strides.begin(), extra, 0);
}

// An expanded batch dim (stride 0) reads one matrix over and over: a size-1 dim says the same.
void unexpand_batch(MatOperand& op) {
  for (size_t d = 0; d + 2 < op.sizes.size(); ++d)
    if (op.strides[d] == 0) op.sizes[d] = 1;
}

// A contiguous device copy of what `op` describes (same sizes), through the public clone.
void materialize(MatOperand& op) {
  Tensor view(std::make_shared<TensorImpl>(op.t.impl()->storage(), op.t.dtype(), op.sizes, op.strides,
                                           op.t.storage_offset()));
  op.t = ops::contiguous(view);
  op.strides = op.t.strides();
}

// Strides of size-1 matrix dims are arbitrary in graft: rewrite them so that a row or column
// vector still reads as row- or column-major with a valid leading dimension.
void normalize_matrix_strides(MatOperand& op) {
  size_t nd = op.sizes.size();
  int64_t &sr = op.strides[nd - 2], &sc = op.strides[nd - 1];
  int64_t r = op.sizes[nd - 2], c = op.sizes[nd - 1];
  if (r == 1 && c == 1) {
    sr = 1;
    sc = 1;
  } else if (r == 1) {
    sr = sc == 1 ? c : 1;
  } else if (c == 1) {
    sc = sr == 1 ? r : 1;
  }
}

// cuBLAS reads each matrix as row-major (unit column stride, row stride >= cols) or column-major
// (unit row stride, column stride >= rows); anything else (steps in both dims, stride-0 rows or
// columns of an expanded view) is copied first.
bool row_major(const MatOperand& op) { return op.col_stride() == 1 && op.row_stride() >= op.cols(); }
bool col_major(const MatOperand& op) { return op.row_stride() == 1 && op.col_stride() >= op.rows(); }

void prepare_for_cublas(MatOperand& op) {
  normalize_matrix_strides(op);
  if (!row_major(op) && !col_major(op)) {
    materialize(op);
    normalize_matrix_strides(op);
  }
}

// Element offset of the operand's matrix for each batch of `batch` (row-major order), and
// whether they step by a single stride (then one strided-batched call covers all of them).
struct BatchOffsets {
  std::vector<int64_t> off;
  bool uniform = true;
  int64_t stride = 0;
};

BatchOffsets batch_offsets(const MatOperand& op, const Shape& batch) {
  BatchOffsets r;
  int64_t nbatch = shape_numel(batch);
  r.off.resize(static_cast<size_t>(nbatch));
  size_t nb = batch.size();
  for (int64_t i = 0; i < nbatch; ++i) {
    int64_t rem = i, o = 0;
    for (size_t d = nb; d-- > 0;) {
      int64_t idx = rem % batch[d];
      rem /= batch[d];
      if (op.sizes[d] != 1) o += idx * op.strides[d];
    }
    r.off[static_cast<size_t>(i)] = o;
  }
  if (nbatch > 1) r.stride = r.off[1] - r.off[0];
  for (int64_t i = 0; i < nbatch && r.uniform; ++i)
    if (r.off[static_cast<size_t>(i)] != i * r.stride) r.uniform = false;
  return r;
}

// out (contiguous [batch, n, m]) (+)= a @ b via cuBLAS, with beta = 1 when `accumulate`.
// Row-major C[n, m] = A[n, k] B[k, m] is column-major C^T[m, n] = B^T[m, k] A^T[k, n]:
// cuBLAS (M, N, K) = (m, n, k), first operand b, second a, ldc = m. Both are wanted transposed
// relative to their row-major meaning, so a row-major operand goes in as op N with its row
// stride as leading dimension, a column-major one as op T with its column stride.
template <class T>
void matmul_cublas(MatOperand a, MatOperand b, const Shape& out_sizes, T* out, bool accumulate) {
  prepare_for_cublas(a);
  prepare_for_cublas(b);
  size_t nd = out_sizes.size();
  int64_t n = out_sizes[nd - 2], m = out_sizes[nd - 1], k = a.cols();
  Shape batch(out_sizes.begin(), out_sizes.end() - 2);
  BatchOffsets oa = batch_offsets(a, batch), ob = batch_offsets(b, batch);
  int64_t nbatch = shape_numel(batch);
  bool a_rm = row_major(a), b_rm = row_major(b);
  cublasOperation_t op_b = b_rm ? CUBLAS_OP_N : CUBLAS_OP_T, op_a = a_rm ? CUBLAS_OP_N : CUBLAS_OP_T;
  int64_t ld_b = b_rm ? b.row_stride() : b.col_stride(), ld_a = a_rm ? a.row_stride() : a.col_stride();
  const T* A = static_cast<const T*>(a.t.data_ptr());
  const T* B = static_cast<const T*>(b.t.data_ptr());
  T beta = accumulate ? T(1) : T(0);
  if (oa.uniform && ob.uniform) {
    // C^T[i] (m x n, ld m) = op_b(B[i]) (m x k) @ op_a(A[i]) (k x n), i < nbatch
    cuda::gemm_strided_batched<T>(op_b, op_a, m, n, k, T(1), B, ld_b, ob.stride, A, ld_a, oa.stride, beta, out, m,
                                  n * m, nbatch);
    return;
  }
  // Batch offsets no single stride describes (permuted or partly broadcast batch dims): one
  // GEMM per matrix of the batch.
  for (int64_t i = 0; i < nbatch; ++i) {
    size_t s = static_cast<size_t>(i);
    // C^T[i] (m x n, ld m) = op_b(B[i]) (m x k) @ op_a(A[i]) (k x n)
    cuda::gemm_strided_batched<T>(op_b, op_a, m, n, k, T(1), B + ob.off[s], ld_b, 0, A + oa.off[s], ld_a, 0, beta,
                                  out + i * n * m, m, 0, 1);
  }
}

// int64: the tiled kernel reads any strides, so nothing is copied.
void matmul_int64(const MatOperand& a, const MatOperand& b, const Shape& out_sizes, int64_t* out, bool accumulate,
                  cudaStream_t stream) {
  size_t nd = out_sizes.size();
  int64_t n = out_sizes[nd - 2], m = out_sizes[nd - 1], k = a.cols();
  Shape batch(out_sizes.begin(), out_sizes.end() - 2);
  BatchOffsets oa = batch_offsets(a, batch), ob = batch_offsets(b, batch);
  int64_t nbatch = shape_numel(batch);
  const int64_t* A = static_cast<const int64_t*>(a.t.data_ptr());
  const int64_t* B = static_cast<const int64_t*>(b.t.data_ptr());
  cuda::IntMatStrides sa{oa.stride, a.row_stride(), a.col_stride()}, sb{ob.stride, b.row_stride(), b.col_stride()};
  if (oa.uniform && ob.uniform) {
    // out[i] [n, m] (+)= A[i] [n, k] @ B[i] [k, m]
    cuda::launch_matmul_int64(A, sa, B, sb, out, nbatch, n, k, m, accumulate, stream);
    return;
  }
  sa.batch = sb.batch = 0;
  for (int64_t i = 0; i < nbatch; ++i) {
    size_t s = static_cast<size_t>(i);
    // out[i] [n, m] (+)= A[i] [n, k] @ B[i] [k, m]
    cuda::launch_matmul_int64(A + oa.off[s], sa, B + ob.off[s], sb, out + i * n * m, 1, n, k, m, accumulate, stream);
  }
}

// out (contiguous, `out_sizes` = batch + [n, m]) = a @ b (+ bias), or out += a @ b when `accumulate`.
// a, b have out's rank. bias is 1-D [m], any stride.
void matmul_core(MatOperand a, MatOperand b, const Shape& out_sizes, const Tensor& out, const Tensor& bias,
                 bool accumulate = false) {
  if (out.numel() == 0) return;
  unexpand_batch(a);
  unexpand_batch(b);
  cuda::DeviceGuard guard(out.device().index);
  cudaStream_t stream = cuda::current_stream();
  int64_t m = out_sizes.back(), rows = out.numel() / m;
  bool seeded = accumulate;  // out already holds what the product is added to
  if (bias.defined()) {
    dispatch_dtype(out.dtype(), "matmul", [&]<class T>() {
      if constexpr (!std::is_same_v<T, bool>)
        // out [rows, m] = bias[m] broadcast over rows
        cuda::launch_fill_bias<T>(static_cast<T*>(out.data_ptr()), static_cast<const T*>(bias.data_ptr()),
                                  bias.stride(0), rows, m, 1, stream);
    });
    seeded = true;
  }
  if (a.cols() == 0) {
    // An empty sum: out keeps the bias or what it accumulates into; otherwise zeros.
    if (!seeded) GRAFT_CUDA_CHECK(cudaMemsetAsync(out.data_ptr(), 0, out.nbytes(), stream));
    return;
  }
  switch (out.dtype()) {
    case DType::Float32: matmul_cublas<float>(std::move(a), std::move(b), out_sizes, static_cast<float*>(out.data_ptr()), seeded); break;
    case DType::Float64: matmul_cublas<double>(std::move(a), std::move(b), out_sizes, static_cast<double*>(out.data_ptr()), seeded); break;
    case DType::Int64: matmul_int64(a, b, out_sizes, static_cast<int64_t*>(out.data_ptr()), seeded, stream); break;
    default: GRAFT_ERROR("matmul: unsupported dtype ", out.dtype());
  }
}

// ---- argument checks (as ops/linalg.cpp) ----

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
  GRAFT_CHECK(a.dtype() == b.dtype(), op, ": expected m1 and m2 to have the same dtype, but got: ", a.dtype(),
              " != ", b.dtype(), " (", describe(a), " and ", describe(b), ")");
  GRAFT_CHECK(a.dtype() != kBool, op, ": not implemented for bool tensors (", describe(a), " and ", describe(b), ")");
}

[[noreturn]] void throw_cannot_multiply(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  GRAFT_ERROR(op, ": shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " cannot be multiplied (", ka,
              " != ", kb, ")");
}

MatOperand operand(const Tensor& t) { return MatOperand{t, t.sizes(), t.strides()}; }

// ---- kernels ----

// [n, k] x [k, m] -> [n, m]
Tensor mm_cuda(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "mm");
  GRAFT_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  if (a.size(1) != b.size(0)) throw_cannot_multiply("mm", a, b, a.size(1), b.size(0));
  Shape out_sizes{a.size(0), b.size(1)};
  Tensor out = new_tensor(out_sizes, a.dtype(), a.device());
  matmul_core(operand(a), operand(b), out_sizes, out, Tensor());
  return out;
}

// self [n, m] += a [n, k] @ b [k, m]: GEMM with beta = 1 straight into self.
Tensor mm_accumulate_cuda(const Tensor& self, const Tensor& a, const Tensor& b) {
  check_defined(self, "mm_accumulate_", "self");
  check_operands(a, b, "mm_accumulate_");
  GRAFT_CHECK(a.dim() == 2 && b.dim() == 2, "mm_accumulate_: expected 2-D tensors, got ", shape_str(a.sizes()),
              " and ", shape_str(b.sizes()));
  if (a.size(1) != b.size(0)) throw_cannot_multiply("mm_accumulate_", a, b, a.size(1), b.size(0));
  Shape out_sizes{a.size(0), b.size(1)};
  GRAFT_CHECK(self.sizes() == out_sizes && self.dtype() == a.dtype() && self.is_contiguous(),
              "mm_accumulate_: self must be a contiguous ", a.dtype(), " tensor of shape ", shape_str(out_sizes),
              ", got ", describe(self));
  GRAFT_CHECK(!self.is_alias_of(a) && !self.is_alias_of(b),
              "mm_accumulate_: self must not share memory with the operands (", describe(self), ")");
  matmul_core(operand(a), operand(b), out_sizes, self, Tensor(), /*accumulate=*/true);
  return self;
}

// [B, n, k] x [B, k, m] -> [B, n, m]
Tensor bmm_cuda(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "bmm");
  GRAFT_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  GRAFT_CHECK(a.size(0) == b.size(0), "bmm: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " have different batch sizes (", a.size(0), " != ", b.size(0), ")");
  if (a.size(2) != b.size(1)) throw_cannot_multiply("bmm", a, b, a.size(2), b.size(1));
  Shape out_sizes{a.size(0), a.size(1), b.size(2)};
  Tensor out = new_tensor(out_sizes, a.dtype(), a.device());
  matmul_core(operand(a), operand(b), out_sizes, out, Tensor());
  return out;
}

// torch.matmul: 1-D x 1-D is a dot product; a 1-D left operand gets a leading 1 (removed from
// the result), a 1-D right operand a trailing 1 (removed); batch dims broadcast.
Tensor matmul_cuda(const Tensor& a, const Tensor& b) {
  check_operands(a, b, "matmul");
  GRAFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need to be at least 1-D, but got ",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  MatOperand oa = operand(a), ob = operand(b);
  if (a.dim() == 1) {
    oa.sizes = {1, a.size(0)};
    oa.strides = {a.size(0) * a.stride(0), a.stride(0)};
  }
  if (b.dim() == 1) {
    ob.sizes = {b.size(0), 1};
    ob.strides = {b.stride(0), 1};
  }
  int64_t ka = oa.cols(), kb = ob.rows();
  if (ka != kb) throw_cannot_multiply("matmul", a, b, ka, kb);
  size_t ba = oa.sizes.size() - 2, bb = ob.sizes.size() - 2, nb = std::max(ba, bb);
  Shape core(nb + 2);
  for (size_t i = 0; i < nb; ++i) {
    int64_t sa = i < nb - ba ? 1 : oa.sizes[i - (nb - ba)];
    int64_t sb = i < nb - bb ? 1 : ob.sizes[i - (nb - bb)];
    GRAFT_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: shapes ", shape_str(a.sizes()), " and ",
                shape_str(b.sizes()), " cannot be multiplied: batch dimensions do not broadcast (", sa, " != ", sb,
                " at batch dimension ", i, ")");
    core[i] = sa == 1 ? sb : sa;
  }
  core[nb] = oa.rows();
  core[nb + 1] = ob.cols();
  Shape result(core.begin(), core.begin() + static_cast<std::ptrdiff_t>(nb));
  if (a.dim() > 1) result.push_back(core[nb]);
  if (b.dim() > 1) result.push_back(core[nb + 1]);
  pad_to(oa, nb + 2);
  pad_to(ob, nb + 2);
  // The result has the core's elements in the same order, so the core writes it directly.
  Tensor out = new_tensor(result, a.dtype(), a.device());
  matmul_core(std::move(oa), std::move(ob), core, out, Tensor());
  return out;
}

// x [*, in] @ w[out, in]^T + b[out] -> [*, out]
Tensor linear_cuda(const Tensor& x, const Tensor& w, const Tensor& bias) {
  check_defined(x, "linear", "input");
  check_defined(w, "linear", "weight");
  GRAFT_CHECK(x.dtype() == w.dtype(), "linear: expected m1 and m2 to have the same dtype, but got: ", x.dtype(),
              " != ", w.dtype(), " (input ", describe(x), ", weight ", describe(w), ")");
  GRAFT_CHECK(x.dtype() != kBool, "linear: not implemented for bool tensors (", describe(x), ")");
  GRAFT_CHECK(w.dim() == 2, "linear: expected a 2-D weight [out_features, in_features], got ", shape_str(w.sizes()));
  GRAFT_CHECK(x.dim() >= 1, "linear: expected an input with at least 1 dim, got ", shape_str(x.sizes()));
  int64_t in = x.size(-1), nout = w.size(0);
  GRAFT_CHECK(in == w.size(1), "linear: input ", shape_str(x.sizes()), " and weight ", shape_str(w.sizes()),
              " cannot be multiplied (", in, " != ", w.size(1), ")");
  if (bias.defined()) {
    GRAFT_CHECK(bias.dtype() == x.dtype(), "linear: expected bias of dtype ", x.dtype(), ", got ", describe(bias));
    GRAFT_CHECK(bias.dim() == 1 && bias.size(0) == nout, "linear: expected bias of shape [", nout, "], got ",
                shape_str(bias.sizes()));
  }
  // Fold x's leading dims into rows when one stride walks them all (always for contiguous x).
  Shape lead(x.sizes().begin(), x.sizes().end() - 1);
  int64_t rows = shape_numel(lead);
  MatOperand ox{x, {rows, in}, {0, x.stride(-1)}};
  {
    bool foldable = true;
    int64_t row_stride = 0, expected = -1;
    for (int64_t d = x.dim() - 2; d >= 0; --d) {
      if (x.size(d) == 1) continue;
      if (x.stride(d) == 0) foldable = false;  // expanded rows: one stride cannot repeat them
      if (expected < 0)
        row_stride = x.stride(d);
      else if (x.stride(d) != expected)
        foldable = false;
      expected = x.stride(d) * x.size(d);
    }
    ox.strides[0] = row_stride == 0 ? in : row_stride;  // 0 only when there is at most one row
    if (!foldable && rows > 0) {
      Tensor xc = ops::contiguous(x);
      ox = MatOperand{xc, {rows, in}, {in, 1}};
    }
  }
  Shape out_sizes = lead;
  out_sizes.push_back(nout);
  Tensor out = new_tensor(out_sizes, x.dtype(), x.device());
  MatOperand ow{w, {in, nout}, {w.stride(1), w.stride(0)}};  // w^T, no copy
  matmul_core(std::move(ox), std::move(ow), {rows, nout}, out, bias);
  return out;
}

}  // namespace

GRAFT_KERNEL("mm", CUDA, mm_cuda);
GRAFT_KERNEL("bmm", CUDA, bmm_cuda);
GRAFT_KERNEL("mm_accumulate_", CUDA, mm_accumulate_cuda);
GRAFT_KERNEL("matmul", CUDA, matmul_cuda);
GRAFT_KERNEL("linear", CUDA, linear_cuda);

}  // namespace kernels
}  // namespace graft
