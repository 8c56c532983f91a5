// softmax / log_softmax over one dim, and their backward kernels.
//
// A contiguous tensor is [outer, D, inner] around the softmax dim. When inner == 1 (the last dim,
// the common case) each row of D is contiguous and handled by a *_row function. Otherwise a block
// of up to kLanes neighbouring inner positions is handled at once: the loops run over d outside
// and the lanes inside, so every read is contiguous (no stride-`inner` walk per element).
// Both forms subtract the max before exp, so large logits never overflow.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/softmax_loss_plan.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

constexpr int64_t kLanes = 64;

// Runs row(offset) for each contiguous row when inner == 1, else block(offset, width) for each
// group of lanes; consecutive d are `inner` elements apart.
template <class Row, class Block>
void along_dim(const DimSplit& s, const Row& row, const Block& block) {
  int64_t D = std::max<int64_t>(s.size, 1);
  if (s.inner == 1) {
    parallel_for(0, s.outer, std::max<int64_t>(1, kGrainSize / D), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) row(o * s.size);
    });
    return;
  }
  int64_t nb = (s.inner + kLanes - 1) / kLanes;
  parallel_for(0, s.outer * nb, std::max<int64_t>(1, kGrainSize / (D * kLanes)), [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      int64_t o = t / nb, j0 = (t % nb) * kLanes;
      block(o * s.size * s.inner + j0, std::min(kLanes, s.inner - j0));
    }
  });
}

// ---- forward ----

// y[D] = softmax(x[D]) (log_softmax when Log).
template <bool Log, class T>
void softmax_row(const T* x, T* y, int64_t D) {
  T m = -std::numeric_limits<T>::infinity();
  for (int64_t d = 0; d < D; ++d) m = x[d] > m ? x[d] : m;
  double s = 0;
  if constexpr (Log) {
    for (int64_t d = 0; d < D; ++d) s += static_cast<double>(std::exp(x[d] - m));
    T lse = static_cast<T>(m + std::log(s));
    for (int64_t d = 0; d < D; ++d) y[d] = x[d] - lse;
  } else {
    for (int64_t d = 0; d < D; ++d) {
      y[d] = std::exp(x[d] - m);
      s += static_cast<double>(y[d]);
    }
    T inv = static_cast<T>(1.0 / s);
    for (int64_t d = 0; d < D; ++d) y[d] *= inv;
  }
}

// The same for W lanes; element (d, j) is at d * stride + j.
template <bool Log, class T>
void softmax_block(const T* x, T* y, int64_t D, int64_t stride, int64_t W) {
  T m[kLanes];
  double s[kLanes];
  std::fill(m, m + W, -std::numeric_limits<T>::infinity());
  std::fill(s, s + W, 0.0);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < W; ++j) m[j] = x[d * stride + j] > m[j] ? x[d * stride + j] : m[j];
  if constexpr (Log) {
    for (int64_t d = 0; d < D; ++d)
      for (int64_t j = 0; j < W; ++j) s[j] += static_cast<double>(std::exp(x[d * stride + j] - m[j]));
    T lse[kLanes];
    for (int64_t j = 0; j < W; ++j) lse[j] = static_cast<T>(m[j] + std::log(s[j]));
    for (int64_t d = 0; d < D; ++d)
      for (int64_t j = 0; j < W; ++j) y[d * stride + j] = x[d * stride + j] - lse[j];
  } else {
    for (int64_t d = 0; d < D; ++d)
      for (int64_t j = 0; j < W; ++j) {
        T e = std::exp(x[d * stride + j] - m[j]);
        y[d * stride + j] = e;
        s[j] += static_cast<double>(e);
      }
    T inv[kLanes];
    for (int64_t j = 0; j < W; ++j) inv[j] = static_cast<T>(1.0 / s[j]);
    for (int64_t d = 0; d < D; ++d)
      for (int64_t j = 0; j < W; ++j) y[d * stride + j] *= inv[j];
  }
}

