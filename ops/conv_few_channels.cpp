#include "ops/conv_few_channels.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "ops/kernel_utils.h"
#include "ops/reduced_float.h"
#include "ops/vec_math.h"
#include "runtime/parallel.h"

namespace graft::kernels {
namespace {

using vec_math::f32x16;
using vec_math::kLanes;
using vec_math::load;
using vec_math::store;

// What both kernels read: the geometry, x through its strides (elements), and the weights or their
// gradient as [taps, Op] float rows, Op = 16 * NV output channels (zero beyond O).
struct FewConv {
  const ConvParams* p = nullptr;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;  // x's strides
  int64_t taps = 0, Op = 0;
};

// The output columns [lo, hi) whose every tap lies inside the input row (no bounds checks there).
GRAFT_VEC_INLINE std::pair<int64_t, int64_t> interior_columns(const ConvParams& p) {
  const int64_t reach = (p.kw - 1) * p.dw;  // the last tap's offset from the first
  const int64_t lo = std::min(p.OW, (p.pw + p.sw - 1) / p.sw);
  const int64_t hi = p.W - 1 - reach + p.pw < 0 ? 0 : std::min(p.OW, (p.W - 1 - reach + p.pw) / p.sw + 1);
  return {lo, std::max(lo, hi)};
}

// A row's input rows, one per (c, i) tap row inside the input: its data and the index of its
// first tap (c * kh + i) * kw.
struct TapRow {
  const float* x;
  int64_t t0;
};
GRAFT_VEC_INLINE int64_t tap_rows(const FewConv& a, const float* xn, int64_t oh, TapRow* out) {
  const ConvParams& p = *a.p;
  int64_t k = 0;
  for (int64_t c = 0; c < p.C; ++c)
    for (int64_t i = 0; i < p.kh; ++i) {
      const int64_t ih = oh * p.sh - p.ph + i * p.dh;
      if (ih >= 0 && ih < p.H) out[k++] = TapRow{xn + c * a.sc + ih * a.sh, (c * p.kh + i) * p.kw};
    }
  return k;
}

// Output pixels [ow, ow + Q) of one row into rowbuf (pixel q at rowbuf + (ow + q) * O, whole
// vectors: the lanes past O spill into the next pixel, which is written after, or into the slack).
// Q pixels at once load each tap's weights once and keep Q * NV independent sums (one pixel's
// taps in a row would wait on each multiply-add); `checked` tests each tap's column (the border).
template <class T, int NV, int Q>
GRAFT_VEC_INLINE void forward_pixels(const FewConv& a, const TapRow* rows, int64_t nrows, int64_t ow,
                                     const float* wt, const float* bias, float* rowbuf, bool checked) {
  const ConvParams& p = *a.p;
  const int64_t O = p.O, Op = a.Op;
  f32x16 acc[Q][NV];
  for (int q = 0; q < Q; ++q)
    for (int v = 0; v < NV; ++v) acc[q][v] = load(bias + v * kLanes);
  const int64_t iw0 = ow * p.sw - p.pw;
  for (int64_t k = 0; k < nrows; ++k)
    for (int64_t j = 0; j < p.kw; ++j) {
      const int64_t iw = iw0 + j * p.dw;
      if (checked && (iw < 0 || iw >= p.W)) continue;  // Q == 1 when checked
      const float* wr = wt + (rows[k].t0 + j) * Op;
      f32x16 wv[NV];
      for (int v = 0; v < NV; ++v) wv[v] = load(wr + v * kLanes);
      for (int q = 0; q < Q; ++q) {
        const float xv = rows[k].x[(iw + q * p.sw) * a.sw];
        for (int v = 0; v < NV; ++v) acc[q][v] += xv * wv[v];
      }
    }
  for (int q = 0; q < Q; ++q)
    for (int v = 0; v < NV; ++v) store(rowbuf + (ow + q) * O + v * kLanes, acc[q][v]);
}

// Output rows [r0, r1) (row r = (n, oh)) through rowbuf [OW * O + Op] into out's rows: out is
// channels-last, so a row is OW * O consecutive values. wt [taps, Op], bias [Op].
template <class T, int NV>
GRAFT_VEC_INLINE void forward_rows(const FewConv& a, const float* x, const float* wt, const float* bias, T* out,
                                   int64_t r0, int64_t r1, float* rowbuf) {
  constexpr int kBlock = 4;
  const ConvParams& p = *a.p;
  const int64_t O = p.O;
  const auto [lo, hi] = interior_columns(p);
  TapRow rows[kFewChannelsMaxTaps];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / p.OH, oh = r % p.OH;
    const int64_t nrows = tap_rows(a, x + n * a.sn, oh, rows);
    int64_t ow = 0;
    for (; ow < lo; ++ow) forward_pixels<T, NV, 1>(a, rows, nrows, ow, wt, bias, rowbuf, true);
    for (; ow + kBlock <= hi; ow += kBlock) forward_pixels<T, NV, kBlock>(a, rows, nrows, ow, wt, bias, rowbuf, false);
    for (; ow < p.OW; ++ow) forward_pixels<T, NV, 1>(a, rows, nrows, ow, wt, bias, rowbuf, ow >= hi);
    T* dst = out + r * p.OW * O;
    if constexpr (std::is_same_v<T, float>) std::memcpy(dst, rowbuf, static_cast<size_t>(p.OW * O) * sizeof(float));
    else from_float(rowbuf, dst, p.OW * O);
  }
}

// One chunk of output rows' contribution to the weight gradient: acc [taps, Op] += g x over the
// rows [r0, r1), in row order. K3 marks a 3 x 3 kernel on one channel (the CNN's first layer):
// its 9 x NV accumulators stay in registers; otherwise they accumulate in memory (L1).
template <class T, int NV, bool K3>
GRAFT_VEC_INLINE void weight_grad_rows(const FewConv& a, const float* x, const T* g, float* acc, int64_t r0, int64_t r1,
                                       float* rowbuf, bool bias) {
  const ConvParams& p = *a.p;
  const int64_t O = p.O, Op = a.Op;
  const auto [lo, hi] = interior_columns(p);
  constexpr int kRegTaps = K3 ? 9 : 1;
  f32x16 reg[kRegTaps][NV];
  if constexpr (K3)
    for (int t = 0; t < 9; ++t)
      for (int v = 0; v < NV; ++v) reg[t][v] = load(acc + t * Op + v * kLanes);
  // The bias gradient (the row after the taps' when `bias`): the same gradient vectors, summed.
  float* bias_acc = acc + a.taps * Op;
  f32x16 bsum[NV];
  for (int v = 0; v < NV; ++v) bsum[v] = bias ? load(bias_acc + v * kLanes) : f32x16{};
  TapRow rows[kFewChannelsMaxTaps];
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t n = r / p.OH, oh = r % p.OH;
    const float* xn = x + n * a.sn;
    const int64_t nrows = tap_rows(a, xn, oh, rows);
    // The gradient row as floats, padded so each pixel reads whole vectors.
    const T* grow = g + r * p.OW * O;
    if constexpr (std::is_same_v<T, float>) std::memcpy(rowbuf, grow, static_cast<size_t>(p.OW * O) * sizeof(float));
    else to_float(grow, rowbuf, p.OW * O);
    // The three input rows of a 3 x 3 kernel (null outside the input).
    const float* r3[3] = {nullptr, nullptr, nullptr};
    if constexpr (K3)
      for (int64_t k = 0; k < nrows; ++k) r3[rows[k].t0 / 3] = rows[k].x;
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      f32x16 gv[NV];
      for (int v = 0; v < NV; ++v) gv[v] = load(rowbuf + ow * O + v * kLanes);
      for (int v = 0; v < NV; ++v) bsum[v] += gv[v];
      if constexpr (K3) {
        if (ow >= lo && ow < hi) {
          const int64_t iw0k = ow * p.sw - p.pw;
          for (int i = 0; i < 3; ++i) {
            if (!r3[i]) continue;
            for (int j = 0; j < 3; ++j) {
              const float xv = r3[i][(iw0k + j * p.dw) * a.sw];
              for (int v = 0; v < NV; ++v) reg[i * 3 + j][v] += xv * gv[v];
            }
          }
          continue;
        }
        // Border columns: spill to memory, take the checked taps, reload.
        for (int t = 0; t < 9; ++t)
          for (int v = 0; v < NV; ++v) store(acc + t * Op + v * kLanes, reg[t][v]);
      }
      const int64_t iw0 = ow * p.sw - p.pw;
      for (int64_t k = 0; k < nrows; ++k)
        for (int64_t j = 0; j < p.kw; ++j) {
          const int64_t iw = iw0 + j * p.dw;
          if (iw < 0 || iw >= p.W) continue;
          const float xv = rows[k].x[iw * a.sw];
          float* at = acc + (rows[k].t0 + j) * Op;
          for (int v = 0; v < NV; ++v) store(at + v * kLanes, load(at + v * kLanes) + xv * gv[v]);
        }
      if constexpr (K3)
        for (int t = 0; t < 9; ++t)
          for (int v = 0; v < NV; ++v) reg[t][v] = load(acc + t * Op + v * kLanes);
    }
  }
  if constexpr (K3)
    for (int t = 0; t < 9; ++t)
      for (int v = 0; v < NV; ++v) store(acc + t * Op + v * kLanes, reg[t][v]);
  if (bias)
    for (int v = 0; v < NV; ++v) store(bias_acc + v * kLanes, bsum[v]);
}

