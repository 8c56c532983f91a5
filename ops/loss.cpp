// Losses on the CPU: nll_loss (+ backward), cross_entropy (log_softmax, then nll or the
// label-smoothed / probability-target loss below) and mse_loss. Checks, shapes and semantics are
// the shared plan's (ops/softmax_loss_plan.h); this file is the arithmetic. A batch that ignores
// every target gives NaN under "mean", as in PyTorch.
// Sums run in fixed pieces of kGrainSize elements added in order, so the result does not depend
// on the thread count. Errors found inside a piece are recorded and thrown after the parallel
// region (an exception must not cross an OpenMP region).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/softmax_loss_plan.h"
#include "ops/ops.h"
#include "ops/scalar_math.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

// Splits [0, n) into fixed pieces and runs f(piece, begin, end) over them in parallel.
template <class F>
int64_t run_pieces(int64_t n, const F& f) {
  int64_t pieces = std::max<int64_t>(1, (n + kGrainSize - 1) / kGrainSize);
  parallel_for(0, pieces, 1, [&](int64_t b, int64_t e) {
    for (int64_t p = b; p < e; ++p) f(p, p * kGrainSize, std::min(n, (p + 1) * kGrainSize));
  });
  return pieces;
}

struct Piece {
  double loss = 0, weight = 0;
  bool bad = false;
  int64_t bad_target = 0;
};

// Throws for the first out-of-range target any piece found.
void throw_bad_target(const std::vector<Piece>& parts, int64_t C, const char* op) {
  for (const Piece& p : parts)
    if (p.bad) bad_class_target_error(p.bad_target, C, op);
}

Tensor finish_loss(const std::vector<Piece>& parts, LossReduction red, DType dt, Device dev, Tensor none_out) {
  if (red == LossReduction::None) return none_out;
  double loss = 0, weight = 0;
  for (const Piece& p : parts) {
    loss += p.loss;
    weight += p.weight;
  }
  Tensor out = new_tensor({}, dt, dev);
  double v = red == LossReduction::Sum ? loss : loss / weight;
  dispatch_floating(dt, "loss", [&]<class T>() { *static_cast<T*>(out.data_ptr()) = static_cast<T>(v); });
  return out;
}

// ---- nll_loss, optionally label-smoothed ----
// loss_i = (1 - ls) * (-w[t] * lp[t]) + (ls / C) * (-sum_c w[c] * lp[c])     (ls = 0: plain nll)
template <class T>
Tensor class_index_loss(const Tensor& lp_in, const Tensor& target_in, const Tensor& weight_in, LossReduction red,
                        int64_t ignore_index, double ls, const ClassLossPlan& l, const char* op) {
  Tensor lpc = contiguous_cpu(lp_in), tc = contiguous_cpu(target_in);
  Tensor wc = weight_in.defined() ? contiguous_cpu(weight_in) : Tensor();
  const T* lp = static_cast<const T*>(lpc.data_ptr());
  const int64_t* tg = static_cast<const int64_t*>(tc.data_ptr());
  const T* w = wc.defined() ? static_cast<const T*>(wc.data_ptr()) : nullptr;
  Tensor none_out = red == LossReduction::None ? new_tensor(l.per_sample, lp_in.dtype(), lp_in.device()) : Tensor();
  T* no = none_out.defined() ? static_cast<T*>(none_out.data_ptr()) : nullptr;
  int64_t C = l.C, S = l.S;
  std::vector<Piece> parts(static_cast<size_t>(std::max<int64_t>(1, (l.N * S + kGrainSize - 1) / kGrainSize)));
  run_pieces(l.N * S, [&](int64_t p, int64_t b, int64_t e) {
    Piece acc;
    for (int64_t i = b; i < e; ++i) {
      int64_t t = tg[i];
      double loss = 0;
      if (t != ignore_index) {
        if (t < 0 || t >= C) {
          if (!acc.bad) acc.bad_target = t;
          acc.bad = true;
          continue;
        }
        const T* row = lp + (i / S) * C * S + i % S;  // lp[n, 0, s]; classes are S apart
        double wt;
        loss = scalar_math::class_index_loss_term(row, S, C, t, w, ls, &wt);
        acc.loss += loss;
        acc.weight += wt;
      }
      if (no) no[i] = static_cast<T>(loss);
    }
    parts[p] = acc;
  });
  throw_bad_target(parts, C, op);
  return finish_loss(parts, red, lp_in.dtype(), lp_in.device(), none_out);
}

