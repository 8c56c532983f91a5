#pragma once
// The device-independent driver of every table elementwise op (codegen/ops/*.yaml `elementwise:`):
// the op's plan has chosen the dtype r it computes in; this builds the shared TensorIterator the
// way the op's math functor F<T> (ops/math/) reads and writes, then hands it to the device's loop:
//
//   const DType r = add_dtype("add", self, other, alpha);                 // the plan's rule
//   return elementwise_op<math::Add>("add", r, {self, other}, run);      // run(it): CPU loop or CUDA launch
//
// Invariants:
// 1. Operand k of the iterator is read as the type F<M>::operator() takes for argument k (M the
//    compute type of r's storage type T, ops/math/device_math.h invariant 4): M inputs are read
//    converted to r, a `bool` argument (where's condition, masked_fill's mask) as bool.
//    The output has F's result type (bool for comparisons). So the loop on either device sees
//    exactly the types its functor was instantiated for; no device converts on its own.
// 2. In-place forms write self. They compute in r and need r castable to self's dtype; when r is
//    wider (float32 self, float64 other) they compute into a temporary and round once into self,
//    as PyTorch.
#include <initializer_list>

#include "ops/kernel_utils.h"
#include "ops/math/device_math.h"
#include "ops/tensor_iterator.h"

namespace graft::kernels {

// fn.template operator()<T>() for the C++ type T of r, among the dtypes F is instantiated for.
// T is the storage type; the functor runs as F<opmath_t<T>> (ops/math/device_math.h invariant 4).
template <template <class> class F, class Fn>
void visit_functor_dtype(DType r, const char* op, Fn&& fn) {
  dispatch_all_dtypes(r, op, [&]<class T>() {
    if constexpr ((math::functor_types<F>() & math::type_bit<T>) != 0) fn.template operator()<T>();
    else GRAFT_ERROR(op, ": internal error: dtype ", r, " reached a kernel that does not support it");
  });
}

namespace elementwise_detail {
template <class M, class Arg>
DType read_as(DType r) {
  if constexpr (std::is_same_v<Arg, M>) return r;
  else return dtype_v<Arg>;
}
template <class M, class... A>
void add_inputs(TensorIterator& it, DType r, std::initializer_list<Tensor> inputs, math::TypeList<A...>) {
  GRAFT_CHECK(inputs.size() == sizeof...(A), it.op(), ": internal error: ", inputs.size(),
              " tensors for a functor of ", sizeof...(A));
  const Tensor* t = inputs.begin();
  (it.add_input(*t++, read_as<M, A>(r)), ...);
}
}  // namespace elementwise_detail

// out = F(inputs...) in dtype r; run(it) is the device's loop over the built iterator.
template <template <class> class F, class Run>
Tensor elementwise_op(const char* op, DType r, std::initializer_list<Tensor> inputs, const Run& run) {
  TensorIterator it(op);
  visit_functor_dtype<F>(r, op, [&]<class T>() {
    using M = math::opmath_t<T>;
    using C = math::Call<F, M>;
    elementwise_detail::add_inputs<M>(it, r, inputs, typename C::Inputs{});
    it.build(dtype_v<math::stored_t<typename C::Out, M, T>>);
  });
  run(it);
  return it.output();
}

// self = F(inputs...) (inputs start with self), computed in r. Each input is read as F takes it,
// as elementwise_op reads them (r for its T arguments, an argument's own dtype otherwise), so a
// bool mask argument (_keep_where_'s) is read as bool rather than converted to r in a copy the
// size of self.
template <template <class> class F, class Run>
Tensor elementwise_op_(const char* op, const Tensor& self, DType r, std::initializer_list<Tensor> inputs,
                       const Run& run) {
  check_inplace_cast(op, r, self);
  auto add_inputs = [&](TensorIterator& it) {
    visit_functor_dtype<F>(r, op, [&]<class T>() {
      using M = math::opmath_t<T>;
      elementwise_detail::add_inputs<M>(it, r, inputs, typename math::Call<F, M>::Inputs{});
    });
  };
  if (r == self.dtype()) {
    TensorIterator it(op);
    it.add_output(self);
    add_inputs(it);
    it.build();
    run(it);
    return self;
  }
  check_no_internal_overlap(op, self);
  TensorIterator it(op);
  add_inputs(it);
  it.build(r);
  GRAFT_CHECK(it.output().sizes() == self.sizes(), op, ": output with shape ", shape_str(self.sizes()),
              " doesn't match the broadcast shape ", shape_str(it.output().sizes()));
  run(it);
  device_copy(self, it.output());
  return self;
}

}  // namespace graft::kernels