// The clones' entry points (bfloat16, invariant 2); NV (output vectors) and the 9-tap case picked inside
// by plain branches (a lambda here would be compiled outside the clones).
template <class T, int NV>
GRAFT_VEC_INLINE void weight_grad_dispatch_taps(const FewConv& a, const float* x, const T* g, float* acc, int64_t r0,
                                                int64_t r1, float* rowbuf, bool bias) {
  if (a.p->C == 1 && a.p->kh == 3 && a.p->kw == 3 && NV <= 2)
    weight_grad_rows<T, NV, true>(a, x, g, acc, r0, r1, rowbuf, bias);
  else weight_grad_rows<T, NV, false>(a, x, g, acc, r0, r1, rowbuf, bias);
}
template <class T>
GRAFT_VEC_INLINE void forward_dispatch(const FewConv& a, const float* x, const float* wt, const float* bias, T* out,
                                       int64_t r0, int64_t r1, float* rowbuf) {
  switch (a.Op / kLanes) {
    case 1: forward_rows<T, 1>(a, x, wt, bias, out, r0, r1, rowbuf); break;
    case 2: forward_rows<T, 2>(a, x, wt, bias, out, r0, r1, rowbuf); break;
    case 3: forward_rows<T, 3>(a, x, wt, bias, out, r0, r1, rowbuf); break;
    default: forward_rows<T, 4>(a, x, wt, bias, out, r0, r1, rowbuf); break;
  }
}
template <class T>
GRAFT_VEC_INLINE void weight_grad_dispatch(const FewConv& a, const float* x, const T* g, float* acc, int64_t r0,
                                           int64_t r1, float* rowbuf, bool bias) {
  switch (a.Op / kLanes) {
    case 1: weight_grad_dispatch_taps<T, 1>(a, x, g, acc, r0, r1, rowbuf, bias); break;
    case 2: weight_grad_dispatch_taps<T, 2>(a, x, g, acc, r0, r1, rowbuf, bias); break;
    case 3: weight_grad_dispatch_taps<T, 3>(a, x, g, acc, r0, r1, rowbuf, bias); break;
    default: weight_grad_dispatch_taps<T, 4>(a, x, g, acc, r0, r1, rowbuf, bias); break;
  }
}
GRAFT_VECTOR_CLONES void forward_bf16(const FewConv& a, const float* x, const float* wt, const float* bias,
                                      BFloat16* out, int64_t r0, int64_t r1, float* rowbuf) {
  forward_dispatch<BFloat16>(a, x, wt, bias, out, r0, r1, rowbuf);
}
GRAFT_VECTOR_CLONES void weight_grad_bf16(const FewConv& a, const float* x, const BFloat16* g, float* acc,
                                          int64_t r0, int64_t r1, float* rowbuf, bool bias) {
  weight_grad_dispatch<BFloat16>(a, x, g, acc, r0, r1, rowbuf, bias);
}

