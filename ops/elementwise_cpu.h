#pragma once
// The CPU half of the table elementwise ops (generated into ops/cpu_registration.cpp): the typed
// loop over a built iterator for a math functor, and the whole-tensor fast paths a functor may have
// on the CPU (`cpu_fast_path: true` in its declaration).
#include <initializer_list>

#include "ops/binary_plan.h"
#include "ops/elementwise_plan.h"
#include "ops/math/elementwise_math.h"
#include "ops/scalar_arg.h"
#include "ops/unary_plan.h"

namespace graft::kernels {

// F<opmath_t<T>>(inputs...) over `it` (built by elementwise_op / elementwise_inplace) for T the type of r.
template <template <class> class F>
void elementwise_loop_cpu(TensorIterator& it, DType r, std::initializer_list<math::ScalarArg> p) {
  visit_functor_dtype<F>(r, it.op(), [&]<class T>() {
    using M = math::opmath_t<T>;
    using C = math::Call<F, M>;
    const F<M> f = math::make_functor<F, M>(p.begin());
    [&]<class... A>(math::TypeList<A...>) {
      it.for_each(elementwise_loop<math::stored_t<typename C::Out, M, T>, math::stored_t<A, M, T>...>(f),
                  kGrainSize / math::functor_cost<F>());
    }(typename C::Inputs{});
  });
}

// A faster whole-tensor kernel for some inputs (large contiguous float32), tried before the loop;
// it returns an undefined tensor where it does not apply. Specialised in ops/unary.cpp.
template <template <class> class F> struct CpuFastPath;
template <> struct CpuFastPath<math::Tanh> {  // oneDNN's eltwise tanh
  static Tensor run(const Tensor& self);
};
template <> struct CpuFastPath<math::Gelu> {  // exact GELU in 16-lane vectors
  static Tensor run(const Tensor& self, GeluApproximate approximate);
};
template <> struct CpuFastPath<math::GeluBackward> {
  static Tensor run(const Tensor& grad, const Tensor& self, GeluApproximate approximate);
};

}  // namespace graft::kernels
