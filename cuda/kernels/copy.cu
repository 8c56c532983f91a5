// Device copies with dtype conversion, fills, arange and tril/triu.
#include "cuda/kernels/copy.h"

#include "cuda/kernels/elementwise.cuh"

namespace graft::cuda {
namespace {

template <class D, class S>
struct CastOp {
  // As the CPU's cast_value (ops/copy.cpp): 16-bit floats go through float, bool through int.
  __device__ D operator()(S v) const {
    constexpr bool s16 = std::is_same_v<S, BFloat16> || std::is_same_v<S, Half>;
    constexpr bool d16 = std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>;
    if constexpr (std::is_same_v<D, bool>) {
      if constexpr (s16) return static_cast<float>(v) != 0.0f;
      else return v != S(0);
    } else if constexpr (std::is_same_v<S, bool>) {
      return static_cast<D>(static_cast<int>(v));
    } else if constexpr (d16) {
      return D(static_cast<float>(v));
    } else {
      return static_cast<D>(v);
    }
  }
};

template <class T>
struct FillOp {
  T value;
  __device__ T operator()() const { return value; }
};

// out[n]: out[i] = start + i * step in double, then converted.
template <class T>
__global__ void __launch_bounds__(kElemThreads) arange_kernel(T* out, int64_t n, double start, double step) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < n; i += stride) {
    // Separate roundings (no fused multiply-add) so every value equals the CPU's.
    double v = __dadd_rn(start, __dmul_rn(static_cast<double>(i), step));
    if constexpr (std::is_same_v<T, bool>) out[i] = v != 0.0;
    else if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) out[i] = T(static_cast<float>(v));
    else out[i] = static_cast<T>(v);
  }
}

// out = src (both dense [batch, rows, cols]) with the elements outside the triangle zeroed; U is
// an unsigned integer of the element's size, so every dtype moves as bits.
template <class U>
__global__ void __launch_bounds__(kElemThreads)
    triangle_kernel(const U* src, U* out, int64_t n, int64_t rows, int64_t cols, int64_t diagonal, bool lower) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = tid; e < n; e += stride) {
    const int64_t j = e % cols, i = (e / cols) % rows;
    const bool keep = lower ? j <= i + diagonal : j >= i + diagonal;
    out[e] = keep ? src[e] : U(0);
  }
}

}  // namespace

void launch_triangle(DType dtype, const void* src, void* out, int64_t batch, int64_t rows, int64_t cols,
                     int64_t diagonal, bool lower, cudaStream_t stream) {
  const int64_t n = batch * rows * cols;
  if (n <= 0) return;
  auto run = [&]<class U>() {
    triangle_kernel<U><<<grid_for(n), kElemThreads, 0, stream>>>(static_cast<const U*>(src), static_cast<U*>(out), n,
                                                                 rows, cols, diagonal, lower);
  };
  switch (element_size(dtype)) {
    case 1: run.template operator()<uint8_t>(); break;
    case 2: run.template operator()<uint16_t>(); break;
    case 4: run.template operator()<uint32_t>(); break;
    case 8: run.template operator()<uint64_t>(); break;
    default: elementwise_internal_error("launch_triangle", dtype, 0);
  }
  check_launch(lower ? "tril" : "triu");
}

void launch_copy(DType dst_dtype, DType src_dtype, const ElementwiseGeometry& g, cudaStream_t stream) {
  visit_dtype(dst_dtype, [&]<class D>() {
    visit_dtype(src_dtype, [&]<class S>() { launch_elementwise<D, S>(g, CastOp<D, S>{}, stream, "copy"); });
  });
}

void launch_fill(DType dtype, const ElementwiseGeometry& g, ScalarArg value, cudaStream_t stream) {
  visit_dtype(dtype, [&]<class T>() { launch_elementwise<T>(g, FillOp<T>{scalar_as<T>(value)}, stream, "fill"); });
}

void launch_arange(DType dtype, void* out, int64_t n, double start, double step, cudaStream_t stream) {
  if (n <= 0) return;
  visit_dtype(dtype, [&]<class T>() {
    arange_kernel<T><<<grid_for(n), kElemThreads, 0, stream>>>(static_cast<T*>(out), n, start, step);
    check_launch("arange");
  });
}

}  // namespace graft::cuda