FewConv few_conv(const ConvParams& p, const Tensor& x) {
  FewConv a;
  a.p = &p;
  a.sn = x.stride(0);
  a.sc = x.stride(1);
  a.sh = x.stride(2);
  a.sw = x.stride(3);
  a.taps = p.C * p.kh * p.kw;
  a.Op = (p.O + kLanes - 1) / kLanes * kLanes;
  return a;
}

// w [O, C, kh, kw] (any strides, x's dtype) as float rows [taps, Op].
std::vector<float> weight_rows(const FewConv& a, const Tensor& w) {
  const ConvParams& p = *a.p;
  Tensor wf = contiguous_cpu(w, kFloat32);
  const float* wp = wf.data_ptr<float>();
  std::vector<float> wt(static_cast<size_t>(a.taps * a.Op), 0.0f);
  for (int64_t o = 0; o < p.O; ++o)
    for (int64_t t = 0; t < a.taps; ++t) wt[static_cast<size_t>(t * a.Op + o)] = wp[o * a.taps + t];
  return wt;
}

// Rows per chunk of the weight gradient: a fixed split of the N * OH output rows (invariant 1).
constexpr int64_t kWeightGradChunks = 32;

}  // namespace

bool few_channels_conv(const ConvParams& p, DType dtype) {
  return dtype == kBFloat16 && p.batched && p.groups == 1 && p.C >= 1 &&
         p.C <= kFewChannelsMax && p.O >= 1 && p.O <= kFewChannelsMaxOut && p.C * p.kh * p.kw <= kFewChannelsMaxTaps;
}

