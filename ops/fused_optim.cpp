// Fused optimizer updates: one pass over a parameter, its gradient and its state, in place.
//
// Op by op, Adam reads and writes every element about seven times and pays seven dispatches per
// parameter; fused, it reads p, g, m, v once and writes p, m, v once. Each element goes through
// the same float operations, in the same order, as the op-by-op path in optim/optimizer.cpp (add with
// alpha, lerp from the nearer end, mul, addcmul, sqrt, div, add, addcdiv), with every scalar
// rounded to the tensor's dtype as the ops round it, so both paths give the same bits.
//
//   adam:  g' = g + wd p            (L2; decoupled instead: p = p (1 - lr wd))
//          m  = lerp(m, g', 1 - b1)
//          v  = v b2 + (1 - b2) g' g'
//          p  = p - lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps)
//   sgd:   d  = g + wd p
//          buf = first ? d : buf momentum + (1 - dampening) d;  d = nesterov ? d + momentum buf : buf
//          p  = p - lr d
#include <type_traits>

#include "ops/cpu_kernels.h"
#include "ops/fused_optim_plan.h"
#include "ops/ops.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

// Runs `loop(flags)` with each run-time flag as a compile-time one: the element functions then see
// constant flags, their branches fold away and the loop vectorises (sqrt included: the library
// builds with -fno-math-errno).
template <class F>
void with_const_flags(F&& loop) {
  loop();
}
template <class F, class... Rest>
void with_const_flags(F&& loop, bool flag, Rest... rest) {
  if (flag)
    with_const_flags([&](auto... c) { loop(std::true_type{}, c...); }, rest...);
  else
    with_const_flags([&](auto... c) { loop(std::false_type{}, c...); }, rest...);
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from codegen/ops/factory.yaml) ----

void fused_adam_cpu(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                   const Tensor& grad, double lr, double beta1, double beta2, double weight_decay,
                                   double eps, double bc1, double bc2, bool decoupled) {
  auto args = plan_fused_adam(param, exp_avg, exp_avg_sq, grad, lr, beta1, beta2, weight_decay, eps, bc1, bc2,
                                      decoupled);
  dispatch_floating(param.dtype(), "_fused_adam_", [&]<class T>() {
    T *p = param.data_ptr<T>(), *m = exp_avg.data_ptr<T>(), *v = exp_avg_sq.data_ptr<T>();
    const T* g = grad.data_ptr<T>();
    const auto s = adam_scalars<T>(args);
    parallel_for(0, param.numel(), kGrainSize / 4, [&](int64_t lo, int64_t hi) {
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
            for (int64_t i = lo; i < hi; ++i) scalar_math::adam_element(pp[i], mm[i], vv[i], gg[i], c);
          },
          s.shrink, s.l2, s.near);
    });
  });
}

void fused_sgd_cpu(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                                  double momentum, double dampening, double weight_decay, bool nesterov, bool first) {
  auto args = plan_fused_sgd(param, momentum_buffer, grad, lr, momentum, dampening, weight_decay, nesterov,
                                     first);
  dispatch_floating(param.dtype(), "_fused_sgd_", [&]<class T>() {
    T* p = param.data_ptr<T>();
    T* buf = momentum != 0 ? momentum_buffer.data_ptr<T>() : nullptr;
    const T* g = grad.data_ptr<T>();
    const auto s = sgd_scalars<T>(args);
    parallel_for(0, param.numel(), kGrainSize / 2, [&](int64_t lo, int64_t hi) {
      with_const_flags(
          [&](auto decay, auto momentum, auto nesterov, auto first) {
            auto c = s;
            c.decay = decay;
            c.use_momentum = momentum;
            c.nesterov = nesterov;
            c.first = first;
            T* __restrict pp = p;
            const T* __restrict gg = g;
            if constexpr (decltype(momentum)::value) {
              T* __restrict bb = buf;
              for (int64_t i = lo; i < hi; ++i) scalar_math::sgd_element(pp[i], bb[i], gg[i], c);
            } else {
              T unused{};
              for (int64_t i = lo; i < hi; ++i) scalar_math::sgd_element(pp[i], unused, gg[i], c);
            }
          },
          s.decay, s.use_momentum, s.nesterov, s.first);
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
