// Device copies with dtype conversion, fills and arange.
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

}  // namespace

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