void few_channels_conv_forward(const ConvParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
                               const Tensor& out) {
  // x in float once (few channels: small beside the output), so the taps broadcast from memory.
  const Tensor xf = contiguous_cpu(x, kFloat32);
  const FewConv a = few_conv(p, xf);
  const std::vector<float> wt = weight_rows(a, w);
  std::vector<float> b(static_cast<size_t>(a.Op), 0.0f);
  if (bias.defined()) {
    Tensor bf = contiguous_cpu(bias, kFloat32);
    std::copy(bf.data_ptr<float>(), bf.data_ptr<float>() + p.O, b.begin());
  }
  const int64_t rows = p.N * p.OH, work = p.OW * p.O * a.taps;
  parallel_for(0, rows, grain_for(work), [&](int64_t r0, int64_t r1) {
    std::vector<float> rowbuf(static_cast<size_t>(p.OW * p.O + a.Op));
    forward_bf16(a, xf.data_ptr<float>(), wt.data(), b.data(), static_cast<BFloat16*>(out.data_ptr()), r0, r1,
                 rowbuf.data());
  });
}

Tensor few_channels_conv_weight_grad(const ConvParams& p, const Tensor& grad_out, const Tensor& x, Tensor* grad_bias) {
  const Tensor xf = contiguous_cpu(x, kFloat32);
  const FewConv a = few_conv(p, xf);
  const int64_t rows = p.N * p.OH, chunks = std::min(rows, kWeightGradChunks);
  const bool bias = grad_bias != nullptr;
  const int64_t per = (a.taps + 1) * a.Op;  // the taps' rows, then the bias's
  std::vector<float> partial(static_cast<size_t>(chunks * per), 0.0f);
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    std::vector<float> rowbuf(static_cast<size_t>(p.OW * p.O + a.Op), 0.0f);
    for (int64_t k = c0; k < c1; ++k) {
      const int64_t r0 = rows * k / chunks, r1 = rows * (k + 1) / chunks;
      float* acc = partial.data() + k * per;
      weight_grad_bf16(a, xf.data_ptr<float>(), static_cast<const BFloat16*>(grad_out.data_ptr()), acc, r0, r1,
                       rowbuf.data(), bias);
    }
  });
  // Chunks summed in order, then [taps, Op] -> [O, C, kh, kw], rounded once.
  std::vector<float> sum(static_cast<size_t>(p.O * a.taps), 0.0f);
  for (int64_t k = 0; k < chunks; ++k)
    for (int64_t t = 0; t < a.taps; ++t)
      for (int64_t o = 0; o < p.O; ++o)
        sum[static_cast<size_t>(o * a.taps + t)] += partial[static_cast<size_t>(k * per + t * a.Op + o)];
  Tensor gw = new_tensor(p.weight_sizes(), x.dtype(), x.device());
  from_float(sum.data(), static_cast<BFloat16*>(gw.data_ptr()), p.O * a.taps);
  if (bias) {
    std::vector<float> b(static_cast<size_t>(p.O), 0.0f);
    for (int64_t k = 0; k < chunks; ++k)
      for (int64_t o = 0; o < p.O; ++o) b[static_cast<size_t>(o)] += partial[static_cast<size_t>(k * per + a.taps * a.Op + o)];
    *grad_bias = new_tensor({p.O}, grad_out.dtype(), grad_out.device());
    from_float(b.data(), static_cast<BFloat16*>(grad_bias->data_ptr()), p.O);
  }
  return gw;
}

}  // namespace graft::kernels
