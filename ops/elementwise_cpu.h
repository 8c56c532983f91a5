#pragma once
// The CPU half of the table elementwise ops (generated into ops/cpu_registration.cpp): the typed
// loop over a built iterator for a math functor, and the whole-tensor fast paths a functor may have
// on the CPU (`cpu_fast_path: true` in its declaration).
#include <algorithm>
#include <initializer_list>

#include "ops/binary_plan.h"
#include "ops/elementwise_plan.h"
#include "ops/math/elementwise_math.h"
#include "ops/reduced_float.h"
#include "ops/scalar_arg.h"
#include "ops/unary_plan.h"

namespace graft::kernels {

// The loop for a 16-bit float storage type T (BFloat16, Half), F computing in float: blocks of
// kBlock elements are converted to float with the vectorised row converters (ops/reduced_float.h),
// computed in a plain float loop the compiler vectorises, and rounded back in one pass. Operands
// that are not stored as T (a bool mask, int64) are read in place. Same values as the per-element
// loop: each input converts exactly and each result rounds once, either way.
template <class T, class Out, class... In, class F>
auto reduced_elementwise_loop(F f) {
  return [f](char** data, const int64_t* strides, int64_t n) {
    constexpr int64_t kBlock = 256;
    constexpr size_t N = sizeof...(In);
    alignas(64) float in[N == 0 ? 1 : N][kBlock];
    alignas(64) float out[kBlock];
    for (int64_t b = 0; b < n; b += kBlock) {
      const int64_t m = std::min(kBlock, n - b);
      [&]<size_t... I>(std::index_sequence<I...>) {
        using Ins = std::tuple<In...>;
        auto load = [&]<size_t K>() {
          using A = std::tuple_element_t<K, Ins>;
          if constexpr (std::is_same_v<A, T>) {
            const char* base = data[K + 1] + b * strides[K + 1];
            if (strides[K + 1] == static_cast<int64_t>(sizeof(T))) {
              to_float(reinterpret_cast<const T*>(base), in[K], m);
            } else {
              for (int64_t i = 0; i < m; ++i) in[K][i] = *reinterpret_cast<const T*>(base + i * strides[K + 1]);
            }
          }
        };
        (load.template operator()<I>(), ...);
        auto arg = [&]<size_t K>(int64_t i) {
          using A = std::tuple_element_t<K, Ins>;
          if constexpr (std::is_same_v<A, T>) return in[K][i];
          else return *reinterpret_cast<const A*>(data[K + 1] + (b + i) * strides[K + 1]);
        };
        char* dst = data[0] + b * strides[0];
        if constexpr (std::is_same_v<Out, T>) {
          for (int64_t i = 0; i < m; ++i) out[i] = f(arg.template operator()<I>(i)...);
          if (strides[0] == static_cast<int64_t>(sizeof(T))) {
            from_float(out, reinterpret_cast<T*>(dst), m);
          } else {
            for (int64_t i = 0; i < m; ++i) *reinterpret_cast<T*>(dst + i * strides[0]) = T(out[i]);
          }
        } else {
          for (int64_t i = 0; i < m; ++i)
            *reinterpret_cast<Out*>(dst + i * strides[0]) = f(arg.template operator()<I>(i)...);
        }
      }(std::make_index_sequence<N>{});
    }
  };
}

// F<opmath_t<T>>(inputs...) over `it` (built by elementwise_op / elementwise_op_) for T the type of r.
template <template <class> class F>
void elementwise_loop_cpu(TensorIterator& it, DType r, std::initializer_list<math::ScalarArg> p) {
  visit_functor_dtype<F>(r, it.op(), [&]<class T>() {
    using M = math::opmath_t<T>;
    using C = math::Call<F, M>;
    const F<M> f = math::make_functor<F, M>(p.begin());
    [&]<class... A>(math::TypeList<A...>) {
      using Out = math::stored_t<typename C::Out, M, T>;
      if constexpr (std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>) {
        it.for_each(reduced_elementwise_loop<T, Out, math::stored_t<A, M, T>...>(f),
                    kGrainSize / math::functor_cost<F>());
      } else {
        it.for_each(elementwise_loop<Out, math::stored_t<A, M, T>...>(f), kGrainSize / math::functor_cost<F>());
      }
    }(typename C::Inputs{});
  });
}

// A faster whole-tensor kernel for some inputs (large contiguous float32), tried before the loop;
// it returns an undefined tensor where it does not apply. Specialised in ops/unary.cpp. An in-place
// op's (run_inplace) writes self and returns it; where an op has both, they take the same inputs
// to the same code, so the in-place result has the out-of-place bits.
template <template <class> class F> struct CpuFastPath;
template <> struct CpuFastPath<math::Tanh> {  // oneDNN's eltwise tanh
  static Tensor run(const Tensor& self);
  static Tensor run_inplace(const Tensor& self);
};
template <> struct CpuFastPath<math::Gelu> {  // exact GELU in 16-lane vectors
  static Tensor run(const Tensor& self, GeluApproximate approximate);
};
template <> struct CpuFastPath<math::Relu> {  // 16-bit: a selection on the raw bits
  static Tensor run(const Tensor& self);
  static Tensor run_inplace(const Tensor& self);
};
template <> struct CpuFastPath<math::ThresholdBackward> {  // 16-bit, threshold 0: likewise
  static Tensor run(const Tensor& grad, const Tensor& self, Scalar threshold);
  static Tensor run_inplace(const Tensor& grad, const Tensor& self, Scalar threshold);  // into grad
};
template <> struct CpuFastPath<math::KeepWhere> {  // in place, self and keep in one layout: a bit mask
  static Tensor run_inplace(const Tensor& self, const Tensor& keep);
};
template <> struct CpuFastPath<math::GeluBackward> {
  static Tensor run(const Tensor& grad, const Tensor& self, GeluApproximate approximate);
};

}  // namespace graft::kernels
