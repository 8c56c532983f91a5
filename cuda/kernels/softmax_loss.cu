// softmax/log_softmax (+ backward) and loss kernels (see softmax_loss.h).
//
// Softmax: with inner == 1 each row of D is contiguous and a group of G threads (32, or 256 for
// long rows) shares it: max, then the sum of exp, then the write, each a strided pass plus a
// group reduction. Otherwise one thread owns an (outer, inner) position and walks d, so a warp
// reads D-strided but inner-contiguous memory.
// Losses: one thread per sample, per-thread double sums, a block tree into per-block partials,
// and one block adding the partials in order (deterministic for a given shape).
#include "cuda/kernels/softmax_loss.h"

#include <limits>
#include <type_traits>

#include "cuda/kernels/reduce_common.cuh"
#include "ops/scalar_math.h"

namespace graft::cuda {
using namespace rdetail;
namespace {

template <class T>
__device__ __forceinline__ T t_exp(T v) {
  if constexpr (std::is_same_v<T, float>) return expf(v);
  else return exp(v);
}

struct AddOp {
  __device__ void operator()(double& a, const double& b) const { a += b; }
};
template <class T>
struct MaxOp {  // never picks a NaN, as the CPU's `x > m ? x : m`
  __device__ void operator()(T& a, const T& b) const { a = b > a ? b : a; }
};

// ---- softmax forward ----
// T is the storage type, M = opmath_t<T> the compute type (T itself for float and double). The
// 16-bit types recompute exp(x - max) in the last pass instead of scaling what the middle pass
// stored, so each output is rounded once.

template <int G, bool Log, class T>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t D) {
  using M = math::opmath_t<T>;
  M* tbuf = shared_buffer<M>();
  double* dbuf = shared_buffer<double>();
  constexpr int kGroups = kBlock / G;
  int g = threadIdx.x / G, lane = threadIdx.x % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroups; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kGroups) {
    int64_t row = base + g;
    bool active = row < rows;
    const T* xr = x + row * D;
    T* yr = y + row * D;
    M m = -std::numeric_limits<M>::infinity();
    if (active)
      for (int64_t k = lane; k < D; k += G) {
        M v = static_cast<M>(xr[k]);
        m = v > m ? v : m;
      }
    m = group_reduce<G>(m, tbuf, MaxOp<M>{});
    double s = 0;
    if (active) {
      for (int64_t k = lane; k < D; k += G) {
        M e = t_exp(static_cast<M>(xr[k]) - m);
        if constexpr (!Log && std::is_same_v<T, M>) yr[k] = e;
        s += static_cast<double>(e);
      }
    }
    s = group_reduce<G>(s, dbuf, AddOp{});
    if (active) {
      if constexpr (Log) {
        M lse = static_cast<M>(m + log(s));
        for (int64_t k = lane; k < D; k += G) yr[k] = static_cast<T>(static_cast<M>(xr[k]) - lse);
      } else {
        M inv = static_cast<M>(1.0 / s);
        if constexpr (std::is_same_v<T, M>)
          for (int64_t k = lane; k < D; k += G) yr[k] *= inv;  // this thread wrote yr[k] above
        else
          for (int64_t k = lane; k < D; k += G) yr[k] = static_cast<T>(t_exp(static_cast<M>(xr[k]) - m) * inv);
      }
    }
  }
}

template <bool Log, class T>
__global__ void softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t D, int64_t inner) {
  using M = math::opmath_t<T>;
  for (int64_t t = global_thread(); t < outer * inner; t += global_stride()) {
    int64_t off = (t / inner) * D * inner + t % inner;
    const T* xc = x + off;
    T* yc = y + off;
    M m = -std::numeric_limits<M>::infinity();
    for (int64_t d = 0; d < D; ++d) {
      M v = static_cast<M>(xc[d * inner]);
      m = v > m ? v : m;
    }
    double s = 0;
    for (int64_t d = 0; d < D; ++d) {
      M e = t_exp(static_cast<M>(xc[d * inner]) - m);
      if constexpr (!Log && std::is_same_v<T, M>) yc[d * inner] = e;
      s += static_cast<double>(e);
    }
    if constexpr (Log) {
      M lse = static_cast<M>(m + log(s));
      for (int64_t d = 0; d < D; ++d) yc[d * inner] = static_cast<T>(static_cast<M>(xc[d * inner]) - lse);
    } else {
      M inv = static_cast<M>(1.0 / s);
      if constexpr (std::is_same_v<T, M>)
        for (int64_t d = 0; d < D; ++d) yc[d * inner] *= inv;
      else
        for (int64_t d = 0; d < D; ++d) yc[d * inner] = static_cast<T>(t_exp(static_cast<M>(xc[d * inner]) - m) * inv);
    }
  }
}

