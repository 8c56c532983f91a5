#pragma once
// Typed cuBLAS GEMM for the CUDA matrix products and convolution (cuda/linalg_cuda.cpp,
// cuda/conv_cuda.cpp). The interface is cuBLAS's own, column-major one; callers map their
// row-major products onto it and say how in a comment next to each call:
//   row-major C[n, m] = A[n, k] @ B[k, m]  is  column-major C^T[m, n] = B^T[m, k] @ A^T[k, n],
// so cuBLAS gets (M, N, K) = (m, n, k), B as its first operand and A as its second. A row-major
// matrix with row stride ld, read column-major, is its own transpose with leading dimension ld.
// float32 honours allow_tf32() through the handle's math mode (set by cublas_handle()).
// bfloat16 and float16 run cublasGemmEx on the tensor cores with float32 compute: the 16-bit
// operands are exact in float, the products are summed in float (the handle disallows cuBLAS's
// reduced-precision split-K reductions), alpha * AB + beta * C is formed in float, and each
// element of C is rounded once, as the CPU's "compute in float, store once" gives.
#include <climits>
#include <cstdint>
#include <type_traits>

#include "cuda/cuda_context.h"
#include "runtime/half_types.h"

namespace graft::cuda {

namespace detail {
inline int gemm_int(int64_t v, const char* what) {
  GRAFT_CHECK(v >= 0 && v <= INT_MAX, "cuBLAS GEMM: ", what, " = ", v, " does not fit in a 32-bit int");
  return static_cast<int>(v);
}

inline void gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const float* alpha, const float* a, int lda, long long sa, const float* b, int ldb,
                      long long sb, const float* beta, float* c, int ldc, long long sc, int batch) {
  if (batch == 1)
    GRAFT_CUBLAS_CHECK(cublasSgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  else
    GRAFT_CUBLAS_CHECK(
        cublasSgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch));
}

inline void gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const double* alpha, const double* a, int lda, long long sa, const double* b, int ldb,
                      long long sb, const double* beta, double* c, int ldc, long long sc, int batch) {
  if (batch == 1)
    GRAFT_CUBLAS_CHECK(cublasDgemm(h, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc));
  else
    GRAFT_CUBLAS_CHECK(
        cublasDgemmStridedBatched(h, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch));
}

// 16-bit operands (type: CUDA_R_16BF or CUDA_R_16F), float32 alpha, beta and accumulation.
inline void gemm_call_16(cublasHandle_t h, cudaDataType_t type, cublasOperation_t ta, cublasOperation_t tb, int m,
                         int n, int k, const float* alpha, const void* a, int lda, long long sa, const void* b,
                         int ldb, long long sb, const float* beta, void* c, int ldc, long long sc, int batch) {
  if (batch == 1)
    GRAFT_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, alpha, a, type, lda, b, type, ldb, beta, c, type, ldc,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  else
    GRAFT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, alpha, a, type, lda, sa, b, type, ldb, sb, beta,
                                                  c, type, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

inline void gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const float* alpha, const BFloat16* a, int lda, long long sa, const BFloat16* b, int ldb,
                      long long sb, const float* beta, BFloat16* c, int ldc, long long sc, int batch) {
  gemm_call_16(h, CUDA_R_16BF, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}

inline void gemm_call(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                      const float* alpha, const Half* a, int lda, long long sa, const Half* b, int ldb, long long sb,
                      const float* beta, Half* c, int ldc, long long sc, int batch) {
  gemm_call_16(h, CUDA_R_16F, ta, tb, m, n, k, alpha, a, lda, sa, b, ldb, sb, beta, c, ldc, sc, batch);
}
}  // namespace detail

// The type of alpha and beta: the compute type, float for the 16-bit floats.
template <class T> struct GemmScale { using type = T; };
template <> struct GemmScale<BFloat16> { using type = float; };
template <> struct GemmScale<Half> { using type = float; };
template <class T> using gemm_scale_t = typename GemmScale<T>::type;

// Column-major, as cublas<t>gemmStridedBatched: for each i < batch,
//   C + i*sc  =  alpha * op_a(A + i*sa) @ op_b(B + i*sb)  +  beta * (C + i*sc)
// with op_a(A) [m, k], op_b(B) [k, n], C [m, n]. T is float, double, BFloat16 or Half (alpha and
// beta in gemm_scale_t<T>: float for the 16-bit types). On the current device's
// handle (bound to the current stream). batch 1 uses plain gemm; larger batches go in slices of
// at most 65535, the grid limit some cuBLAS versions have for batched kernels.
template <class T>
void gemm_strided_batched(cublasOperation_t ta, cublasOperation_t tb, int64_t m, int64_t n, int64_t k,
                          std::type_identity_t<gemm_scale_t<T>> alpha, const T* a, int64_t lda, int64_t sa, const T* b,
                          int64_t ldb, int64_t sb, std::type_identity_t<gemm_scale_t<T>> beta, T* c, int64_t ldc,
                          int64_t sc, int64_t batch) {
  if (batch == 0 || m == 0 || n == 0) return;
  cublasHandle_t h = cublas_handle();
  const int im = detail::gemm_int(m, "m"), in = detail::gemm_int(n, "n"), ik = detail::gemm_int(k, "k");
  const int ilda = detail::gemm_int(lda, "lda"), ildb = detail::gemm_int(ldb, "ldb"), ildc = detail::gemm_int(ldc, "ldc");
  constexpr int64_t kMaxBatch = 65535;
  for (int64_t b0 = 0; b0 < batch; b0 += kMaxBatch) {
    const int nb = static_cast<int>(batch - b0 < kMaxBatch ? batch - b0 : kMaxBatch);
    detail::gemm_call(h, ta, tb, im, in, ik, &alpha, a + b0 * sa, ilda, sa, b + b0 * sb, ildb, sb, &beta,
                      c + b0 * sc, ildc, sc, nb);
  }
}

}  // namespace graft::cuda
