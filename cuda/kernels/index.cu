// Indexing kernels (see index.h). Scatters use atomicAdd, so the order in which repeated indices
// accumulate is not fixed: float results can differ from the CPU (and from run to run) in the
// last bits when an index repeats. Bool "addition" saturates (a || b), as on the CPU.
#include "cuda/kernels/index.h"

#include <type_traits>

#include "cuda/kernels/reduce_common.cuh"

namespace graft::cuda {
using namespace rdetail;
namespace {

__global__ void find_bad_index_kernel(const int64_t* idx, int64_t n, int64_t lo, int64_t last, bool has_ignore,
                                      int64_t ignore, unsigned long long* first) {
  for (int64_t i = global_thread(); i < n; i += global_stride()) {
    int64_t v = idx[i];
    if (has_ignore && v == ignore) continue;
    if (v < lo || v > last) atomicMin(first, static_cast<unsigned long long>(i));
  }
}

__global__ void max_index_kernel(const int64_t* idx, int64_t n, long long* result) {
  long long m = *result;
  for (int64_t i = global_thread(); i < n; i += global_stride()) m = idx[i] > m ? idx[i] : m;
  atomicMax(result, m);
}

// E is an unsigned integer type of the element's size: the copy needs no arithmetic.
template <class E>
__global__ void index_select_kernel(const E* x, E* out, const int64_t* idx, int64_t n, int64_t n_x, int64_t inner,
                                    int64_t total) {
  for (int64_t k = global_thread(); k < total; k += global_stride()) {
    int64_t i = k % inner, r = k / inner, j = r % n, o = r / n;
    out[k] = x[(o * n_x + idx[j]) * inner + i];
  }
}

template <class T>
__device__ __forceinline__ void atomic_accumulate(T* p, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    if (v) *p = true;  // a || v: racing writers all store `true`
  } else if constexpr (std::is_same_v<T, int64_t>) {
    atomicAdd(reinterpret_cast<unsigned long long*>(p), static_cast<unsigned long long>(v));  // wraps as int64
  } else {
    atomicAdd(p, v);
  }
}

template <class T>
__global__ void embedding_backward_kernel(const T* grad, const int64_t* idx, int64_t n, int64_t D,
                                          int64_t padding_idx, T* out) {
  for (int64_t k = global_thread(); k < n * D; k += global_stride()) {
    int64_t i = k / D, c = k % D;
    int64_t row = idx[i];
    if (row == padding_idx) continue;
    atomic_accumulate(out + row * D + c, grad[k]);
  }
}

template <class T>
__global__ void index_add_kernel(const T* src, const int64_t* idx, int64_t n, int64_t n_x, int64_t inner, T* out,
                                 int64_t total) {
  for (int64_t k = global_thread(); k < total; k += global_stride()) {
    int64_t i = k % inner, r = k / inner, j = r % n, o = r / n;
    atomic_accumulate(out + (o * n_x + idx[j]) * inner + i, src[k]);
  }
}

// Offsets of index element k in the two strided operands; along `dim` the index value is used
// for operand a and the position for operand b.
__device__ __forceinline__ void gather_offsets(const GatherGeometry& g, int64_t k, int64_t v, int64_t& a,
                                               int64_t& b) {
  a = 0;
  b = 0;
  for (int d = g.ndim - 1; d >= 0; --d) {
    int64_t c = k % g.sizes[d];
    k /= g.sizes[d];
    a += (d == g.dim ? v : c) * g.a_strides[d];
    b += c * g.b_strides[d];
  }
}

template <class E>
__global__ void gather_kernel(const E* x, const int64_t* idx, E* out, GatherGeometry g) {
  for (int64_t k = global_thread(); k < g.numel; k += global_stride()) {
    int64_t a, b;
    gather_offsets(g, k, idx[k], a, b);
    out[k] = x[a];
  }
}

template <class T>
__global__ void scatter_add_kernel(const T* src, const int64_t* idx, T* out, GatherGeometry g) {
  for (int64_t k = global_thread(); k < g.numel; k += global_stride()) {
    int64_t a, b;
    gather_offsets(g, k, idx[k], a, b);
    atomic_accumulate(out + a, src[b]);
  }
}

__global__ void one_hot_kernel(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out) {
  for (int64_t i = global_thread(); i < n; i += global_stride()) out[i * num_classes + idx[i]] = 1;
}

// Calls f(E{}) with E an unsigned type of `elem_size` bytes (2: bfloat16 and float16, moved as bits).
template <class F>
void with_element_size(int elem_size, const char* launcher, F&& f) {
  switch (elem_size) {
    case 1: f(uint8_t{}); return;
    case 2: f(uint16_t{}); return;
    case 4: f(uint32_t{}); return;
    case 8: f(uint64_t{}); return;
    default: break;
  }
  reduce_area_internal_error(launcher, DType::Bool);
}

}  // namespace

