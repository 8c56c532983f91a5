#pragma once
// The one device-side elementwise machinery every CUDA elementwise op runs on (nvcc only).
//
//   launch_elementwise<Out, In...>(geometry, functor, stream, "name");
//
// runs out[i] = functor(in0[i], in1[i], ...) over an ElementwiseGeometry built by the glue
// (cuda/elementwise_cuda.h). Two kernels:
// - contiguous: every operand dense with one flat index. Grid-stride over the elements; when every
//   pointer is aligned to a pack of kVec elements, each thread moves whole packs (vector loads and
//   stores), the tail element by element.
// - strided: an OffsetCalc (passed by value) maps the flat index to each operand's element offset
//   through the sizes and per-operand strides (stride 0 broadcasts). 32-bit index division when the
//   element count allows it, because 64-bit division costs several times more on the device.
// Functors are plain structs with a __device__ operator() (no extended lambdas), so they travel to
// the kernel by value. Reads of element i happen before the write of element i in the same thread,
// which is what makes an in-place op (output == input) safe; nothing is marked __restrict__ or read
// through the non-coherent cache for the same reason.
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>
#include <utility>

#include "cuda/kernels/elementwise.h"
#include "ops/math/elementwise_math.h"
#include "ops/scalar_math.h"

namespace graft::cuda {

inline constexpr int kElemThreads = 256;
inline constexpr int kVec = 4;

// Blocks for `work` threads; grid-stride loops cover whatever a capped grid does not.
inline unsigned int grid_for(int64_t work) {
  int64_t b = (work + kElemThreads - 1) / kElemThreads;
  if (b < 1) b = 1;
  if (b > 65535 * 8) b = 65535 * 8;
  return static_cast<unsigned int>(b);
}

template <class T>
struct alignas(sizeof(T) * kVec) VecPack {
  T v[kVec];
};

template <class T>
inline bool pack_aligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % sizeof(VecPack<T>) == 0;
}


// Flat index -> element offset of each of N operands. Dims innermost first.
template <int N, class Index>
struct OffsetCalc {
  int ndim;
  Index sizes[kMaxDims];
  int64_t strides[kMaxDims][N];

  explicit OffsetCalc(const ElementwiseGeometry& g) : ndim(g.ndim) {
    for (int d = 0; d < kMaxDims; ++d) {
      sizes[d] = d < g.ndim ? static_cast<Index>(g.sizes[d]) : Index(1);
      for (int k = 0; k < N; ++k) strides[d][k] = d < g.ndim ? g.strides[d][k] : 0;
    }
  }

  __device__ __forceinline__ void get(Index linear, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    if (ndim == 1) {  // the common broadcast case (a scalar operand): no division at all
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = static_cast<int64_t>(linear) * strides[0][k];
      return;
    }
    // Fully unrolled so the sizes/strides stay in the kernel's parameter space (a dynamic index
    // would copy the whole struct to local memory).
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      Index q = linear / sizes[d];
      Index r = linear - q * sizes[d];
      linear = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<int64_t>(r) * strides[d][k];
    }
  }
};

template <class Out, class F, class... P>
__device__ __forceinline__ void store_pack(int64_t i, const F& f, Out* out, P... packs) {
  VecPack<Out> o;
#pragma unroll
  for (int j = 0; j < kVec; ++j) o.v[j] = f(packs.v[j]...);
  reinterpret_cast<VecPack<Out>*>(out)[i] = o;
}

// out[n], in_k[n], all dense.
template <class Out, class F, class... In>
__global__ void __launch_bounds__(kElemThreads)
    contiguous_kernel(int64_t n, bool vec, F f, Out* out, const In*... in) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  int64_t start = 0;
  if (vec) {
    int64_t npacks = n / kVec;
    for (int64_t i = tid; i < npacks; i += step)
      store_pack(i, f, out, reinterpret_cast<const VecPack<In>*>(in)[i]...);
    start = npacks * kVec;
  }
  for (int64_t i = start + tid; i < n; i += step) out[i] = f(in[i]...);
}

template <size_t... I, class Out, class F, class... In>
__device__ __forceinline__ void apply_at(std::index_sequence<I...>, const int64_t* off, const F& f, Out* out,
                                         const In*... in) {
  out[off[0]] = f(in[off[I + 1]]...);
}

// Iteration space [sizes] (innermost first), operand k at data_k + sum(idx_d * strides[d][k]).
template <class Index, class Out, class F, class... In>
__global__ void __launch_bounds__(kElemThreads)
    strided_kernel(OffsetCalc<1 + sizeof...(In), Index> oc, int64_t n, F f, Out* out, const In*... in) {
  int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = tid; i < n; i += step) {
    int64_t off[1 + sizeof...(In)];
    oc.get(static_cast<Index>(i), off);
    apply_at(std::index_sequence_for<In...>{}, off, f, out, in...);
  }
}

