// int64 GEMM and bias broadcast for the CUDA matrix products (see matmul_int.h).
#include "cuda/cuda_context.h"
#include "cuda/kernels/matmul_int.h"

namespace graft::cuda {
namespace {

constexpr int kTile = 16;

// One 16x16 tile of c per block (threadIdx.x walks columns j, threadIdx.y rows i), marching over
// k in 16-wide slabs staged in shared memory. Row tiles and batches beyond the grid are covered
// by block-uniform loops, so every thread reaches every __syncthreads().
// Accumulates in uint64_t: signed overflow is undefined in C++, unsigned wraps like the CPU result.
__global__ void matmul_int64_kernel(const int64_t* __restrict__ a, IntMatStrides sa, const int64_t* __restrict__ b,
                                    IntMatStrides sb, int64_t* __restrict__ c, int64_t batch, int64_t n, int64_t k,
                                    int64_t m, bool accumulate) {
  __shared__ uint64_t ta[kTile][kTile];      // a[i0 + y, k0 + x]
  __shared__ uint64_t tb[kTile][kTile + 1];  // b[k0 + y, j0 + x]; +1 keeps column reads conflict-free
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kTile + tx;
  for (int64_t bi = blockIdx.z; bi < batch; bi += gridDim.z) {
    const int64_t* ab = a + bi * sa.batch;
    const int64_t* bb = b + bi * sb.batch;
    int64_t* cb = c + bi * n * m;
    for (int64_t i0 = static_cast<int64_t>(blockIdx.y) * kTile; i0 < n; i0 += static_cast<int64_t>(gridDim.y) * kTile) {
      const int64_t i = i0 + ty;
      uint64_t acc = 0;
      for (int64_t k0 = 0; k0 < k; k0 += kTile) {
        ta[ty][tx] = (i < n && k0 + tx < k) ? static_cast<uint64_t>(ab[i * sa.row + (k0 + tx) * sa.col]) : 0;
        tb[ty][tx] = (k0 + ty < k && j < m) ? static_cast<uint64_t>(bb[(k0 + ty) * sb.row + j * sb.col]) : 0;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < kTile; ++kk) acc += ta[ty][kk] * tb[kk][tx];
        __syncthreads();
      }
      if (i < n && j < m) {
        int64_t* out = cb + i * m + j;
        *out = accumulate ? static_cast<int64_t>(static_cast<uint64_t>(*out) + acc) : static_cast<int64_t>(acc);
      }
    }
  }
}

template <class T>
__global__ void fill_bias_kernel(T* __restrict__ out, const T* __restrict__ bias, int64_t bias_stride, int64_t channels,
                                 int64_t inner, int64_t total) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x)
    out[idx] = bias[((idx / inner) % channels) * bias_stride];
}

}  // namespace

void launch_matmul_int64(const int64_t* a, IntMatStrides sa, const int64_t* b, IntMatStrides sb, int64_t* c,
                         int64_t batch, int64_t n, int64_t k, int64_t m, bool accumulate, cudaStream_t stream) {
  if (batch == 0 || n == 0 || m == 0) return;
  const int64_t col_tiles = (m + kTile - 1) / kTile, row_tiles = (n + kTile - 1) / kTile;
  GRAFT_CHECK(col_tiles <= 0x7fffffff, "matmul: int64 matmul with ", m, " columns is too large for one launch");
  // gridDim.y/z are limited to 65535; the kernel loops over what the grid does not cover.
  dim3 grid(static_cast<unsigned>(col_tiles), static_cast<unsigned>(row_tiles < 65535 ? row_tiles : 65535),
            static_cast<unsigned>(batch < 65535 ? batch : 65535));
  dim3 block(kTile, kTile);
  matmul_int64_kernel<<<grid, block, 0, stream>>>(a, sa, b, sb, c, batch, n, k, m, accumulate);
  check_launch("matmul_int64_kernel");
}

template <class T>
void launch_fill_bias(T* out, const T* bias, int64_t bias_stride, int64_t outer, int64_t channels, int64_t inner,
                      cudaStream_t stream) {
  const int64_t total = outer * channels * inner;
  if (total == 0) return;
  fill_bias_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(out, bias, bias_stride, channels, inner, total);
  check_launch("fill_bias_kernel");
}

template void launch_fill_bias<float>(float*, const float*, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
template void launch_fill_bias<double>(double*, const double*, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
template void launch_fill_bias<int64_t>(int64_t*, const int64_t*, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
template void launch_fill_bias<BFloat16>(BFloat16*, const BFloat16*, int64_t, int64_t, int64_t, int64_t, cudaStream_t);
template void launch_fill_bias<Half>(Half*, const Half*, int64_t, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace graft::cuda