// ---- softmax backward ----

template <bool Log, class M>
__device__ __forceinline__ double backward_term(M g, M y) {
  if constexpr (Log) return static_cast<double>(g);
  else return static_cast<double>(g) * static_cast<double>(y);
}
template <bool Log, class M>
__device__ __forceinline__ M backward_value(M g, M y, M s) {
  if constexpr (Log) return g - t_exp(y) * s;
  else return y * (g - s);
}

template <int G, bool Log, class T>
__global__ void softmax_backward_rows_kernel(const T* g, const T* y, T* gx, int64_t rows, int64_t D) {
  using M = math::opmath_t<T>;
  double* dbuf = shared_buffer<double>();
  constexpr int kGroups = kBlock / G;
  int grp = threadIdx.x / G, lane = threadIdx.x % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroups; base < rows;
       base += static_cast<int64_t>(gridDim.x) * kGroups) {
    int64_t row = base + grp;
    bool active = row < rows;
    const T* gr = g + row * D;
    const T* yr = y + row * D;
    T* gxr = gx + row * D;
    double acc = 0;
    if (active)
      for (int64_t k = lane; k < D; k += G) acc += backward_term<Log, M>(gr[k], yr[k]);
    acc = group_reduce<G>(acc, dbuf, AddOp{});
    if (active) {
      M s = static_cast<M>(acc);
      for (int64_t k = lane; k < D; k += G) gxr[k] = static_cast<T>(backward_value<Log, M>(gr[k], yr[k], s));
    }
  }
}

template <bool Log, class T>
__global__ void softmax_backward_columns_kernel(const T* g, const T* y, T* gx, int64_t outer, int64_t D,
                                                int64_t inner) {
  using M = math::opmath_t<T>;
  for (int64_t t = global_thread(); t < outer * inner; t += global_stride()) {
    int64_t off = (t / inner) * D * inner + t % inner;
    double acc = 0;
    for (int64_t d = 0; d < D; ++d) acc += backward_term<Log, M>(g[off + d * inner], y[off + d * inner]);
    M s = static_cast<M>(acc);
    for (int64_t d = 0; d < D; ++d) {
      int64_t i = off + d * inner;
      gx[i] = static_cast<T>(backward_value<Log, M>(g[i], y[i], s));
    }
  }
}

// ---- losses ----

int loss_blocks(int64_t n) {
  int64_t b = (n + kBlock - 1) / kBlock;
  if (b < 1) b = 1;
  if (b > kLossBlocks) b = kLossBlocks;
  return static_cast<int>(b);
}

// Every thread of the block must call this after its grid-stride loop.
__device__ void store_block_partial(double loss, double weight, double* partial) {
  double* buf = shared_buffer<double>();
  loss = group_reduce<kBlock>(loss, buf, AddOp{});
  weight = group_reduce<kBlock>(weight, buf, AddOp{});
  if (threadIdx.x == 0) {
    partial[2 * blockIdx.x] = loss;
    partial[2 * blockIdx.x + 1] = weight;
  }
}

// One block: totals[0..1] = the summed (loss, weight) partials; *out = sum or sum / weight.
template <class T>
__global__ void loss_finish_kernel(const double* partial, int nblocks, LossReduction red, T* out, double* totals) {
  double* buf = shared_buffer<double>();
  double l = 0, w = 0;
  for (int b = threadIdx.x; b < nblocks; b += blockDim.x) {
    l += partial[2 * b];
    w += partial[2 * b + 1];
  }
  l = group_reduce<kBlock>(l, buf, AddOp{});
  w = group_reduce<kBlock>(w, buf, AddOp{});
  if (threadIdx.x == 0) {
    totals[0] = l;
    totals[1] = w;
    if (out) *out = static_cast<T>(red == LossReduction::Sum ? l : l / w);
  }
}

template <class T>
__global__ void class_index_loss_kernel(const T* lp, const int64_t* tg, const T* w, int64_t M, int64_t C, int64_t S,
                                        int64_t ignore_index, double ls, T* none_out, double* partial) {
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = global_thread(); i < M; i += global_stride()) {
    int64_t t = tg[i];
    double loss = 0;
    if (t != ignore_index) {
      const T* row = lp + (i / S) * C * S + i % S;  // lp[n, 0, s]; classes are S apart
      double wt;
      loss = scalar_math::class_index_loss_term(row, S, C, t, w, ls, &wt);
      loss_sum += loss;
      weight_sum += wt;
    }
    if (none_out) none_out[i] = static_cast<T>(loss);
  }
  if (partial) store_block_partial(loss_sum, weight_sum, partial);
}

