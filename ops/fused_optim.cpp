// Fused optimizer updates: one pass over a parameter, its gradient and its state, in place.
//
// Op by op, Adam reads and writes every element about seven times and pays seven dispatches per
// parameter; fused, it reads p, g, m, v once and writes p, m, v once. Adam's elements go through
// the same float operations, in the same order, as the op-by-op path in optim/optimizer.cpp (add
// with alpha, lerp from the nearer end, mul, addcmul, sqrt, div, add, addcdiv), with every scalar
// rounded to the compute dtype as the ops round it, so both paths give the same bits. SGD's
// `x + a*y` steps are fused multiply-adds, as in PyTorch (ops/scalar_math.h says why).
//
//   adam:  g' = g + wd p            (L2; decoupled instead: p = p (1 - lr wd))
//          m  = lerp(m, g', 1 - b1)
//          v  = v b2 + (1 - b2) g' g'
//          p  = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
//   sgd:   d  = g + wd p
//          buf = first ? d : buf momentum + (1 - dampening) d;  d = nesterov ? d + momentum buf : buf
//          p  = p - lr d
//
// Invariants:
// 1. float32 and float64 parameters compute in their own dtype, state of the same dtype.
// 2. A bfloat16 or float16 parameter has float32 state (fused_state_dtype). Each chunk of the
//    parameter and gradient is converted to float (ops/reduced_float.h), updated in float exactly
//    as a float32 parameter would be, and the parameter rounded once on the way back: the 16-bit
//    result is the float32 update's result rounded to nearest even.
// 3. SGD's float loop has two copies, generic and AVX2+FMA, chosen by cpu_isa(); std::fma is
//    correctly rounded in both (a library call or an instruction), so they give the same bits.
#include <algorithm>
#include <type_traits>

#include "ops/cpu_kernels.h"
#include "ops/fused_optim_plan.h"
#include "ops/ops.h"
#include "ops/kernel_utils.h"
#include "ops/reduced_float.h"
#include "runtime/cpu_isa.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

// Runs `loop(flags)` with each run-time flag as a compile-time one: the element functions then see
// constant flags, their branches fold away and the loop vectorises (sqrt included: the library
// builds with -fno-math-errno).
// Always inlined, so that a loop in a function compiled for another target (sgd_row_avx2) is
// compiled for that target too.
template <class F>
[[gnu::always_inline]] inline void with_const_flags(F&& loop) {
  loop();
}
template <class F, class... Rest>
[[gnu::always_inline]] inline void with_const_flags(F&& loop, bool flag, Rest... rest) {
  if (flag)
    with_const_flags([&](auto... c) [[gnu::always_inline]] { loop(std::true_type{}, c...); }, rest...);
  else
    with_const_flags([&](auto... c) [[gnu::always_inline]] { loop(std::false_type{}, c...); }, rest...);
}


// One row of each update in compute type T, flags made compile-time constants.
template <class T>
void adam_row(T* p, T* m, T* v, const T* g, int64_t n, const scalar_math::AdamScalars<T>& s) {
  with_const_flags(
      [&](auto shrink, auto l2, auto near) {
        auto c = s;
        c.shrink = shrink;
        c.l2 = l2;
        c.near = near;
        T* __restrict pp = p;
        T* __restrict mm = m;
        T* __restrict vv = v;
        const T* __restrict gg = g;
        for (int64_t i = 0; i < n; ++i) scalar_math::adam_element(pp[i], mm[i], vv[i], gg[i], c);
      },
      s.shrink, s.l2, s.near);
}

// buf is null unless s.use_momentum.
template <class T>
[[gnu::always_inline]] inline void sgd_row(T* p, T* buf, const T* g, int64_t n, const scalar_math::SgdScalars<T>& s) {
  with_const_flags(
      [&](auto decay, auto momentum, auto nesterov, auto first) [[gnu::always_inline]] {
        auto c = s;
        c.decay = decay;
        c.use_momentum = momentum;
        c.nesterov = nesterov;
        c.first = first;
        T* __restrict pp = p;
        const T* __restrict gg = g;
        if constexpr (decltype(momentum)::value) {
          T* __restrict bb = buf;
          for (int64_t i = 0; i < n; ++i) scalar_math::sgd_element(pp[i], bb[i], gg[i], c);
        } else {
          T unused{};
          for (int64_t i = 0; i < n; ++i) scalar_math::sgd_element(pp[i], unused, gg[i], c);
        }
      },
      s.decay, s.use_momentum, s.nesterov, s.first);
}

