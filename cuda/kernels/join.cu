// Strided casting copy and fill for the reduce area (see join.h).
#include "cuda/kernels/join.h"

#include <type_traits>

#include "cuda/kernels/reduce_common.cuh"

namespace graft::cuda {
using namespace rdetail;
namespace {

// Through S's compute type (float for the 16-bit floats, exact), so a 16-bit operand converts
// as a float would; a 16-bit D rounds from float once, as the copy kernels (kernels/copy.cu).
template <class D, class S>
__device__ __forceinline__ D cast_value(S v) {
  using SM = math::opmath_t<S>;
  const SM m = static_cast<SM>(v);
  if constexpr (std::is_same_v<D, bool>) return m != SM(0);
  else if constexpr (std::is_same_v<D, BFloat16> || std::is_same_v<D, Half>) return D(static_cast<float>(m));
  else return static_cast<D>(m);
}

// One thread per element; the row-major index is decomposed into offsets for both operands.
template <class D, class S>
__global__ void strided_copy_kernel(const S* src, D* dst, CopyGeometry g) {
  for (int64_t i = global_thread(); i < g.numel; i += global_stride()) {
    int64_t r = i, so = 0, dof = 0;
    for (int d = g.ndim - 1; d >= 0; --d) {
      int64_t c = r % g.sizes[d];
      r /= g.sizes[d];
      so += c * g.src_strides[d];
      dof += c * g.dst_strides[d];
    }
    dst[dof] = cast_value<D>(src[so]);
  }
}

template <class T>
__global__ void fill_kernel(T* dst, int64_t n, T value) {
  for (int64_t i = global_thread(); i < n; i += global_stride()) dst[i] = value;
}

}  // namespace

void launch_strided_copy(const void* src, DType src_dtype, void* dst, DType dst_dtype, const CopyGeometry& g,
                         cudaStream_t stream) {
  if (g.numel == 0) return;
  with_dtype_or_reduced(dst_dtype, "launch_strided_copy", [&](auto dtag) {
    using D = decltype(dtag);
    with_dtype_or_reduced(src_dtype, "launch_strided_copy", [&](auto stag) {
      using S = decltype(stag);
      strided_copy_kernel<D, S><<<grid_for(g.numel), kBlock, 0, stream>>>(static_cast<const S*>(src),
                                                                          static_cast<D*>(dst), g);
      check_launch("strided_copy_kernel");
    });
  });
}

void launch_fill_dense(void* dst, DType dtype, int64_t n, double value, cudaStream_t stream) {
  if (n == 0) return;
  with_dtype_or_reduced(dtype, "launch_fill_dense", [&](auto tag) {
    using T = decltype(tag);
    T v;
    if constexpr (std::is_same_v<T, bool>) v = value != 0;
    else if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) v = T(static_cast<float>(value));
    else v = static_cast<T>(value);
    fill_kernel<T><<<grid_for(n), kBlock, 0, stream>>>(static_cast<T*>(dst), n, v);
    check_launch("fill_kernel");
  });
}

}  // namespace graft::cuda