template <class T>
__global__ void probability_loss_kernel(const T* lp, const T* y, const T* w, int64_t M, int64_t C, int64_t S,
                                        double ls, T* none_out, double* partial) {
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = global_thread(); i < M; i += global_stride()) {
    int64_t base = (i / S) * C * S + i % S;
    double loss = scalar_math::probability_loss_term(lp + base, y + base, S, C, w, ls);
    loss_sum += loss;
    weight_sum += 1;
    if (none_out) none_out[i] = static_cast<T>(loss);
  }
  if (partial) store_block_partial(loss_sum, weight_sum, partial);
}

template <class T>
__global__ void target_weight_kernel(const int64_t* tg, const T* w, int64_t M, int64_t ignore_index,
                                     double* partial) {
  double weight_sum = 0;
  for (int64_t i = global_thread(); i < M; i += global_stride()) {
    int64_t t = tg[i];
    if (t != ignore_index) weight_sum += w ? static_cast<double>(w[t]) : 1.0;
  }
  store_block_partial(0, weight_sum, partial);
}

// Each sample writes its own element of gx, so no two threads collide.
template <class T>
__global__ void nll_loss_backward_kernel(const T* g, const int64_t* tg, const T* w, int64_t M, int64_t C, int64_t S,
                                         int64_t ignore_index, LossReduction red, const double* totals, T* gx) {
  double scale = red == LossReduction::Mean ? 1.0 / totals[1] : 1.0;
  for (int64_t i = global_thread(); i < M; i += global_stride()) {
    int64_t t = tg[i];
    if (t == ignore_index) continue;
    double gi = static_cast<double>(red == LossReduction::None ? g[i] : g[0]) * scale;
    gx[(i / S) * C * S + t * S + i % S] = static_cast<T>(-(w ? static_cast<double>(w[t]) : 1.0) * gi);
  }
}

template <class T>
__global__ void mse_loss_kernel(const T* a, const T* b, int64_t n, T* none_out, double* partial) {
  double s = 0, count = 0;
  for (int64_t i = global_thread(); i < n; i += global_stride()) {
    if (none_out) {
      none_out[i] = (a[i] - b[i]) * (a[i] - b[i]);
    } else {
      double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
      s += d * d;
      count += 1;
    }
  }
  if (partial) store_block_partial(s, count, partial);
}

template <class T>
void finish_loss(int nblocks, LossReduction red, void* out, double* scratch, cudaStream_t stream) {
  loss_finish_kernel<T><<<1, kBlock, 0, stream>>>(scratch, nblocks, red, static_cast<T*>(out),
                                                 scratch + 2 * kLossBlocks);
  check_launch("loss_finish_kernel");
}

}  // namespace

void launch_softmax_forward(const void* x, void* y, DType dtype, bool log, int64_t outer, int64_t D, int64_t inner,
                            cudaStream_t stream) {
  if (outer * D * inner == 0) return;
  with_floating_or_reduced(dtype, "launch_softmax_forward", [&](auto tag) {
    using T = decltype(tag);
    const T* xp = static_cast<const T*>(x);
    T* yp = static_cast<T*>(y);
    if (inner == 1) {
      if (D > 1024) {
        auto k = log ? softmax_rows_kernel<256, true, T> : softmax_rows_kernel<256, false, T>;
        k<<<grid_for(outer, 1), kBlock, 0, stream>>>(xp, yp, outer, D);
      } else {
        auto k = log ? softmax_rows_kernel<32, true, T> : softmax_rows_kernel<32, false, T>;
        k<<<grid_for(outer, kBlock / 32), kBlock, 0, stream>>>(xp, yp, outer, D);
      }
      check_launch("softmax_rows_kernel");
    } else {
      auto k = log ? softmax_columns_kernel<true, T> : softmax_columns_kernel<false, T>;
      k<<<grid_for(outer * inner), kBlock, 0, stream>>>(xp, yp, outer, D, inner);
      check_launch("softmax_columns_kernel");
    }
  });
}

void launch_softmax_backward(const void* g, const void* y, void* gx, DType dtype, bool log, int64_t outer, int64_t D,
                             int64_t inner, cudaStream_t stream) {
  if (outer * D * inner == 0) return;
  with_floating_or_reduced(dtype, "launch_softmax_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* gp = static_cast<const T*>(g);
    const T* yp = static_cast<const T*>(y);
    T* gxp = static_cast<T*>(gx);
    if (inner == 1) {
      if (D > 1024) {
        auto k = log ? softmax_backward_rows_kernel<256, true, T> : softmax_backward_rows_kernel<256, false, T>;
        k<<<grid_for(outer, 1), kBlock, 0, stream>>>(gp, yp, gxp, outer, D);
      } else {
        auto k = log ? softmax_backward_rows_kernel<32, true, T> : softmax_backward_rows_kernel<32, false, T>;
        k<<<grid_for(outer, kBlock / 32), kBlock, 0, stream>>>(gp, yp, gxp, outer, D);
      }
      check_launch("softmax_backward_rows_kernel");
    } else {
      auto k = log ? softmax_backward_columns_kernel<true, T> : softmax_backward_columns_kernel<false, T>;
      k<<<grid_for(outer * inner), kBlock, 0, stream>>>(gp, yp, gxp, outer, D, inner);
      check_launch("softmax_backward_columns_kernel");
    }
  });
}