template <bool Log>
Tensor softmax_impl(const Tensor& x, int64_t dim, const char* op) {
  DimSplit s = plan_softmax(x, dim, op);
  Tensor in = contiguous_cpu(x);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    const T* xp = static_cast<const T*>(in.data_ptr());
    T* yp = static_cast<T*>(out.data_ptr());
    along_dim(
        s, [&](int64_t off) { softmax_row<Log>(xp + off, yp + off, s.size); },
        [&](int64_t off, int64_t w) { softmax_block<Log>(xp + off, yp + off, s.size, s.inner, w); });
  });
  return out;
}

// ---- backward ----
// softmax:     gx = y * (g - sum_d(g * y))
// log_softmax: gx = g - exp(y) * sum_d(g)

template <bool Log, class T>
void softmax_backward_row(const T* g, const T* y, T* gx, int64_t D) {
  double acc = 0;
  if constexpr (Log) {
    for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(g[d]);
    T s = static_cast<T>(acc);
    for (int64_t d = 0; d < D; ++d) gx[d] = g[d] - std::exp(y[d]) * s;
  } else {
    for (int64_t d = 0; d < D; ++d) acc += static_cast<double>(g[d]) * static_cast<double>(y[d]);
    T s = static_cast<T>(acc);
    for (int64_t d = 0; d < D; ++d) gx[d] = y[d] * (g[d] - s);
  }
}

template <bool Log, class T>
void softmax_backward_block(const T* g, const T* y, T* gx, int64_t D, int64_t stride, int64_t W) {
  double acc[kLanes];
  std::fill(acc, acc + W, 0.0);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < W; ++j) {
      int64_t i = d * stride + j;
      if constexpr (Log) acc[j] += static_cast<double>(g[i]);
      else acc[j] += static_cast<double>(g[i]) * static_cast<double>(y[i]);
    }
  T s[kLanes];
  for (int64_t j = 0; j < W; ++j) s[j] = static_cast<T>(acc[j]);
  for (int64_t d = 0; d < D; ++d)
    for (int64_t j = 0; j < W; ++j) {
      int64_t i = d * stride + j;
      if constexpr (Log) gx[i] = g[i] - std::exp(y[i]) * s[j];
      else gx[i] = y[i] * (g[i] - s[j]);
    }
}

template <bool Log>
Tensor softmax_backward_impl(const Tensor& grad, const Tensor& out, int64_t dim, const char* op) {
  DimSplit s = plan_softmax_backward(grad, out, dim, op);
  Tensor g = contiguous_cpu(grad), y = contiguous_cpu(out);
  Tensor gx = new_tensor(out.sizes(), out.dtype(), out.device());
  if (out.numel() == 0) return gx;
  dispatch_floating(out.dtype(), op, [&]<class T>() {
    const T* gp = static_cast<const T*>(g.data_ptr());
    const T* yp = static_cast<const T*>(y.data_ptr());
    T* op_ = static_cast<T*>(gx.data_ptr());
    along_dim(
        s, [&](int64_t off) { softmax_backward_row<Log>(gp + off, yp + off, op_ + off, s.size); },
        [&](int64_t off, int64_t w) {
          softmax_backward_block<Log>(gp + off, yp + off, op_ + off, s.size, s.inner, w);
        });
  });
  return gx;
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor softmax_cpu(const Tensor& x, int64_t dim) { return softmax_impl<false>(x, dim, "softmax"); }

Tensor log_softmax_cpu(const Tensor& x, int64_t dim) { return softmax_impl<true>(x, dim, "log_softmax"); }

Tensor softmax_backward_cpu(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_impl<false>(grad, out, dim, "softmax_backward");
}

Tensor log_softmax_backward_cpu(const Tensor& grad, const Tensor& out, int64_t dim) {
  return softmax_backward_impl<true>(grad, out, dim, "log_softmax_backward");
}

}  // namespace kernels

}  // namespace graft