// ---- cross_entropy pieces ----

// Probability targets (same shape as log_probs): loss_i = -sum_c w[c] * y'[c] * lp[c], with
// y' = (1 - ls) * y + ls / C. "mean" divides by the number of samples N * S, as PyTorch.
template <class T>
Tensor probability_loss(const Tensor& lp_in, const Tensor& target_in, const Tensor& weight_in, LossReduction red,
                        double ls, const ClassLossPlan& l) {
  Tensor lpc = contiguous_cpu(lp_in), tc = contiguous_cpu(target_in, lp_in.dtype());
  Tensor wc = weight_in.defined() ? contiguous_cpu(weight_in) : Tensor();
  const T* lp = static_cast<const T*>(lpc.data_ptr());
  const T* y = static_cast<const T*>(tc.data_ptr());
  const T* w = wc.defined() ? static_cast<const T*>(wc.data_ptr()) : nullptr;
  Tensor none_out = red == LossReduction::None ? new_tensor(l.per_sample, lp_in.dtype(), lp_in.device()) : Tensor();
  T* no = none_out.defined() ? static_cast<T*>(none_out.data_ptr()) : nullptr;
  int64_t C = l.C, S = l.S;
  std::vector<Piece> parts(static_cast<size_t>(std::max<int64_t>(1, (l.N * S + kGrainSize - 1) / kGrainSize)));
  run_pieces(l.N * S, [&](int64_t p, int64_t b, int64_t e) {
    Piece acc;
    for (int64_t i = b; i < e; ++i) {
      int64_t base = (i / S) * C * S + i % S;
      double loss = scalar_math::probability_loss_term(lp + base, y + base, S, C, w, ls);
      acc.loss += loss;
      acc.weight += 1;
      if (no) no[i] = static_cast<T>(loss);
    }
    parts[p] = acc;
  });
  return finish_loss(parts, red, lp_in.dtype(), lp_in.device(), none_out);
}

// ---- mse_loss ----

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor nll_loss_cpu(const Tensor& lp, const Tensor& target, const Tensor& weight, LossReduction reduction,
                    int64_t ignore_index) {
  const char* op = "nll_loss";
  ClassLossPlan l = plan_nll_loss(lp, target, weight, reduction, op);
  return dispatch_floating(lp.dtype(), op, [&]<class T>() {
    return class_index_loss<T>(lp, target, weight, l.reduction, ignore_index, 0.0, l, op);
  });
}

// grad_input[n, t, s] = -w[t] * g(n, s), where g is grad_out (none) or grad_out / total_weight
// (mean) or grad_out (sum); zero for every other class and for ignored targets.
Tensor nll_loss_backward_cpu(const Tensor& grad_out, const Tensor& lp, const Tensor& target, const Tensor& weight,
                             LossReduction reduction, int64_t ignore_index) {
  const char* op = "nll_loss_backward";
  ClassLossPlan l = plan_nll_loss_backward(grad_out, lp, target, weight, reduction, op);
  LossReduction red = l.reduction;
  Tensor gx = new_tensor(lp.sizes(), lp.dtype(), lp.device());
  dispatch_floating(lp.dtype(), op, [&]<class T>() {
    T* gxp = static_cast<T*>(gx.data_ptr());
    std::fill(gxp, gxp + gx.numel(), T(0));
    Tensor tc = contiguous_cpu(target), gc = contiguous_cpu(grad_out, lp.dtype());
    Tensor wc = weight.defined() ? contiguous_cpu(weight) : Tensor();
    const int64_t* tg = static_cast<const int64_t*>(tc.data_ptr());
    const T* g = static_cast<const T*>(gc.data_ptr());
    const T* w = wc.defined() ? static_cast<const T*>(wc.data_ptr()) : nullptr;
    int64_t C = l.C, S = l.S, M = l.N * l.S;
    std::vector<Piece> parts(static_cast<size_t>(std::max<int64_t>(1, (M + kGrainSize - 1) / kGrainSize)));
    // Pass 1: validate targets and, for "mean", total the weights.
    run_pieces(M, [&](int64_t p, int64_t b, int64_t e) {
      Piece acc;
      for (int64_t i = b; i < e; ++i) {
        int64_t t = tg[i];
        if (t == ignore_index) continue;
        if (t < 0 || t >= C) {
          if (!acc.bad) acc.bad_target = t;
          acc.bad = true;
          continue;
        }
        acc.weight += w ? static_cast<double>(w[t]) : 1.0;
      }
      parts[p] = acc;
    });
    throw_bad_target(parts, C, op);
    double total = 0;
    for (const Piece& p : parts) total += p.weight;
    double scale = red == LossReduction::Mean ? 1.0 / total : 1.0;
    // Pass 2: scatter. Each (n, s) writes its own element, so pieces never collide.
    run_pieces(M, [&](int64_t, int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        int64_t t = tg[i];
        if (t == ignore_index) continue;
        double gi = static_cast<double>(red == LossReduction::None ? g[i] : g[0]) * scale;
        gxp[(i / S) * C * S + t * S + i % S] = static_cast<T>(-(w ? static_cast<double>(w[t]) : 1.0) * gi);
      }
    });
  });
  return gx;
}