void launch_class_index_loss(const void* lp, const int64_t* target, const void* weight, DType dtype, int64_t M,
                             int64_t C, int64_t S, int64_t ignore_index, double label_smoothing, LossReduction red,
                             void* none_out, void* out, double* scratch, cudaStream_t stream) {
  with_floating_or_reduced(dtype, "launch_class_index_loss", [&](auto tag) {
    using T = decltype(tag);
    bool reduce = red != LossReduction::None;
    if (!reduce && M == 0) return;
    int nblocks = reduce ? loss_blocks(M) : static_cast<int>(grid_for(M));
    class_index_loss_kernel<T><<<nblocks, kBlock, 0, stream>>>(
        static_cast<const T*>(lp), target, static_cast<const T*>(weight), M, C, S, ignore_index, label_smoothing,
        reduce ? nullptr : static_cast<T*>(none_out), reduce ? scratch : nullptr);
    check_launch("class_index_loss_kernel");
    if (reduce) finish_loss<T>(nblocks, red, out, scratch, stream);
  });
}

void launch_probability_loss(const void* lp, const void* y, const void* weight, DType dtype, int64_t M, int64_t C,
                             int64_t S, double label_smoothing, LossReduction red, void* none_out, void* out,
                             double* scratch, cudaStream_t stream) {
  with_floating(dtype, "launch_probability_loss", [&](auto tag) {
    using T = decltype(tag);
    bool reduce = red != LossReduction::None;
    if (!reduce && M == 0) return;
    int nblocks = reduce ? loss_blocks(M) : static_cast<int>(grid_for(M));
    probability_loss_kernel<T><<<nblocks, kBlock, 0, stream>>>(
        static_cast<const T*>(lp), static_cast<const T*>(y), static_cast<const T*>(weight), M, C, S, label_smoothing,
        reduce ? nullptr : static_cast<T*>(none_out), reduce ? scratch : nullptr);
    check_launch("probability_loss_kernel");
    if (reduce) finish_loss<T>(nblocks, red, out, scratch, stream);
  });
}

void launch_nll_loss_backward(const void* grad, const int64_t* target, const void* weight, DType dtype, int64_t M,
                              int64_t C, int64_t S, int64_t ignore_index, LossReduction red, void* gx, double* scratch,
                              cudaStream_t stream) {
  if (M == 0) return;
  with_floating_or_reduced(dtype, "launch_nll_loss_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* w = static_cast<const T*>(weight);
    if (red == LossReduction::Mean) {
      int nblocks = loss_blocks(M);
      target_weight_kernel<T><<<nblocks, kBlock, 0, stream>>>(target, w, M, ignore_index, scratch);
      check_launch("target_weight_kernel");
      finish_loss<T>(nblocks, red, nullptr, scratch, stream);
    }
    nll_loss_backward_kernel<T><<<grid_for(M), kBlock, 0, stream>>>(static_cast<const T*>(grad), target, w, M, C, S,
                                                                   ignore_index, red, scratch + 2 * kLossBlocks,
                                                                   static_cast<T*>(gx));
    check_launch("nll_loss_backward_kernel");
  });
}

void launch_mse_loss(const void* a, const void* b, DType dtype, int64_t n, LossReduction red, void* none_out, void* out,
                     double* scratch, cudaStream_t stream) {
  with_floating(dtype, "launch_mse_loss", [&](auto tag) {
    using T = decltype(tag);
    bool reduce = red != LossReduction::None;
    if (!reduce && n == 0) return;
    int nblocks = reduce ? loss_blocks(n) : static_cast<int>(grid_for(n));
    mse_loss_kernel<T><<<nblocks, kBlock, 0, stream>>>(static_cast<const T*>(a), static_cast<const T*>(b), n,
                                                      reduce ? nullptr : static_cast<T*>(none_out),
                                                      reduce ? scratch : nullptr);
    check_launch("mse_loss_kernel");
    if (reduce) finish_loss<T>(nblocks, red, out, scratch, stream);
  });
}

}  // namespace graft::cuda
