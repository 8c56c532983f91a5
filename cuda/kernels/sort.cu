// topk: one thread block per row. Every element's rank is the number of elements of its row that
// come before it in the total order (value first, NaN above every number, then index), so ranks
// are distinct and the elements of rank < k are written straight to their place, best first,
// with no sort and no synchronisation beyond loading the row. A row of up to kSharedLen elements
// is staged in shared memory in its compute type (math::opmath_t: float for bfloat16/float16,
// exact), longer rows are read from global memory. The work is len^2 / blockDim comparisons per
// thread: meant for rows of vocabulary size (a few thousand at most), where it needs neither a
// radix select nor scratch memory.
//
// Ties therefore come out by ascending index, where the CPU follows PyTorch's CPU order
// (ops/sort.cpp): values agree on both devices, the indices of tied values may not.
#include "cuda/kernels/sort.h"

#include "cuda/kernels/elementwise.cuh"

namespace graft::cuda {
namespace {

constexpr int kSortThreads = 256;
constexpr int64_t kSharedLen = 4096;

template <class A>
__device__ __forceinline__ bool nan_of(A v) {
  if constexpr (std::is_floating_point_v<A>) return v != v;
  else return false;
}

// Whether (a, ia) comes before (b, ib): NaN first for largest, last for smallest (it counts as
// larger than every number), equal values (two NaNs too) by index.
template <bool Largest, class A>
__device__ __forceinline__ bool before(A a, int64_t ia, A b, int64_t ib) {
  const bool na = nan_of(a), nb = nan_of(b);
  if (na && nb) return ia < ib;
  if (na || nb) return Largest ? na : nb;
  if (Largest ? a > b : a < b) return true;
  return a == b && ia < ib;
}

template <class T, bool Largest>
__global__ void __launch_bounds__(kSortThreads)
    topk_kernel(const T* rows, int64_t len, int64_t k, int64_t inner, T* values, int64_t* indices) {
  using A = math::opmath_t<T>;
  extern __shared__ __align__(16) unsigned char smem[];
  A* staged = reinterpret_cast<A*>(smem);
  const int64_t r = blockIdx.x;
  const T* row = rows + r * len;
  const bool shared = len <= kSharedLen;
  if (shared) {
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) staged[j] = static_cast<A>(row[j]);
    __syncthreads();
  }
  auto at = [&](int64_t j) { return shared ? staged[j] : static_cast<A>(row[j]); };
  const int64_t out = (r / inner) * k * inner + r % inner;
  for (int64_t j = threadIdx.x; j < len; j += blockDim.x) {
    const A v = at(j);
    int64_t rank = 0;
    for (int64_t i = 0; i < len && rank < k; ++i) rank += before<Largest>(at(i), i, v, j) ? 1 : 0;
    if (rank < k) {
      if (values) values[out + rank * inner] = row[j];
      indices[out + rank * inner] = j;
    }
  }
}

}  // namespace

void launch_topk(DType dtype, const void* rows, int64_t n_rows, int64_t len, int64_t k, int64_t inner, bool largest,
                 void* values, int64_t* indices, cudaStream_t stream) {
  if (n_rows <= 0 || k <= 0) return;
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      elementwise_internal_error("launch_topk", dtype, 0);
    } else {
      using A = math::opmath_t<T>;
      const size_t smem = len <= kSharedLen ? static_cast<size_t>(len) * sizeof(A) : 0;
      const auto* src = static_cast<const T*>(rows);
      auto* vout = static_cast<T*>(values);
      const auto grid = static_cast<unsigned int>(n_rows);
      if (largest) topk_kernel<T, true><<<grid, kSortThreads, smem, stream>>>(src, len, k, inner, vout, indices);
      else topk_kernel<T, false><<<grid, kSortThreads, smem, stream>>>(src, len, k, inner, vout, indices);
      check_launch("topk");
    }
  });
}

}  // namespace graft::cuda