// The loss of cross_entropy once log_softmax is taken, for the cases nll_loss does not cover:
// label smoothing, or class-probability targets.
Tensor cross_entropy_log_probs_cpu(const Tensor& lp, const Tensor& target, const Tensor& weight,
                                   LossReduction reduction, int64_t ignore_index, double label_smoothing) {
  const char* op = "cross_entropy";
  ClassLossPlan l = plan_cross_entropy(lp, target, weight, reduction, ignore_index, label_smoothing, op);
  LossReduction red = l.reduction;
  if (l.probability_targets) {
    return dispatch_floating(lp.dtype(), op, [&]<class T>() {
      return probability_loss<T>(lp, target, weight, red, label_smoothing, l);
    });
  }
  return dispatch_floating(lp.dtype(), op, [&]<class T>() {
    return class_index_loss<T>(lp, target, weight, red, ignore_index, label_smoothing, l, op);
  });
}

Tensor mse_loss_cpu(const Tensor& input, const Tensor& target, LossReduction reduction) {
  const char* op = "mse_loss";
  MseLossPlan plan = plan_mse_loss(input, target, reduction, op);
  LossReduction red = plan.reduction;
  DType dt = plan.dtype;
  Tensor a = contiguous_cpu(input, dt), b = contiguous_cpu(target, dt);
  int64_t n = input.numel();
  Tensor none_out = red == LossReduction::None ? new_tensor(input.sizes(), dt, input.device()) : Tensor();
  std::vector<Piece> parts(static_cast<size_t>(std::max<int64_t>(1, (n + kGrainSize - 1) / kGrainSize)));
  dispatch_floating(dt, op, [&]<class T>() {
    const T* x = static_cast<const T*>(a.data_ptr());
    const T* y = static_cast<const T*>(b.data_ptr());
    T* no = none_out.defined() ? static_cast<T*>(none_out.data_ptr()) : nullptr;
    run_pieces(n, [&](int64_t p, int64_t lo, int64_t hi) {
      if (no) {
        for (int64_t i = lo; i < hi; ++i) no[i] = (x[i] - y[i]) * (x[i] - y[i]);
        return;
      }
      double s = 0;
      for (int64_t i = lo; i < hi; ++i) {
        double d = static_cast<double>(x[i]) - static_cast<double>(y[i]);
        s += d * d;
      }
      parts[p].loss = s;
      parts[p].weight = static_cast<double>(hi - lo);
    });
  });
  return finish_loss(parts, red, dt, input.device(), none_out);
}

}  // namespace kernels

namespace ops {

// log_softmax over the class dim (0 for a 1-D input, else 1), then nll_loss; label smoothing and
// probability targets go to their own kernel.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight, Option<LossReduction> reduction,
                     int64_t ignore_index, double label_smoothing) {
  const LossReduction r = reduction.value("cross_entropy");
  kernels::check_defined(logits, "cross_entropy", "input");
  kernels::check_defined(target, "cross_entropy", "target");
  GRAFT_CHECK(logits.dim() >= 1, "cross_entropy: expected an input with a class dim (1-D or more), got ",
              describe(logits));
  Tensor lp = log_softmax(logits, logits.dim() == 1 ? 0 : 1);
  if (label_smoothing == 0.0 && !is_floating(target.dtype())) return nll_loss(lp, target, weight, r, ignore_index);
  return cross_entropy_log_probs(lp, target, weight, r, ignore_index, label_smoothing);
}

}  // namespace ops
}  // namespace graft
