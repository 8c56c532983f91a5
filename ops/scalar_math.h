#pragma once
// Scalar arithmetic that the CPU kernels (ops/) and the CUDA kernels (cuda/kernels/, nvcc) both
// run, written once: the numbers a device computes must not depend on which copy of a formula it
// compiled.
//
// Invariants:
// 1. Plain C++ on scalars and raw pointers: no graft type, no std:: container, nothing that nvcc
//    cannot compile for the device. Every function is GRAFT_HOST_DEVICE and inline.
// 2. What stays per device is only how elements reach these functions (threads, blocks, vector
//    loads, partial sums), never the formula itself.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/math/device_math.h"

namespace graft::scalar_math {

// base ** exp for exp >= 0, wrapping on overflow like PyTorch (unsigned arithmetic: no UB).
GRAFT_HOST_DEVICE inline int64_t int_pow(int64_t base, int64_t exp) {
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (exp > 0) {
    if (exp & 1) result *= b;
    b *= b;
    exp >>= 1;
  }
  return static_cast<int64_t>(result);
}

// Integer power with a possibly negative exponent, as torch.pow on integer tensors: only 1 and -1
// have an integer reciprocal power, everything else truncates to 0.
GRAFT_HOST_DEVICE inline int64_t int_pow_signed(int64_t a, int64_t b) {
  if (b >= 0) return int_pow(a, b);
  if (a == 1) return 1;
  if (a == -1) return b % 2 ? -1 : 1;
  return 0;
}

// Where sum and mean write a reduced row: the accumulator `a` (in A) becomes the output dtype O,
// divided by the row's length for mean (length 0 gives NaN, as PyTorch), != 0 for bool. Both
// devices' sum reducers derive from it, so the last rounding of a sum is the same text.
template <class O>
struct SumWrite {
  O* out;
  bool mean;
  int64_t len;
  template <class A>
  GRAFT_HOST_DEVICE void write(int64_t i, const A& a) const {
    if (mean) out[i] = static_cast<O>(static_cast<double>(a) / static_cast<double>(len));
    else if constexpr (std::is_same_v<O, bool>) out[i] = a != 0;
    else out[i] = static_cast<O>(a);
  }
};

// Count, mean and sum of squared deviations of a piece of a row. Two pieces merge with Chan et al.'s
// formula; `left` is the earlier piece, so the merge order (and so the rounding) is fixed.
struct MomentAcc {
  double n = 0, mean = 0, m2 = 0;
};
GRAFT_HOST_DEVICE inline void merge_moments(MomentAcc& left, const MomentAcc& right) {
  if (right.n == 0) return;
  if (left.n == 0) {
    left = right;
    return;
  }
  double n = left.n + right.n, delta = right.mean - left.mean;
  left.m2 += right.m2 + delta * delta * left.n * right.n / n;
  left.mean += delta * right.n / n;
  left.n = n;
}

// The loss of one sample with class index t (t != ignore_index, 0 <= t < C) of nll_loss and
// cross_entropy: -w[t] * lp[t], blended with label smoothing ls as
// (1 - ls) * that + ls / C * sum_c (-w[c] * lp[c]). `row` points at lp[n, 0, s] (classes are S
// apart); w may be null (all ones). Returns the loss; *weight gets w[t], the mean's denominator.
template <class T>
GRAFT_HOST_DEVICE inline double class_index_loss_term(const T* row, int64_t S, int64_t C, int64_t t, const T* w,
                                                      double ls, double* weight) {
  double wt = w ? static_cast<double>(w[t]) : 1.0;
  double loss = -wt * static_cast<double>(row[t * S]);
  if (ls > 0) {
    double smooth = 0;
    for (int64_t c = 0; c < C; ++c) smooth -= (w ? static_cast<double>(w[c]) : 1.0) * static_cast<double>(row[c * S]);
    loss = (1 - ls) * loss + ls / static_cast<double>(C) * smooth;
  }
  *weight = wt;
  return loss;
}

// The loss of one sample of cross_entropy with class probabilities y (same layout as lp):
// -sum_c w[c] * y'[c] * lp[c] with the smoothed target y' = (1 - ls) * y + ls / C.
template <class T>
GRAFT_HOST_DEVICE inline double probability_loss_term(const T* lp, const T* y, int64_t S, int64_t C, const T* w,
                                                      double ls) {
  double loss = 0;
  for (int64_t c = 0; c < C; ++c) {
    double yc = (1 - ls) * static_cast<double>(y[c * S]) + ls / static_cast<double>(C);
    loss -= (w ? static_cast<double>(w[c]) : 1.0) * yc * static_cast<double>(lp[c * S]);
  }
  return loss;
}

// Column i of layer norm's weight and bias gradients from `pieces` partial sums ([pieces, N]
// each), added in piece order so that the result does not depend on how rows were split.
template <class T>
GRAFT_HOST_DEVICE inline void finish_param_grads(const double* pdw, const double* pdb, int64_t N, int64_t pieces,
                                                 int64_t i, T* dw, T* db) {
  double sw = 0, sb = 0;
  for (int64_t p = 0; p < pieces; ++p) {
    sw += pdw[p * N + i];
    sb += pdb[p * N + i];
  }
  if (dw) dw[i] = static_cast<T>(sw);
  if (db) db[i] = static_cast<T>(sb);
}

// ---- fused optimizer steps (ops/fused_optim.cpp, cuda/kernels/fused_optim.cu) ----
// One element of Adam/AdamW and of SGD, computed in T (float for float32, bfloat16 and float16
// parameters, whose state is float32; double for float64). Scalars arrive already rounded to T, as
// the ops round their Scalar arguments. The CPU loop passes a copy whose flags are compile-time
// constants, so the branches fold away and the loop vectorises.
//
// Adam follows the op-by-op update in optim/optimizer.cpp operation for operation, so the fused
// CPU kernel reproduces its bits. SGD follows PyTorch's CPU and CUDA kernels instead: each of its
// `x.add_(y, alpha=a)` is one fused multiply-add (x + a*y rounded once), which the op-by-op path
// (graft's add rounds the product first) does not give; the GradScaler fixture from PyTorch
// (tests/optim/data/grad_scaler.json) tells the two apart.

// a * b + c rounded once, on both devices (std::fma is a correct library call on a generic x86-64
// build, an instruction on the device).
#if defined(__CUDA_ARCH__)
GRAFT_HOST_DEVICE inline float mul_add(float a, float b, float c) { return ::fmaf(a, b, c); }
GRAFT_HOST_DEVICE inline double mul_add(double a, double b, double c) { return ::fma(a, b, c); }
#else
GRAFT_HOST_DEVICE inline float mul_add(float a, float b, float c) { return std::fma(a, b, c); }
GRAFT_HOST_DEVICE inline double mul_add(double a, double b, double c) { return std::fma(a, b, c); }
#endif

template <class T>
struct AdamScalars {
  T decay;     // 1 - lr * wd (decoupled) applied to p when `shrink`
  T wd;        // L2 weight decay added to g when `l2`
  T w1;        // 1 - beta1, the lerp weight
  T b2, w2;    // beta2, 1 - beta2
  T sqrt_bc2;  // sqrt(1 - beta2^t)
  T eps;
  T step;      // -lr / (1 - beta1^t)
  bool shrink, l2;
  bool near;   // |w1| < 0.5: lerp from m (else from g), as lerp_ picks the nearer end
};

template <class T>
GRAFT_HOST_DEVICE inline void adam_element(T& p, T& m, T& v, T g, const AdamScalars<T>& s) {
  T pi = p;
  if (s.shrink) pi = pi * s.decay;
  if (s.l2) g = g + s.wd * pi;
  T mi = s.near ? m + s.w1 * (g - m) : g - (g - m) * (T(1) - s.w1);
  T vi = v * s.b2;
  vi = vi + s.w2 * g * g;
  T denom = std::sqrt(vi) / s.sqrt_bc2 + s.eps;
  p = pi + s.step * mi / denom;
  m = mi;
  v = vi;
}

template <class T>
struct SgdScalars {
  T wd, momentum, keep;  // keep = 1 - dampening
  T step;                // -lr
  bool decay, use_momentum, nesterov, first;
};

// PyTorch's SGD: d = g.add(p, alpha=wd); buf.mul_(momentum).add_(d, alpha=1-dampening);
// d = d.add(buf, alpha=momentum) (nesterov); p.add_(d, alpha=-lr). buf is ignored unless
// use_momentum.
template <class T>
GRAFT_HOST_DEVICE inline void sgd_element(T& p, T& buf, T g, const SgdScalars<T>& s) {
  T pi = p, d = g;
  if (s.decay) d = mul_add(s.wd, pi, d);
  if (s.use_momentum) {
    T b = s.first ? d : mul_add(s.keep, d, buf * s.momentum);
    buf = b;
    d = s.nesterov ? mul_add(s.momentum, b, d) : b;
  }
  p = mul_add(s.step, d, pi);
}

// ---- multinomial (the sampling rules: ops/random_plan.h) ----

// The key of weight w (>= 0) for the uniform u in [0, 1): w / E with E = -log1p(-u) ~ Exp(1), so
// the largest keys of a row are a draw without replacement; 0 for a zero weight (never ranked
// ahead of a positive one). The log is each device's own, so keys may differ in the last bit.
GRAFT_HOST_DEVICE inline double multinomial_key(double w, double u) {
#if defined(__CUDA_ARCH__)
  return w == 0 ? 0.0 : w / -::log1p(-u);
#else
  return w == 0 ? 0.0 : w / -std::log1p(-u);
#endif
}

// The category that the uniform u picks from a row whose inclusive cumulative sums (float64, left
// to right) are cum[0, C), cum[C - 1] > 0: the first c with cum[c] > u * cum[C - 1], so a zero
// weight is never picked. When u * sum rounds up to the sum itself, the last category of positive
// weight. Only comparisons and one product: both devices pick the same category.
GRAFT_HOST_DEVICE inline int64_t multinomial_pick(const double* cum, int64_t C, double u) {
  const double target = u * cum[C - 1];
  int64_t lo = 0, hi = C;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (cum[mid] > target) hi = mid;
    else lo = mid + 1;
  }
  if (lo < C) return lo;
  int64_t c = C - 1;
  while (c > 0 && cum[c] == cum[c - 1]) --c;
  return c;
}

}  // namespace graft::scalar_math
