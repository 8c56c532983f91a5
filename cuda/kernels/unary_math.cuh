#pragma once
// The CUDA math of the unary op table (runtime/op_table/unary.def): one struct per row, named by
// its Name column, as ops/unary_math.h is for the CPU. Evaluated per element in the op's floating
// dtype: float32 math in float (dmath picks the float functions), as PyTorch on CUDA.
#include "cuda/kernels/elementwise.cuh"

namespace graft::cuda::unary_math {

struct Exp {
  template <class T> __device__ T operator()(T v) const { return dmath::exp(v); }
};
struct Log {
  template <class T> __device__ T operator()(T v) const { return dmath::log(v); }
};
struct Sin {
  template <class T> __device__ T operator()(T v) const { return dmath::sin(v); }
};
struct Cos {
  template <class T> __device__ T operator()(T v) const { return dmath::cos(v); }
};
struct Tanh {
  template <class T> __device__ T operator()(T v) const { return dmath::tanh(v); }
};
struct Sigmoid {
  template <class T> __device__ T operator()(T v) const { return T(1) / (T(1) + dmath::exp(-v)); }
};
struct Sqrt {
  template <class T> __device__ T operator()(T v) const { return dmath::sqrt(v); }
};
struct Rsqrt {
  template <class T> __device__ T operator()(T v) const { return T(1) / dmath::sqrt(v); }
};
struct Log1p {
  template <class T> __device__ T operator()(T v) const { return dmath::log1p(v); }
};
struct Expm1 {
  template <class T> __device__ T operator()(T v) const { return dmath::expm1(v); }
};
struct Erf {
  template <class T> __device__ T operator()(T v) const { return dmath::erf(v); }
};
struct Reciprocal {
  template <class T> __device__ T operator()(T v) const { return T(1) / v; }
};
struct Silu {
  template <class T> __device__ T operator()(T v) const { return v / (T(1) + dmath::exp(-v)); }
};

}  // namespace graft::cuda::unary_math