// SGD's float rows with fused multiply-adds as instructions: a generic x86-64 build calls libm's
// fma for each element (measured 8x slower than this copy on 4M floats); this copy, picked when
// cpu_isa() has AVX2 + FMA, inlines sgd_row and vectorises it, with the same bits (invariant 3).
__attribute__((target("avx2,fma"))) void sgd_row_avx2(float* p, float* buf, const float* g, int64_t n,
                                                       const scalar_math::SgdScalars<float>& s) {
  sgd_row<float>(p, buf, g, n, s);
}
void sgd_row_float(float* p, float* buf, const float* g, int64_t n, const scalar_math::SgdScalars<float>& s) {
  if (cpu_isa() >= CpuIsa::Avx2)
    sgd_row_avx2(p, buf, g, n, s);
  else
    sgd_row<float>(p, buf, g, n, s);
}

// Elements [lo, hi) of a 16-bit parameter p and gradient g: row(pf, gf, offset, len) updates a
// float chunk (pf written back rounded once, invariant 2).
template <class P, class Row>
void through_float(P* p, const P* g, int64_t lo, int64_t hi, const Row& row) {
  constexpr int64_t kChunk = 512;
  float pf[kChunk], gf[kChunk];
  for (int64_t c = lo; c < hi; c += kChunk) {
    const int64_t len = std::min(kChunk, hi - c);
    to_float(p + c, pf, len);
    to_float(g + c, gf, len);
    row(pf, gf, c, len);
    from_float(pf, p + c, len);
  }
}

// f.template operator()<P>() for the parameter dtypes the fused kernels take.
template <class F>
void dispatch_param(DType t, const char* op, F&& f) {
  if (t == DType::Float64) return f.template operator()<double>();
  if (t == DType::Float32 || is_reduced_floating(t)) return dispatch_float_or_reduced(t, op, f);
  GRAFT_ERROR(op, ": expected a floating point parameter (float32, float64, bfloat16 or float16), got ", t);
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from codegen/ops/factory.yaml) ----

void fused_adam_cpu(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq, const Tensor& grad,
                    double lr, double beta1, double beta2, double weight_decay, double eps, double bc1, double bc2,
                    bool decoupled) {
  auto args = plan_fused_adam(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, weight_decay, eps, bc1, bc2,
                              decoupled);
  dispatch_param(param.dtype(), "_fused_adam_", [&]<class P>() {
    using T = std::conditional_t<std::is_same_v<P, double>, double, float>;
    P* p = param.data_ptr<P>();
    const P* g = grad.data_ptr<P>();
    T *m = exp_avg.data_ptr<T>(), *v = exp_avg_sq.data_ptr<T>();
    const auto s = adam_scalars<T>(args);
    parallel_for(0, param.numel(), kGrainSize / 4, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<P, T>) {
        adam_row<T>(p + lo, m + lo, v + lo, g + lo, hi - lo, s);
      } else {
        through_float(p, g, lo, hi, [&](float* pf, const float* gf, int64_t c, int64_t len) {
          adam_row<float>(pf, m + c, v + c, gf, len, s);
        });
      }
    });
  });
}

void fused_sgd_cpu(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                   double momentum, double dampening, double weight_decay, bool nesterov, bool first) {
  auto args = plan_fused_sgd(param, momentum_buffer, grad, lr, momentum, dampening, weight_decay, nesterov, first);
  dispatch_param(param.dtype(), "_fused_sgd_", [&]<class P>() {
    using T = std::conditional_t<std::is_same_v<P, double>, double, float>;
    P* p = param.data_ptr<P>();
    const P* g = grad.data_ptr<P>();
    T* buf = momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr;
    const auto s = sgd_scalars<T>(args);
    parallel_for(0, param.numel(), kGrainSize / 2, [&](int64_t lo, int64_t hi) {
      if constexpr (std::is_same_v<P, T>) {
        if constexpr (std::is_same_v<T, float>)
          sgd_row_float(p + lo, buf ? buf + lo : nullptr, g + lo, hi - lo, s);
        else
          sgd_row<T>(p + lo, buf ? buf + lo : nullptr, g + lo, hi - lo, s);
      } else {
        through_float(p, g, lo, hi, [&](float* pf, const float* gf, int64_t c, int64_t len) {
          sgd_row_float(pf, buf ? buf + c : nullptr, gf, len, s);
        });
      }
    });
  });
}

}  // namespace kernels

namespace ops {

void fused_adam_(Tensor& param, Tensor& exp_avg, Tensor& exp_avg_sq, const Tensor& grad, const FusedAdamArgs& a) {
  _fused_adam_(param, exp_avg, exp_avg_sq, grad, a.lr, a.beta1, a.beta2, a.weight_decay, a.eps, a.bias_correction1,
               a.bias_correction2, a.decoupled);
}

void fused_sgd_(Tensor& param, Tensor& momentum_buffer, const Tensor& grad, const FusedSgdArgs& a) {
  _fused_sgd_(param, momentum_buffer, grad, a.lr, a.momentum, a.dampening, a.weight_decay, a.nesterov, a.first);
}

}  // namespace ops
}  // namespace graft