template <class Out, class... In, class F, size_t... I>
void launch_elementwise_impl(const ElementwiseGeometry& g, const F& f, cudaStream_t stream, const char* name,
                             std::index_sequence<I...>) {
  constexpr int N = 1 + sizeof...(In);
  Out* out = static_cast<Out*>(g.data[0]);
  if (g.contiguous) {
    bool vec = pack_aligned<Out>(g.data[0]) && (pack_aligned<In>(g.data[I + 1]) && ...);
    int64_t work = vec ? (g.numel + kVec - 1) / kVec : g.numel;
    contiguous_kernel<Out, F, In...>
        <<<grid_for(work), kElemThreads, 0, stream>>>(g.numel, vec, f, out, static_cast<const In*>(g.data[I + 1])...);
  } else if (g.numel <= static_cast<int64_t>(UINT32_MAX)) {
    strided_kernel<uint32_t, Out, F, In...><<<grid_for(g.numel), kElemThreads, 0, stream>>>(
        OffsetCalc<N, uint32_t>(g), g.numel, f, out, static_cast<const In*>(g.data[I + 1])...);
  } else {
    strided_kernel<uint64_t, Out, F, In...><<<grid_for(g.numel), kElemThreads, 0, stream>>>(
        OffsetCalc<N, uint64_t>(g), g.numel, f, out, static_cast<const In*>(g.data[I + 1])...);
  }
  check_launch(name);
}

// out = f(in...) over `g`, whose operands must have exactly the dtypes Out, In... (the glue
// converts inputs first). No launch for an empty iteration space.
template <class Out, class... In, class F>
void launch_elementwise(const ElementwiseGeometry& g, const F& f, cudaStream_t stream, const char* name) {
  if (g.numel <= 0) return;
  if (g.nops != 1 + static_cast<int>(sizeof...(In))) elementwise_internal_error(name, dtype_v<Out>, g.nops);
  launch_elementwise_impl<Out, In...>(g, f, stream, name, std::index_sequence_for<In...>{});
}

// f.template operator()<T>() for the C++ type of `t` (host side of the .cu files).
template <class F>
void visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Float32: f.template operator()<float>(); return;
    case DType::Float64: f.template operator()<double>(); return;
    case DType::Int64: f.template operator()<int64_t>(); return;
    case DType::Bool: f.template operator()<bool>(); return;
    case DType::BFloat16: f.template operator()<BFloat16>(); return;
    case DType::Float16: f.template operator()<Half>(); return;
    case DType::UInt8: f.template operator()<uint8_t>(); return;
    case DType::Int32: f.template operator()<int32_t>(); return;
  }
}

// F<T> (ops/math/) over `g` for T the type of r, its parameters built from p: the launcher every
// generated elementwise op calls (cuda/elementwise_table.cu). The operand types are F's call
// signature, as the glue built the geometry (ops/elementwise_plan.h).
template <template <class> class F>
void launch_math(DType r, const ElementwiseGeometry& g, const ScalarArg* p, cudaStream_t stream, const char* name) {
  visit_dtype(r, [&]<class T>() {
    if constexpr ((math::functor_types<F>() & math::type_bit<T>) != 0) {
      using M = math::opmath_t<T>;  // 16-bit floats compute in float (ops/math/device_math.h invariant 4)
      using C = math::Call<F, M>;
      const F<M> f = math::make_functor<F, M>(p);
      [&]<class... A>(math::TypeList<A...>) {
        launch_elementwise<math::stored_t<typename C::Out, M, T>, math::stored_t<A, M, T>...>(g, f, stream, name);
      }(typename C::Inputs{});
    } else {
      elementwise_internal_error(name, r, 0);
    }
  });
}

// Math by overload, so functors templated on float/double call the float functions for float
// (float32 math in float, as PyTorch on CUDA) and the double ones for double.
namespace dmath {
__device__ __forceinline__ float exp(float x) { return ::expf(x); }
__device__ __forceinline__ double exp(double x) { return ::exp(x); }
__device__ __forceinline__ float log(float x) { return ::logf(x); }
__device__ __forceinline__ double log(double x) { return ::log(x); }
__device__ __forceinline__ float sin(float x) { return ::sinf(x); }
__device__ __forceinline__ double sin(double x) { return ::sin(x); }
__device__ __forceinline__ float cos(float x) { return ::cosf(x); }
__device__ __forceinline__ double cos(double x) { return ::cos(x); }
__device__ __forceinline__ float tanh(float x) { return ::tanhf(x); }
__device__ __forceinline__ double tanh(double x) { return ::tanh(x); }
__device__ __forceinline__ float sqrt(float x) { return ::sqrtf(x); }
__device__ __forceinline__ double sqrt(double x) { return ::sqrt(x); }
__device__ __forceinline__ float log1p(float x) { return ::log1pf(x); }
__device__ __forceinline__ double log1p(double x) { return ::log1p(x); }
__device__ __forceinline__ float expm1(float x) { return ::expm1f(x); }
__device__ __forceinline__ double expm1(double x) { return ::expm1(x); }
__device__ __forceinline__ float erf(float x) { return ::erff(x); }
__device__ __forceinline__ double erf(double x) { return ::erf(x); }
__device__ __forceinline__ float pow(float x, float e) { return ::powf(x, e); }
__device__ __forceinline__ double pow(double x, double e) { return ::pow(x, e); }
}  // namespace dmath

using scalar_math::int_pow;

}  // namespace graft::cuda
