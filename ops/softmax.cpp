// softmax / log_softmax over one dim, and their backward kernels.
//
// A contiguous tensor is [outer, D, inner] around the softmax dim. When inner == 1 (the last dim,
// the common case) each row of D is contiguous and handled by a *_row function. Otherwise a block
// of up to kLanes neighbouring inner positions is handled at once: the loops run over d outside
// and the lanes inside, so every read is contiguous (no stride-`inner` walk per element).
// Both forms subtract the max before exp, so large logits never overflow.
//
// bfloat16 / float16: each row (or block of lanes) is converted to float (ops/reduced_float.h),
// runs the float loops (max, exp and sums in float, sums accumulated in double) and is rounded
// once on the way out; nothing of the tensor is copied whole.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/softmax_loss_plan.h"
#include "ops/ops.h"
#include "ops/reduced_float.h"
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
    parallel_for(0, s.outer, grain_for(D), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) row(o * s.size);
    });
    return;
  }
  int64_t nb = (s.inner + kLanes - 1) / kLanes;
  parallel_for(0, s.outer * nb, grain_for(D * kLanes), [&](int64_t b, int64_t e) {
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

// A per-thread float work buffer of at least n elements (slot: two live buffers need two slots).
float* float_buffer(int slot, int64_t n) {
  thread_local std::vector<float> bufs[3];
  std::vector<float>& b = bufs[slot];
  if (b.size() < static_cast<size_t>(n)) b.resize(static_cast<size_t>(n));
  return b.data();
}

// Converts the D x W elements at `p` (d-th run of W at d * stride) to a dense float [D, W] block.
template <class T>
void gather_float(const T* p, float* f, int64_t D, int64_t stride, int64_t W) {
  for (int64_t d = 0; d < D; ++d) to_float(p + d * stride, f + d * W, W);
}
template <class T>
void scatter_rounded(const float* f, T* p, int64_t D, int64_t stride, int64_t W) {
  for (int64_t d = 0; d < D; ++d) from_float(f + d * W, p + d * stride, W);
}

// softmax / log_softmax of 16-bit x into y (both contiguous), in float.
template <bool Log, class T>
void softmax_reduced(const DimSplit& s, const T* xp, T* yp) {
  const int64_t D = s.size;
  along_dim(
      s,
      [&](int64_t off) {
        float* xf = float_buffer(0, D);
        float* yf = float_buffer(1, D);
        to_float(xp + off, xf, D);
        softmax_row<Log>(xf, yf, D);
        from_float(yf, yp + off, D);
      },
      [&](int64_t off, int64_t w) {
        float* xf = float_buffer(0, D * w);
        float* yf = float_buffer(1, D * w);
        gather_float(xp + off, xf, D, s.inner, w);
        softmax_block<Log>(xf, yf, D, w, w);
        scatter_rounded(yf, yp + off, D, s.inner, w);
      });
}

template <bool Log>
Tensor softmax_impl(const Tensor& x, int64_t dim, const char* op) {
  DimSplit s = plan_softmax(x, dim, op);
  Tensor in = contiguous_cpu(x);
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  if (x.numel() == 0) return out;
  if (x.dtype() == kBFloat16) {
    softmax_reduced<Log>(s, static_cast<const BFloat16*>(in.data_ptr()), static_cast<BFloat16*>(out.data_ptr()));
    return out;
  }
  if (x.dtype() == kFloat16) {
    softmax_reduced<Log>(s, static_cast<const Half*>(in.data_ptr()), static_cast<Half*>(out.data_ptr()));
    return out;
  }
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

// The backward of 16-bit g and y into gx, in float.
template <bool Log, class T>
void softmax_backward_reduced(const DimSplit& s, const T* gp, const T* yp, T* gxp) {
  const int64_t D = s.size;
  along_dim(
      s,
      [&](int64_t off) {
        float* gf = float_buffer(0, D);
        float* yf = float_buffer(1, D);
        float* of = float_buffer(2, D);
        to_float(gp + off, gf, D);
        to_float(yp + off, yf, D);
        softmax_backward_row<Log>(gf, yf, of, D);
        from_float(of, gxp + off, D);
      },
      [&](int64_t off, int64_t w) {
        float* gf = float_buffer(0, D * w);
        float* yf = float_buffer(1, D * w);
        float* of = float_buffer(2, D * w);
        gather_float(gp + off, gf, D, s.inner, w);
        gather_float(yp + off, yf, D, s.inner, w);
        softmax_backward_block<Log>(gf, yf, of, D, w, w);
        scatter_rounded(of, gxp + off, D, s.inner, w);
      });
}

template <bool Log>
Tensor softmax_backward_impl(const Tensor& grad, const Tensor& out, int64_t dim, const char* op) {
  DimSplit s = plan_softmax_backward(grad, out, dim, op);
  Tensor g = contiguous_cpu(grad), y = contiguous_cpu(out);
  Tensor gx = new_tensor(out.sizes(), out.dtype(), out.device());
  if (out.numel() == 0) return gx;
  if (out.dtype() == kBFloat16) {
    softmax_backward_reduced<Log>(s, static_cast<const BFloat16*>(g.data_ptr()),
                                  static_cast<const BFloat16*>(y.data_ptr()), static_cast<BFloat16*>(gx.data_ptr()));
    return gx;
  }
  if (out.dtype() == kFloat16) {
    softmax_backward_reduced<Log>(s, static_cast<const Half*>(g.data_ptr()), static_cast<const Half*>(y.data_ptr()),
                                  static_cast<Half*>(gx.data_ptr()));
    return gx;
  }
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
