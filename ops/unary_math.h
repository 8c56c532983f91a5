#pragma once
// The CPU math of the unary op table (runtime/op_table/unary.def): one struct per row, named by
// its Name column, evaluated per element in the op's floating dtype (float or double). The shared
// plan (ops/unary_plan.h) has already checked the input and chosen the dtype; the iterator
// supplies the loop (ops/unary.cpp). cuda/kernels/unary_math.cuh holds the same structs for CUDA.
//
// A struct may also offer `static Tensor fast_path(const Tensor& x)`: a whole-tensor kernel tried
// first, returning an undefined tensor where it does not apply (Tanh: oneDNN for large contiguous
// float32 inputs).
#include <cmath>

#include "runtime/tensor.h"

namespace graft::kernels::unary_math {

struct Exp {
  template <class T> T operator()(T v) const { return std::exp(v); }
};
struct Log {
  template <class T> T operator()(T v) const { return std::log(v); }
};
struct Sin {
  template <class T> T operator()(T v) const { return std::sin(v); }
};
struct Cos {
  template <class T> T operator()(T v) const { return std::cos(v); }
};
struct Tanh {
  // float tanh through one double exp: glibc's tanhf costs ~25 ns an element, exp ~4 ns, and this
  // form rounds to the same float as tanh computed in double over the whole range (checked on a
  // 1e-5 grid over [-12, 12] and down to 1e-12). Near 0 the exp form would cancel, so a cubic
  // Taylor term takes over (its next term is below 2^-40 relative there); past 9.1 the result
  // rounds to +-1 anyway. NaN stays NaN through the exp branch.
  template <class T> T operator()(T v) const {
    if constexpr (std::is_same_v<T, float>) {
      double a = std::fabs(static_cast<double>(v)), r;
      if (a < 1e-4) r = a - a * a * a / 3.0;
      else if (a > 9.1) r = 1.0;
      else r = 1.0 - 2.0 / (std::exp(2.0 * a) + 1.0);
      return static_cast<float>(std::copysign(r, static_cast<double>(v)));
    } else {
      return std::tanh(v);
    }
  }
  static Tensor fast_path(const Tensor& x);  // ops/unary.cpp
};
struct Sigmoid {
  template <class T> T operator()(T v) const { return T(1) / (T(1) + std::exp(-v)); }
};
struct Sqrt {
  template <class T> T operator()(T v) const { return std::sqrt(v); }
};
struct Rsqrt {
  template <class T> T operator()(T v) const { return T(1) / std::sqrt(v); }
};
struct Log1p {
  template <class T> T operator()(T v) const { return std::log1p(v); }
};
struct Expm1 {
  template <class T> T operator()(T v) const { return std::expm1(v); }
};
struct Erf {
  template <class T> T operator()(T v) const { return std::erf(v); }
};
struct Reciprocal {
  template <class T> T operator()(T v) const { return T(1) / v; }
};
struct Silu {  // x * sigmoid(x); exp(-x) overflowing to inf gives -0, the limit
  template <class T> T operator()(T v) const { return v / (T(1) + std::exp(-v)); }
};

}  // namespace graft::kernels::unary_math