void launch_find_bad_index(const int64_t* idx, int64_t n, int64_t lo, int64_t last, bool has_ignore, int64_t ignore,
                           unsigned long long* first, cudaStream_t stream) {
  if (n == 0) return;
  find_bad_index_kernel<<<grid_for(n), kBlock, 0, stream>>>(idx, n, lo, last, has_ignore, ignore, first);
  check_launch("find_bad_index_kernel");
}

void launch_max_index(const int64_t* idx, int64_t n, long long* result, cudaStream_t stream) {
  if (n == 0) return;
  max_index_kernel<<<grid_for(n), kBlock, 0, stream>>>(idx, n, result);
  check_launch("max_index_kernel");
}

void launch_index_select(const void* x, void* out, int elem_size, const int64_t* idx, int64_t n, int64_t outer,
                         int64_t n_x, int64_t inner, cudaStream_t stream) {
  int64_t total = outer * n * inner;
  if (total == 0) return;
  with_element_size(elem_size, "launch_index_select", [&](auto tag) {
    using E = decltype(tag);
    index_select_kernel<E><<<grid_for(total), kBlock, 0, stream>>>(static_cast<const E*>(x), static_cast<E*>(out),
                                                                  idx, n, n_x, inner, total);
    check_launch("index_select_kernel");
  });
}

void launch_embedding_backward(const void* grad, DType dtype, const int64_t* idx, int64_t n, int64_t D,
                               int64_t padding_idx, void* out, cudaStream_t stream) {
  if (n * D == 0) return;
  with_floating(dtype, "launch_embedding_backward", [&](auto tag) {
    using T = decltype(tag);
    embedding_backward_kernel<T><<<grid_for(n * D), kBlock, 0, stream>>>(static_cast<const T*>(grad), idx, n, D,
                                                                        padding_idx, static_cast<T*>(out));
    check_launch("embedding_backward_kernel");
  });
}

void launch_index_add(const void* src, DType dtype, const int64_t* idx, int64_t n, int64_t outer, int64_t n_x,
                      int64_t inner, void* out, cudaStream_t stream) {
  int64_t total = outer * n * inner;
  if (total == 0) return;
  with_dtype(dtype, "launch_index_add", [&](auto tag) {
    using T = decltype(tag);
    index_add_kernel<T><<<grid_for(total), kBlock, 0, stream>>>(static_cast<const T*>(src), idx, n, n_x, inner,
                                                               static_cast<T*>(out), total);
    check_launch("index_add_kernel");
  });
}

void launch_gather(const void* x, int elem_size, const int64_t* idx, void* out, const GatherGeometry& g,
                   cudaStream_t stream) {
  if (g.numel == 0) return;
  with_element_size(elem_size, "launch_gather", [&](auto tag) {
    using E = decltype(tag);
    gather_kernel<E><<<grid_for(g.numel), kBlock, 0, stream>>>(static_cast<const E*>(x), idx, static_cast<E*>(out),
                                                              g);
    check_launch("gather_kernel");
  });
}

void launch_scatter_add(const void* src, DType dtype, const int64_t* idx, void* out, const GatherGeometry& g,
                        cudaStream_t stream) {
  if (g.numel == 0) return;
  with_dtype(dtype, "launch_scatter_add", [&](auto tag) {
    using T = decltype(tag);
    scatter_add_kernel<T><<<grid_for(g.numel), kBlock, 0, stream>>>(static_cast<const T*>(src), idx,
                                                                   static_cast<T*>(out), g);
    check_launch("scatter_add_kernel");
  });
}

void launch_one_hot(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, cudaStream_t stream) {
  if (n == 0 || num_classes == 0) return;
  one_hot_kernel<<<grid_for(n), kBlock, 0, stream>>>(idx, n, num_classes, out);
  check_launch("one_hot_kernel");
}

}  // namespace graft::cuda
