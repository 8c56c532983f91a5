// CUDA kernels for the matrix products: mm, bmm, mm_accumulate_, matmul (torch.matmul semantics)
// and linear. Argument checks, messages and shapes are ops/matmul_plan's, shared with the CPU.
//
// Every op reduces to the same core as on the CPU:
//   out[batch..., n, m] = a[batch..., n, k] @ b[batch..., k, m]  (+ bias[m])  (or out += a @ b)
// with a and b padded to out's rank and their batch dims broadcast.
//   float32 / float64 -> cuBLAS (S/D gemm, strided-batched where the batch layout allows),
//                        reading transposed operands in place;
//   bfloat16 / float16 -> the same calls through cublasGemmEx: tensor cores, float32 compute,
//                        one rounding per output element (cuda/cublas_gemm.h). These ops are
//                        `reduced: native cuda` in codegen/ops/linalg.yaml: no float copies.
//   int64             -> the tiled kernel in kernels/matmul_int.cu, which reads any strides.
// Bias: the output is first filled with the bias broadcast over rows (kernels/matmul_int.cu),
// then the GEMM runs with beta = 1. This keeps one GEMM path for all dtypes, is what
// mm_accumulate_ needs anyway, and costs one extra write of the output next to the GEMM.
#include <algorithm>
#include <memory>
#include <type_traits>

#include "cuda/cublas_gemm.h"
#include "cuda/cuda_context.h"
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_parts.h"
#include "cuda/kernels/matmul_int.h"
#include "ops/kernel_utils.h"
#include "ops/matmul_plan.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

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
  prepare_blas_operand(a);
  prepare_blas_operand(b);
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
  using S = cuda::gemm_scale_t<T>;
  const S beta = accumulate ? S(1) : S(0);
  if (oa.uniform && ob.uniform) {
    // C^T[i] (m x n, ld m) = op_b(B[i]) (m x k) @ op_a(A[i]) (k x n), i < nbatch
    cuda::gemm_strided_batched<T>(op_b, op_a, m, n, k, S(1), B, ld_b, ob.stride, A, ld_a, oa.stride, beta, out, m,
                                  n * m, nbatch);
    return;
  }
  // Batch offsets no single stride describes (permuted or partly broadcast batch dims): one
  // GEMM per matrix of the batch.
  for (int64_t i = 0; i < nbatch; ++i) {
    size_t s = static_cast<size_t>(i);
    // C^T[i] (m x n, ld m) = op_b(B[i]) (m x k) @ op_a(A[i]) (k x n)
    cuda::gemm_strided_batched<T>(op_b, op_a, m, n, k, S(1), B + ob.off[s], ld_b, 0, A + oa.off[s], ld_a, 0, beta,
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
                 bool accumulate) {
  if (out.numel() == 0) return;
  unexpand_batch(a);
  unexpand_batch(b);
  cuda::DeviceGuard guard(out.device().index);
  cudaStream_t stream = cuda::current_stream();
  int64_t m = out_sizes.back(), rows = out.numel() / m;
  bool seeded = accumulate;  // out already holds what the product is added to
  if (bias.defined()) {
    dispatch_all_dtypes(out.dtype(), "matmul", [&]<class T>() {
      if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int64_t> ||
                    std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>)
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
    case DType::BFloat16: matmul_cublas<BFloat16>(std::move(a), std::move(b), out_sizes, static_cast<BFloat16*>(out.data_ptr()), seeded); break;
    case DType::Float16: matmul_cublas<Half>(std::move(a), std::move(b), out_sizes, static_cast<Half*>(out.data_ptr()), seeded); break;
    case DType::Int64: matmul_int64(a, b, out_sizes, static_cast<int64_t*>(out.data_ptr()), seeded, stream); break;
    default: GRAFT_ERROR("matmul: unsupported dtype ", out.dtype());
  }
}

Tensor contiguous_on_device(const Tensor& t) { return kernels::contiguous_as(t); }

}  // namespace
}  // namespace kernels

namespace cuda {
// The CUDA part of the shared matmul kernels (ops/matmul_plan.h): the cuBLAS core. The kernels
// themselves are generated from codegen/ops/linalg.yaml's `shared:` lines.
const kernels::MatmulBackend kCudaMatmul{kernels::matmul_core, kernels::contiguous_on_device};
}  // namespace cuda
}  // namespace graft
