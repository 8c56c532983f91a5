// 2-D max and average pooling (NCHW, or unbatched CHW) and their backward kernels.
//
//   max_pool2d_with_indices: input [N, C, H, W] -> out [N, C, OH, OW], indices (int64, flat h*W + w
//                            position of the max inside its own input plane, as PyTorch)
//   _max_pool2d_with_offsets: the same, with the winner as its uint8 offset in its window
//                            (i * kw + j): what max_pool2d saves for backward, an eighth of the
//                            indices' bytes
//   max_pool2d_backward:     grad_out scattered to those positions -> grad_input [N, C, H, W]
//   _max_pool2d_offsets_backward: the same scatter, each offset decoded against its window
//   avg_pool2d(_backward):   mean over each window; the divisor counts padding when
//                            count_include_pad, and windows are clipped to input + right padding.
// Output size (PyTorch's pooling_output_shape):
//   OH = floor_or_ceil((H + 2*padH - dilH*(kH-1) - 1) / strideH) + 1, and with ceil_mode the
//   last window must start inside the input or the left padding, else it is dropped.
// Direct loops, one task per input plane (N*C of them) above a grain; pooling is memory-bound and
// simple loops match oneDNN here while giving exactly PyTorch's NaN and index semantics.
// Max and average pooling of a channels-last input run NHWC loops (channels innermost, so each
// window's compare or sum runs across C in SIMD) and return channels-last results, as PyTorch
// does. Max pooling's indices keep their meaning (h*W + w inside the plane), so either backward
// layout reads them; both backward kernels give a channels-last input a channels-last gradient.
// Max pooling is native in bfloat16/float16: windows compare in float (exact both ways), and the
// backward accumulates each image's (or plane's) gradient in float and rounds it once.
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "ops/cpu_kernels.h"
#include "ops/cpu_parts.h"
#include "ops/conv_pool_params.h"
#include "ops/kernel_utils.h"
#include "ops/math/device_math.h"
#include "ops/reduced_float.h"
#include "ops/vec_math.h"
#include "ops/ops.h"
#include "runtime/cpu_isa.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

int64_t plane_grain(const PoolParams& p) {
  return grain_for(p.OH * p.OW * p.kh * p.kw);
}

// ---- max ----

// Windows that tile the input: kernel == stride, no padding or dilation, and every window inside
// the input (a 2x2 stride-2 pool in floor mode). Each input position then lies in at most one
// window, at a tap known in advance: (h, w) is tap (h % kh) * kw + w % kw of window (h / kh, w / kw).
bool max_pool_windows_tile(const PoolParams& w) {
  return w.sh == w.kh && w.sw == w.kw && w.ph == 0 && w.pw == 0 && (w.kh == 1 || w.dh == 1) &&
         (w.kw == 1 || w.dw == 1) && w.OH * w.kh <= w.H && w.OW * w.kw <= w.W;
}

// Windows compare as math::opmath_t<T>: the type itself, float for bfloat16/float16 (exact: a
// 16-bit float widens to float without loss, and the winner narrows back to itself). Gradients
// accumulate in it too, so a position hit by several windows is rounded once, at the end.
template <class T>
using PoolCompare = math::opmath_t<T>;
template <class T>
using PoolAccum = math::opmath_t<T>;
template <class A>
constexpr A lowest_of() {
  return std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
}

// Output positions o in [lo, hi) whose input index o*stride + offset lies in [0, in).
std::pair<int64_t, int64_t> valid_range(int64_t out, int64_t in, int64_t stride, int64_t offset) {
  int64_t lo = offset >= 0 ? 0 : (-offset + stride - 1) / stride;
  int64_t hi = in - 1 - offset < 0 ? 0 : (in - 1 - offset) / stride + 1;
  return {std::min(lo, out), std::min(hi, out)};
}

// One output row at a time, kernel taps outermost and output columns innermost: the columns are
// independent, so the loop runs many max chains side by side instead of one short dependent
// chain per window. Taps are visited in window scan order (h, then w), so the first maximum wins
// exactly as in a per-window scan. The row's running max and winning tap number (int32 next to
// float, so one SIMD lane each) live in local arrays: the compare-and-select loop vectorises, and
// a tap becomes its h*W + w index once per row through a per-row table; a window offset (I =
// uint8_t) is the tap itself. ind may be null. Planes [b, e).
template <class T, class I>
void max_pool_planes(const PoolParams& p, const T* x, T* y, I* ind, int64_t b, int64_t e) {
  constexpr bool kOffsets = std::is_same_v<I, uint8_t>;
  // Locals, not p's fields: stores through y/ind could otherwise alias them and force reloads.
  const int64_t H = p.H, W = p.W, OH = p.OH, OW = p.OW, kh = p.kh, kw = p.kw;
  const int64_t sh = p.sh, sw = p.sw, ph = p.ph, pw = p.pw, dh = p.dh, dw = p.dw;
  using A = PoolCompare<T>;
  constexpr A lowest = lowest_of<A>();
  using Tap = std::conditional_t<sizeof(A) == 8, int64_t, int32_t>;
  std::vector<A> mrow(static_cast<size_t>(OW));
  std::vector<Tap> trow(static_cast<size_t>(OW));
  std::vector<int64_t> tap_off(static_cast<size_t>(kh * kw));  // tap -> index at output column 0
  A* __restrict mv = mrow.data();
  Tap* __restrict tap = trow.data();
  for (int64_t pl = b; pl < e; ++pl) {
    const T* xp = x + pl * H * W;
    for (int64_t oh = 0; oh < OH; ++oh) {
      int64_t h0 = oh * sh - ph;
      for (int64_t ow = 0; ow < OW; ++ow) {
        mv[ow] = lowest;
        tap[ow] = -1;
      }
      for (int64_t i = 0; i < kh; ++i) {
        int64_t h = h0 + i * dh;
        if (h < 0 || h >= H) continue;
        for (int64_t j = 0; j < kw; ++j) {
          int64_t joff = j * dw - pw;
          auto [ow0, ow1] = valid_range(OW, W, sw, joff);
          const T* __restrict xr = xp + h * W + joff;
          const Tap t = static_cast<Tap>(i * kw + j);
          tap_off[i * kw + j] = h * W + joff;
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            A v = static_cast<A>(xr[ow * sw]);
            // NaN wins and propagates, as in PyTorch.
            bool take = (v > mv[ow]) | (v != v);
            mv[ow] = take ? v : mv[ow];
            tap[ow] = take ? t : tap[ow];
          }
        }
      }
      T* __restrict m = y + (pl * OH + oh) * OW;
      for (int64_t ow = 0; ow < OW; ++ow) m[ow] = static_cast<T>(mv[ow]);
      if (!ind) continue;
      I* __restrict best = ind + (pl * OH + oh) * OW;
      int64_t hs = h0;
      while (hs < 0) hs += dh;
      for (int64_t ow = 0; ow < OW; ++ow) {
        if (tap[ow] >= 0) {
          if constexpr (kOffsets)
            best[ow] = static_cast<I>(tap[ow]);
          else
            best[ow] = tap_off[tap[ow]] + ow * sw;
        } else {
          // PyTorch's index for a window with no element above -inf: its first valid position.
          int64_t ws = ow * sw - pw;
          while (ws < 0) ws += dw;
          if constexpr (kOffsets)
            best[ow] = static_cast<I>((hs - h0) / dh * kw + (ws - (ow * sw - pw)) / dw);
          else
            best[ow] = hs * W + ws;
        }
      }
    }
  }
}

// NCHW 2x2 windows with stride 2 on planes of even height and width: the input is then one flat
// run of window rows (rows 2R and 2R+1 hold window row R's taps, whichever plane R is in), so a
// chunk of window rows is pooled in two passes with no per-row setup:
//   across: each horizontal pair (x[2k], x[2k+1]) -> its larger value and tap column, over the
//           whole chunk as one flat loop (vectorised);
//   down:   the pairs of rows 2R and 2R+1 -> the window's value and tap i * 2 + j.
// Same order and rules as the row loop: the later element wins only when larger or NaN (so among
// NaNs the last one wins, as PyTorch's `val > maxval || isnan(val)`), and a window with nothing
// above -inf keeps tap 0, PyTorch's first valid position. The row loop above pays divisions and
// branches per output row and tap, which dominate small planes: float32 [128, 64, 14, 14] takes
// 2.1 ms there and 0.6 ms here, [128, 32, 28, 28] 1.8 and 0.7 ms (bf16: 3.0 and 0.6 ms).
// The NCHW Fashion-MNIST CNN step: 15.3 -> 13.4 ms (graft bench --filter '^cnn$', 2 cores, Xeon).
bool max_pool_flat_2x2(const PoolParams& p) {
  return p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0 && p.H == 2 * p.OH &&
         p.W == 2 * p.OW;
}

// mask ? a : b for an all-ones or all-zero mask as wide as A, on the bits.
template <class A, class M>
[[gnu::always_inline]] inline A select_bits(M mask, A a, A b) {
  static_assert(sizeof(A) == sizeof(M));
  M ab, bb;
  std::memcpy(&ab, &a, sizeof ab);
  std::memcpy(&bb, &b, sizeof bb);
  const M r = (ab & mask) | (bb & ~mask);
  A out;
  std::memcpy(&out, &r, sizeof out);
  return out;
}

template <class T, class I>
[[gnu::always_inline]] inline void max_pool_flat_2x2_rows(const PoolParams& p, const T* x, T* y, I* ind, int64_t b,
                                                          int64_t e) {
  constexpr bool kOffsets = std::is_same_v<I, uint8_t>;
  using A = PoolCompare<T>;
  // Tap numbers as wide as A, so each compare-and-select loop is one vector lane per element.
  using Tap = std::conditional_t<sizeof(A) == 8, int64_t, int32_t>;
  const int64_t OW = p.OW, OH = p.OH, W = p.W;
  constexpr int64_t kRows = 64;  // window rows per chunk: the pass buffers stay in L1/L2
  std::vector<A> hbuf(static_cast<size_t>(kRows * 2 * OW)), vbuf(static_cast<size_t>(kRows * OW));
  std::vector<Tap> tbuf(static_cast<size_t>(kRows * 2 * OW)), ubuf(static_cast<size_t>(kRows * OW));
  A* __restrict hm = hbuf.data();
  A* __restrict vm = vbuf.data();
  Tap* __restrict ht = tbuf.data();
  Tap* __restrict vt = ubuf.data();
  for (int64_t r0 = b; r0 < e; r0 += kRows) {
    const int64_t rows = std::min(kRows, e - r0), pairs = rows * 2 * OW;
    const T* __restrict xs = x + r0 * 2 * W;
    for (int64_t k = 0; k < pairs; ++k) {
      const A a = static_cast<A>(xs[2 * k]), c = static_cast<A>(xs[2 * k + 1]);
      const bool take = (c > a) | (c != c);
      hm[k] = take ? c : a;
      ht[k] = take ? Tap(1) : Tap(0);
    }
    for (int64_t q = 0; q < rows; ++q) {
      const A* __restrict top = hm + q * 2 * OW;
      const A* __restrict bot = top + OW;
      const Tap* __restrict ttop = ht + q * 2 * OW;
      const Tap* __restrict tbot = ttop + OW;
      A* __restrict m = vm + q * OW;
      Tap* __restrict t = vt + q * OW;
      // OW is short (7, 14): this loop runs scalar, and masks keep it free of branches, which
      // random data mispredicts.
      for (int64_t ow = 0; ow < OW; ++ow) {
        const Tap take = -static_cast<Tap>((bot[ow] > top[ow]) | (bot[ow] != bot[ow]));
        m[ow] = select_bits(take, bot[ow], top[ow]);
        t[ow] = ((Tap(2) + tbot[ow]) & take) | (ttop[ow] & ~take);
      }
    }
    const int64_t outs = rows * OW;
    T* __restrict yr = y + r0 * OW;
    for (int64_t o = 0; o < outs; ++o) yr[o] = static_cast<T>(vm[o]);
    if (!ind) continue;
    I* __restrict ir = ind + r0 * OW;
    if constexpr (kOffsets) {
      for (int64_t o = 0; o < outs; ++o) ir[o] = static_cast<I>(vt[o]);
    } else {
      for (int64_t q = 0; q < rows; ++q) {
        const int64_t oh = (r0 + q) % OH;
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t tp = vt[q * OW + ow];
          ir[q * OW + ow] = (oh * 2 + tp / 2) * W + ow * 2 + tp % 2;
        }
      }
    }
  }
}
template <class T, class I>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void max_pool_flat_2x2_avx512(
    const PoolParams& p, const T* x, T* y, I* ind, int64_t b, int64_t e) {
  max_pool_flat_2x2_rows<T, I>(p, x, y, ind, b, e);
}
template <class T, class I>
__attribute__((target("avx2,fma,f16c"))) void max_pool_flat_2x2_avx2(const PoolParams& p, const T* x, T* y, I* ind,
                                                                      int64_t b, int64_t e) {
  max_pool_flat_2x2_rows<T, I>(p, x, y, ind, b, e);
}
template <class T, class I>
void max_pool_flat_2x2_generic(const PoolParams& p, const T* x, T* y, I* ind, int64_t b, int64_t e) {
  max_pool_flat_2x2_rows<T, I>(p, x, y, ind, b, e);
}

template <class T, class I>
void max_pool_fwd(const PoolParams& p, const T* x, T* y, I* ind) {
  using Rows = void (*)(const PoolParams&, const T*, T*, I*, int64_t, int64_t);
  if (max_pool_flat_2x2(p)) {
    const Rows run = pick_for_isa<Rows>(&max_pool_flat_2x2_avx512<T, I>, &max_pool_flat_2x2_avx2<T, I>,
                                        &max_pool_flat_2x2_generic<T, I>);
    const int64_t grain = grain_for(p.OW * 4);
    parallel_for(0, p.planes() * p.OH, grain, [&](int64_t b, int64_t e) { run(p, x, y, ind, b, e); });
    return;
  }
  // (Unlike the loops above and below, the row loop gains nothing from AVX-512 or AVX2 copies: a
  // 3x3 stride-2 pool on [128, 32, 28, 28] took 5.1 ms with either, 3.3 ms without.)
  parallel_for(0, p.planes(), plane_grain(p),
               [&](int64_t b, int64_t e) { max_pool_planes<T, I>(p, x, y, ind, b, e); });
}

// x [N, H, W, C] -> y, ind [N, OH, OW, C] for output pixels [b, e): the same taps in the same
// order as max_pool_fwd, one output pixel's channels at a time, in chunks of kChunk. Inside a
// chunk the running max and the winner's h*W + w position (P: int32 where the plane allows, as
// wide as a float, so one SIMD lane each) live in local arrays and every tap is one
// compare-and-select loop across channels. The position starts at the window's first valid
// element: PyTorch's index for a window with nothing above -inf. With I = uint8_t the position is
// the window offset i * kw + j instead.
// A 2x2 stride-2 window of channels-last rows (x00 its top-left pixel's C values, row_stride to
// the pixel below) with uint8 window offsets: 16 channels at a time in registers, the same
// comparisons in the same tap order as the loop below (NaN wins, a later tap only when greater),
// and bfloat16 read and written by bit shifts (a window's max is one of its values, so narrowing
// it is exact; a NaN leaves quiet and canonical, as the float-to-bfloat16 conversion makes it).
// The CNN's pools spent most of their time on the general loop's per-channel arrays.
template <class T>
inline constexpr bool kPool2x2Vector = std::is_same_v<T, float> || std::is_same_v<T, BFloat16>;

// (Widening and narrowing by shuffles: GCC 12 turns __builtin_convertvector between these
// widths into one lane at a time.)
typedef uint16_t pool_u16x16 __attribute__((vector_size(32)));
typedef uint16_t pool_u16x32 __attribute__((vector_size(64)));
typedef uint8_t pool_u8x16 __attribute__((vector_size(16)));
typedef uint8_t pool_u8x64 __attribute__((vector_size(64)));
template <class T>
[[gnu::always_inline]] inline vec_math::f32x16 pool_load16(const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return vec_math::load(p);
  } else {
    pool_u16x16 b;
    std::memcpy(&b, p, sizeof b);
    const pool_u16x16 z = {};
    // Little-endian: lane i's high half is b[i], its low half 0.
    const pool_u16x32 w = __builtin_shufflevector(z, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23, 8, 24, 9,
                                                  25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    return (vec_math::f32x16)w;
  }
}
template <class T>
[[gnu::always_inline]] inline void pool_store16(T* p, vec_math::f32x16 v) {
  if constexpr (std::is_same_v<T, float>) {
    vec_math::store(p, v);
  } else {
    const vec_math::u32x16 u = vec_math::bits(v);
    const vec_math::u32x16 nan = (u & 0x7FFFFFFFu) > 0x7F800000u;
    const vec_math::u32x16 r = (u & ~nan) | (((u | 0x7FC00000u) & 0xFFC00000u) & nan);
    const pool_u16x32 h = (pool_u16x32)r;
    const pool_u16x16 out = __builtin_shufflevector(h, h, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    // BFloat16 and Half are trivially copyable (only their default constructor is not trivial:
    // it zeroes), so copying their bytes is defined; the void* says so to -Wclass-memaccess.
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(static_cast<void*>(p), &out, sizeof out);
  }
}
template <class T>
[[gnu::always_inline]] inline void max_pool_nhwc_2x2(const T* x00, int64_t C, int64_t row_stride, T* y,
                                                     uint8_t* ind) {
  using vec_math::f32x16;
  using vec_math::i32x16;
  const T* taps[4] = {x00, x00 + C, x00 + row_stride, x00 + row_stride + C};
  int64_t c = 0;
  for (; c + vec_math::kLanes <= C; c += vec_math::kLanes) {
    f32x16 m = pool_load16(taps[0] + c);
    i32x16 pos = {};
    for (int t = 1; t < 4; ++t) {
      const f32x16 v = pool_load16(taps[t] + c);
      // v > m or v is NaN (never both). Written as a sum: GCC 12 lowers the | of these two
      // masks inside this loop one lane at a time (2100 instructions instead of 70).
      const i32x16 take = (v > m) + (v != v);
      m = take ? v : m;
      pos = take ? i32x16{} + t : pos;
    }
    pool_store16(y + c, m);
    const pool_u8x64 pb = (pool_u8x64)pos;
    const pool_u8x16 o = __builtin_shufflevector(pb, pb, 0, 4, 8, 12, 16, 20, 24, 28, 32, 36, 40, 44, 48, 52, 56, 60);
    std::memcpy(ind + c, &o, sizeof o);
  }
  for (; c < C; ++c) {
    float m = static_cast<float>(taps[0][c]);
    uint8_t pos = 0;
    for (int t = 1; t < 4; ++t) {
      const float v = static_cast<float>(taps[t][c]);
      if ((v > m) | (v != v)) {
        m = v;
        pos = static_cast<uint8_t>(t);
      }
    }
    y[c] = static_cast<T>(m);
    ind[c] = pos;
  }
}

template <class T, class P, class I>
[[gnu::always_inline]] inline void max_pool_nhwc_pixels(const PoolParams& p, const T* x, T* y, I* ind,
                                                        int64_t b, int64_t e) {
  constexpr bool kOffsets = std::is_same_v<I, uint8_t>;
  if constexpr (kOffsets && kPool2x2Vector<T>) {
    if (p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.ph == 0 && p.pw == 0 && ind &&
        p.OH * 2 <= p.H && p.OW * 2 <= p.W) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t n = r / (p.OH * p.OW), oh = r / p.OW % p.OH, ow = r % p.OW;
        max_pool_nhwc_2x2(x + ((n * p.H + 2 * oh) * p.W + 2 * ow) * p.C, p.C, p.W * p.C, y + r * p.C, ind + r * p.C);
      }
      return;
    }
  }
  const int64_t C = p.C, H = p.H, W = p.W, OH = p.OH, OW = p.OW, kh = p.kh, kw = p.kw;
  const int64_t sh = p.sh, sw = p.sw, ph = p.ph, pw = p.pw, dh = p.dh, dw = p.dw;
  using A = PoolCompare<T>;
  constexpr A lowest = lowest_of<A>();
  constexpr int64_t kChunk = 64;
  alignas(64) A mv[kChunk];
  alignas(64) P pos[kChunk];
  for (int64_t r = b; r < e; ++r) {
    const int64_t n = r / (OH * OW), oh = r / OW % OH, ow = r % OW;
    const int64_t h0 = oh * sh - ph, w0 = ow * sw - pw;
    int64_t hs = h0, ws = w0;
    while (hs < 0) hs += dh;
    while (ws < 0) ws += dw;
    const P first = static_cast<P>(kOffsets ? (hs - h0) / dh * kw + (ws - w0) / dw : hs * W + ws);
    for (int64_t c0 = 0; c0 < C; c0 += kChunk) {
      const int64_t nc = std::min(kChunk, C - c0);
      for (int64_t c = 0; c < nc; ++c) {
        mv[c] = lowest;
        pos[c] = first;
      }
      for (int64_t i = 0; i < kh; ++i) {
        const int64_t h = h0 + i * dh;
        if (h < 0 || h >= H) continue;
        for (int64_t j = 0; j < kw; ++j) {
          const int64_t w = w0 + j * dw;
          if (w < 0 || w >= W) continue;
          const T* __restrict xr = x + ((n * H + h) * W + w) * C + c0;
          const P t = static_cast<P>(kOffsets ? i * kw + j : h * W + w);
          for (int64_t c = 0; c < nc; ++c) {
            const A v = static_cast<A>(xr[c]);
            // NaN wins and propagates, as in PyTorch.
            const bool take = (v > mv[c]) | (v != v);
            mv[c] = take ? v : mv[c];
            pos[c] = take ? t : pos[c];
          }
        }
      }
      T* __restrict m = y + r * C + c0;
      for (int64_t c = 0; c < nc; ++c) m[c] = static_cast<T>(mv[c]);
      if (ind) {
        I* __restrict best = ind + r * C + c0;
        for (int64_t c = 0; c < nc; ++c) best[c] = static_cast<I>(pos[c]);
      }
    }
  }
}

// The same loop compiled for AVX-512 and AVX2, picked from cpu_isa() (a generic x86-64 build
// vectorises it 4 floats wide; the 16-lane copy is 2x faster on the CNN's first pool).
template <class T, class P, class I>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))) void max_pool_nhwc_pixels_avx512(
    const PoolParams& p, const T* x, T* y, I* ind, int64_t b, int64_t e) {
  max_pool_nhwc_pixels<T, P, I>(p, x, y, ind, b, e);
}
template <class T, class P, class I>
__attribute__((target("avx2,fma,f16c"))) void max_pool_nhwc_pixels_avx2(const PoolParams& p, const T* x, T* y,
                                                                         I* ind, int64_t b, int64_t e) {
  max_pool_nhwc_pixels<T, P, I>(p, x, y, ind, b, e);
}
template <class T, class P, class I>
void max_pool_nhwc_pixels_generic(const PoolParams& p, const T* x, T* y, I* ind, int64_t b, int64_t e) {
  max_pool_nhwc_pixels<T, P, I>(p, x, y, ind, b, e);
}

template <class T, class I>
void max_pool_fwd_nhwc(const PoolParams& p, const T* x, T* y, I* ind) {
  using Pixels = void (*)(const PoolParams&, const T*, T*, I*, int64_t, int64_t);
  // int32 positions when every h*W + w fits (window offsets always do), else int64 (one lane per
  // double anyway).
  constexpr bool narrow_ok = sizeof(T) <= 4;
  const bool narrow = narrow_ok && (std::is_same_v<I, uint8_t> || p.H * p.W <= std::numeric_limits<int32_t>::max());
  Pixels run = nullptr;
  if constexpr (narrow_ok) {
    if (narrow)
      run = pick_for_isa<Pixels>(&max_pool_nhwc_pixels_avx512<T, int32_t, I>,
                                 &max_pool_nhwc_pixels_avx2<T, int32_t, I>,
                                 &max_pool_nhwc_pixels_generic<T, int32_t, I>);
  }
  if (!run) run = &max_pool_nhwc_pixels_generic<T, int64_t, I>;
  const int64_t grain = grain_for(p.C * p.kh * p.kw);
  parallel_for(0, p.N * p.OH * p.OW, grain, [&](int64_t b, int64_t e) { run(p, x, y, ind, b, e); });
}

}  // namespace

// The CPU part of the shared max-pool kernels (declared in ops/cpu_parts.h):
// x [planes, H, W] -> out, ind [planes, OH, OW]; indices (int64) or window offsets (uint8) only
// when `ind` is given. x, out and ind are either all contiguous or all channels-last
// (run_max_pool2d makes them so).
void max_pool_fill_cpu(const PoolParams& p, const Tensor& x, const Tensor& out, const Tensor* ind) {
  // Where a tensor is contiguous in both formats (C == 1, or 1x1 planes) the two memory orders
  // coincide, so either loop is right; otherwise a non-contiguous operand is channels-last.
  bool nhwc = !out.is_contiguous() || !x.is_contiguous();
  auto run = [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>) {
      const T* xp = static_cast<const T*>(x.data_ptr());
      T* yp = static_cast<T*>(out.data_ptr());
      if (ind && ind->dtype() == kUInt8) {
        auto fill = nhwc ? &max_pool_fwd_nhwc<T, uint8_t> : &max_pool_fwd<T, uint8_t>;
        fill(p, xp, yp, static_cast<uint8_t*>(ind->data_ptr()));
      } else {
        auto fill = nhwc ? &max_pool_fwd_nhwc<T, int64_t> : &max_pool_fwd<T, int64_t>;
        fill(p, xp, yp, ind ? ind->data_ptr<int64_t>() : nullptr);
      }
    }
  };
  if (is_reduced_floating(x.dtype()))
    dispatch_float_or_reduced(x.dtype(), "max_pool2d", run);
  else
    dispatch_dtype(x.dtype(), "max_pool2d", run);
}

namespace {

// Where one task's gradient accumulates: straight in the output for float32/float64, in a float
// row for the 16-bit floats, rounded into the output once when the row is finished.
template <class T>
struct AccumRow {
  std::vector<PoolAccum<T>> row;
  explicit AccumRow(int64_t n) {
    if constexpr (!std::is_same_v<PoolAccum<T>, T>) row.resize(static_cast<size_t>(n));
  }
  PoolAccum<T>* begin(T* out) {
    if constexpr (std::is_same_v<PoolAccum<T>, T>)
      return out;
    else
      return row.data();
  }
  void finish(T* out) {
    if constexpr (!std::is_same_v<PoolAccum<T>, T>) from_float(row.data(), out, static_cast<int64_t>(row.size()));
  }
};

// Where each output's gradient goes in its input plane: at(o) gives, for output position o
// (oh * OW + ow), a map from the saved value to the h * W + w position, or -1 where the value is
// out of range (reported as bad by the caller).
//   IndexDecode:  the value is the int64 position itself (max_pool2d_backward).
//   OffsetDecode: the value is a window offset t = i * kw + j; its position is o's window origin
//                 plus (i * dh, j * dw) (_max_pool2d_offsets_backward).
struct IndexDecode {
  int64_t per_in;
  struct At {
    int64_t per_in;
    int64_t operator()(int64_t k) const { return k >= 0 && k < per_in ? k : -1; }
  };
  At at(int64_t) const { return {per_in}; }
};
struct OffsetDecode {
  const PoolParams& w;
  std::vector<int64_t> dh_of, dw_of;  // per tap t: i * dh and j * dw
  explicit OffsetDecode(const PoolParams& window) : w(window) {
    for (int64_t i = 0; i < w.kh; ++i)
      for (int64_t j = 0; j < w.kw; ++j) {
        dh_of.push_back(i * w.dh);
        dw_of.push_back(j * w.dw);
      }
  }
  struct At {
    int64_t h0, w0, H, W, taps;
    const int64_t *dh_of, *dw_of;
    int64_t operator()(int64_t t) const {
      if (t >= taps) return -1;
      const int64_t h = h0 + dh_of[t], x = w0 + dw_of[t];
      return h >= 0 && h < H && x >= 0 && x < W ? h * W + x : -1;
    }
  };
  At at(int64_t o) const {
    return {o / w.OW * w.sh - w.ph, o % w.OW * w.sw - w.pw, w.H, w.W, w.kh * w.kw, dh_of.data(), dw_of.data()};
  }
};

// A channels-last input gets a channels-last gradient:
//   grad_input[n, pos(ind[n, o, c]), c] += grad_out[n, c, o]   (o over OH*OW, positions over H*W)
// One task per image: the images' writes are disjoint. Returns one bad saved value, or nothing.
template <class I, class Decode>
std::optional<int64_t> max_pool2d_scatter_nhwc(const Tensor& grad_out, const Tensor& indices,
                                               const MaxPoolBackwardPlan& mp, const Decode& decode, Tensor& gi) {
  const int64_t N = mp.input_size[0], C = mp.input_size[1], per_in = mp.per_in, per_out = mp.per_out;
  gi = new_channels_last(mp.input_size, grad_out.dtype(), grad_out.device());
  // grad_out is read through its own strides: after a flatten it arrives NCHW, and a layout copy
  // would cost as much as the scatter itself.
  const Tensor& go = grad_out;
  const int64_t gsN = go.stride(0), gsC = go.stride(1), gsH = go.stride(2), gsW = go.stride(3), OW = go.size(3);
  Tensor ix = contiguous_in_format(indices, MemoryFormat::ChannelsLast);
  std::atomic<bool> any_bad{false};
  std::atomic<int64_t> bad{0};
  dispatch_floating_or_reduced(grad_out.dtype(), "max_pool2d_backward", [&]<class T>() {
    using A = PoolAccum<T>;
    const T* g = static_cast<const T*>(go.data_ptr());
    const I* id = static_cast<const I*>(ix.data_ptr());
    T* o = static_cast<T*>(gi.data_ptr());
    int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, (per_in + per_out) * C));
    parallel_for(0, N, grain, [&](int64_t b, int64_t e) {
      AccumRow<T> acc(per_in * C);
      for (int64_t n = b; n < e; ++n) {
        A* on = acc.begin(o + n * per_in * C);
        std::fill(on, on + per_in * C, A(0));
        const T* gn = g + n * gsN;
        const I* in = id + n * per_out * C;
        for (int64_t i = 0; i < per_out; ++i) {
          const T* gi_ = gn + i / OW * gsH + i % OW * gsW;
          const auto pos = decode.at(i);
          for (int64_t c = 0; c < C; ++c) {
            const int64_t k = pos(in[i * C + c]);
            if (k < 0) [[unlikely]] {
              bad.store(in[i * C + c]);
              any_bad.store(true);
              continue;
            }
            on[k * C + c] += static_cast<A>(gi_[c * gsC]);
          }
        }
        acc.finish(o + n * per_in * C);
      }
    });
  });
  if (any_bad.load()) return bad.load();
  return std::nullopt;
}

// grad_input[plane][pos(ind[o])] += grad_out[o]  (windows may overlap, so positions accumulate)
template <class I, class Decode>
std::optional<int64_t> max_pool2d_scatter(const Tensor& grad_out, const Tensor& indices,
                                          const MaxPoolBackwardPlan& mp, bool channels_last, const Decode& decode,
                                          Tensor& gi) {
  if (channels_last) return max_pool2d_scatter_nhwc<I>(grad_out, indices, mp, decode, gi);
  const int64_t planes = mp.planes, per_out = mp.per_out, per_in = mp.per_in;
  gi = new_tensor(mp.input_size, grad_out.dtype(), grad_out.device());
  Tensor go = contiguous_cpu(grad_out), ix = contiguous_cpu(indices);
  // Checked after the loop: an exception cannot leave a parallel region.
  std::atomic<bool> any_bad{false};
  std::atomic<int64_t> bad{0};
  dispatch_floating_or_reduced(grad_out.dtype(), "max_pool2d_backward", [&]<class T>() {
    using A = PoolAccum<T>;
    const T* g = static_cast<const T*>(go.data_ptr());
    const I* id = static_cast<const I*>(ix.data_ptr());
    T* o = static_cast<T*>(gi.data_ptr());
    int64_t grain = grain_for(per_in + per_out);
    parallel_for(0, planes, grain, [&](int64_t b, int64_t e) {
      AccumRow<T> acc(per_in);
      for (int64_t pl = b; pl < e; ++pl) {
        A* op_ = acc.begin(o + pl * per_in);
        std::fill(op_, op_ + per_in, A(0));
        const T* gp = g + pl * per_out;
        const I* ip = id + pl * per_out;
        for (int64_t i = 0; i < per_out; ++i) {
          const int64_t k = decode.at(i)(ip[i]);
          if (k < 0) [[unlikely]] {
            bad.store(ip[i]);
            any_bad.store(true);
            continue;
          }
          op_[k] += static_cast<A>(gp[i]);
        }
        acc.finish(o + pl * per_in);
      }
    });
  });
  if (any_bad.load()) return bad.load();
  return std::nullopt;
}

// ---- max-pool backward where the windows tile the input ----

// Where the windows tile the input (max_pool_windows_tile) each input position gets at most one
// gradient, from a window known in advance, and none past the last window. So the gradient can be
// written in input order, each element once, with no zero fill, no scatter and no float row for
// the 16-bit types:
//   grad_input[h, w] = offsets[h / kh, w / kw] == (h % kh) * kw + w % kw ? grad_out[h / kh, w / kw] : 0
// The values are the scatter's bits: 0 + g is g, except that a -0 gradient comes out +0.
// For the Fashion-MNIST CNN's first pool (batch 128, channels-last, 2 cores, Xeon) this takes the
// backward from 1.36 to 0.43 ms in bf16 and from 1.33 to 0.55 ms in float32.

// The gradient value as stored: its bits, with -0 made +0 (0 + g). Works on the bit pattern so the
// compiler can vectorise the select below for every floating dtype.
template <class T>
using Bits = std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>;
template <class T>
inline Bits<T> plus_zero_bits(const T& v) {
  Bits<T> b;
  std::memcpy(&b, &v, sizeof b);
  constexpr Bits<T> sign = Bits<T>(1) << (8 * sizeof(T) - 1);
  return b == sign ? Bits<T>(0) : b;
}

// One row h = oh * kh + i of an NHWC image: grad_input[(h, w), c] for w in [0, W), c in [0, C).
// `g` and `off` point at window row oh; gsw and gsc are grad_out's strides between windows and
// channels (grad_out may arrive NCHW, through a flatten); offsets are dense (OW, C).
// Returns false when a window's offset is past its taps (checked once per window, on its i == 0 row).
template <class T>
GRAFT_VEC_INLINE bool max_pool_tile_row(const PoolParams& w, int64_t i, const T* g, int64_t gsw, int64_t gsc,
                                        const uint8_t* off, int64_t C, Bits<T>* dst, uint8_t& bad) {
  const int64_t taps = w.kh * w.kw;
  bool ok = true;
  for (int64_t ow = 0; ow < w.OW; ++ow) {
    const uint8_t* o = off + ow * C;
    const T* gw = g + ow * gsw;
    if (i == 0)
      for (int64_t c = 0; c < C; ++c)
        if (o[c] >= taps) [[unlikely]] {
          bad = o[c];
          ok = false;
        }
    for (int64_t j = 0; j < w.kw; ++j) {
      const uint8_t t = static_cast<uint8_t>(i * w.kw + j);
      Bits<T>* d = dst + (ow * w.kw + j) * C;
      // Unconditional loads and a mask, so the loop vectorises.
      if (gsc == 1) {
        for (int64_t c = 0; c < C; ++c) d[c] = plus_zero_bits(gw[c]) & -Bits<T>(o[c] == t);
      } else {
        for (int64_t c = 0; c < C; ++c) d[c] = plus_zero_bits(gw[c * gsc]) & -Bits<T>(o[c] == t);
      }
    }
  }
  std::fill(dst + w.OW * w.kw * C, dst + w.W * C, Bits<T>(0));  // columns past the last window
  return ok;
}

// The row on 16-bit floats' raw bits (bf16 and float16 share it: the select and the -0 rule read
// only the sign bit), multiversioned: compiled for generic x86-64 its channel loops ran one element
// at a time. The CNN's first pool, bf16 [64, 32, 28, 28] channels-last gradient: 280 -> 215 us; the
// second, [64, 64, 14, 14]: 106 -> 93 us. float32 stays generic: its clone measured slower at 32
// channels (280 -> 310 us) though faster at 64 (142 -> 111 us).
GRAFT_VECTOR_CLONES bool max_pool_tile_row_16(const PoolParams& w, int64_t i, const uint16_t* g, int64_t gsw,
                                              int64_t gsc, const uint8_t* off, int64_t C, uint16_t* dst, uint8_t& bad) {
  return max_pool_tile_row<uint16_t>(w, i, g, gsw, gsc, off, C, dst, bad);
}
template <class B>
bool max_pool_tile_row_bits(const PoolParams& w, int64_t i, const B* g, int64_t gsw, int64_t gsc, const uint8_t* off,
                            int64_t C, B* dst, uint8_t& bad) {
  if constexpr (sizeof(B) == 2) return max_pool_tile_row_16(w, i, g, gsw, gsc, off, C, dst, bad);
  else return max_pool_tile_row<B>(w, i, g, gsw, gsc, off, C, dst, bad);
}

// A channels-last grad_input from window offsets where max_pool_windows_tile(w) holds; one task per
// input row. (NCHW rows are one channel wide: there the per-window work outweighs what this saves,
// and the scatter runs.)
std::optional<int64_t> max_pool2d_tile_backward_nhwc(const Tensor& grad_out, const Tensor& offsets,
                                                     const PoolParams& w, const Shape& input_size, Tensor& gi) {
  const int64_t N = w.N, C = w.C, H = w.H, W = w.W;
  gi = new_channels_last(input_size, grad_out.dtype(), grad_out.device());
  Tensor ix = contiguous_in_format(offsets, MemoryFormat::ChannelsLast);
  const Tensor& go = grad_out;
  const int64_t gsN = go.stride(0), gsC = go.stride(1), gsH = go.stride(2), gsW = go.stride(3);
  std::atomic<bool> any_bad{false};
  std::atomic<int64_t> bad{0};
  dispatch_floating_or_reduced(grad_out.dtype(), "max_pool2d_backward", [&]<class T>() {
    const Bits<T>* g = static_cast<const Bits<T>*>(go.data_ptr());
    const uint8_t* id = static_cast<const uint8_t*>(ix.data_ptr());
    Bits<T>* o = static_cast<Bits<T>*>(gi.data_ptr());
    const int64_t grain = grain_for(W * C);
    parallel_for(0, N * H, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t n = r / H, h = r % H, oh = h / w.kh;
        Bits<T>* dst = o + r * W * C;
        if (oh >= w.OH) {
          std::fill(dst, dst + W * C, Bits<T>(0));  // rows past the last window
          continue;
        }
        uint8_t b8 = 0;
        if (!max_pool_tile_row_bits<Bits<T>>(w, h % w.kh, g + n * gsN + oh * gsH, gsW, gsC,
                                             id + (n * w.OH + oh) * w.OW * C, C, dst, b8)) {
          bad.store(b8);
          any_bad.store(true);
        }
      }
    });
  });
  if (any_bad.load()) return bad.load();
  return std::nullopt;
}

// ---- average ----

// Calls f(h0, h1, w0, w1, divisor) for each output position of one plane, with the window
// clipped to the input and the divisor PyTorch uses.
template <class F>
void for_each_avg_window(const PoolParams& p, bool count_include_pad, F&& f) {
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    int64_t h0 = oh * p.sh - p.ph, h1 = std::min(h0 + p.kh, p.H + p.ph);
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      int64_t w0 = ow * p.sw - p.pw, w1 = std::min(w0 + p.kw, p.W + p.pw);
      int64_t pool_size = (h1 - h0) * (w1 - w0);
      int64_t ch0 = std::max<int64_t>(h0, 0), cw0 = std::max<int64_t>(w0, 0);
      int64_t ch1 = std::min(h1, p.H), cw1 = std::min(w1, p.W);
      int64_t divisor = count_include_pad ? pool_size : (ch1 - ch0) * (cw1 - cw0);
      f(oh * p.OW + ow, ch0, ch1, cw0, cw1, divisor);
    }
  }
}

// Channels-last average pooling: x [N, H, W, C] -> y [N, OH, OW, C], windows as for_each_avg_window,
// each window's C channels summed side by side. One task per image.
Tensor avg_pool2d_nhwc(const PoolParams& p, const Tensor& input, bool count_include_pad) {
  Tensor out = new_channels_last(p.output_sizes(), input.dtype(), input.device());
  Tensor x = contiguous_in_format(input, MemoryFormat::ChannelsLast);
  const int64_t C = p.C;
  dispatch_floating(input.dtype(), "avg_pool2d", [&]<class T>() {
    const T* xd = static_cast<const T*>(x.data_ptr());
    T* yd = static_cast<T*>(out.data_ptr());
    int64_t grain = grain_for(p.OH * p.OW * p.kh * p.kw * C);
    parallel_for(0, p.N, grain, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        const T* xn = xd + n * p.H * p.W * C;
        T* yn = yd + n * p.OH * p.OW * C;
        for_each_avg_window(p, count_include_pad, [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                                                      int64_t divisor) {
          T* __restrict y = yn + o * C;
          std::fill(y, y + C, T(0));
          if (h0 >= h1 || w0 >= w1) return;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              const T* __restrict xr = xn + (h * p.W + w) * C;
              for (int64_t c = 0; c < C; ++c) y[c] += xr[c];
            }
          const T d = static_cast<T>(divisor);
          for (int64_t c = 0; c < C; ++c) y[c] /= d;
        });
      }
    });
  });
  return out;
}

// grad_input[n, h, w, c] += grad_out[n, c, o] / divisor(o); grad_out read through its strides.
Tensor avg_pool2d_backward_nhwc(const PoolParams& p, const Tensor& grad_out, const Tensor& input,
                                bool count_include_pad) {
  Tensor gi = new_tensor_in_format(input, MemoryFormat::ChannelsLast, grad_out.dtype(), grad_out.device());
  const int64_t C = p.C, gsN = grad_out.stride(0), gsC = grad_out.stride(1), gsH = grad_out.stride(2),
                gsW = grad_out.stride(3);
  dispatch_floating(grad_out.dtype(), "avg_pool2d_backward", [&]<class T>() {
    const T* gd = static_cast<const T*>(grad_out.data_ptr());
    T* xd = static_cast<T*>(gi.data_ptr());
    int64_t grain = grain_for(p.OH * p.OW * p.kh * p.kw * C);
    parallel_for(0, p.N, grain, [&](int64_t b, int64_t e) {
      for (int64_t n = b; n < e; ++n) {
        T* xn = xd + n * p.H * p.W * C;
        std::fill(xn, xn + p.H * p.W * C, T(0));
        for_each_avg_window(p, count_include_pad, [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                                                      int64_t divisor) {
          if (h0 >= h1 || w0 >= w1) return;
          const T* g = gd + n * gsN + o / p.OW * gsH + o % p.OW * gsW;
          const T d = static_cast<T>(divisor);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              T* xr = xn + (h * p.W + w) * C;
              for (int64_t c = 0; c < C; ++c) xr[c] += g[c * gsC] / d;
            }
        });
      }
    });
  });
  return gi;
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations; max_pool2d and
// max_pool2d_with_indices are generated over max_pool_fill_cpu) ----

// grad_input[plane][indices[o]] += grad_out[o]  (windows may overlap, so positions accumulate)
Tensor max_pool2d_backward_cpu(const Tensor& grad_out, const Tensor& indices, const Shape& input_size,
                               bool channels_last) {
  MaxPoolBackwardPlan mp = plan_max_pool2d_backward(grad_out, indices, input_size, channels_last);
  Tensor gi;
  if (auto bad = max_pool2d_scatter<int64_t>(grad_out, indices, mp, channels_last, IndexDecode{mp.per_in}, gi))
    max_pool_bad_index_error(*bad, mp);
  return gi;
}

// The same scatter from uint8 window offsets (what max_pool2d saves under autograd).
Tensor max_pool2d_offsets_backward_cpu(const Tensor& grad_out, const Tensor& offsets, const Shape& input_size,
                                       const Shape& kernel_size, const Shape& stride, const Shape& padding,
                                       const Shape& dilation, bool channels_last) {
  MaxPoolOffsetsBackwardPlan p = plan_max_pool2d_offsets_backward(grad_out, offsets, input_size, kernel_size, stride,
                                                                  padding, dilation, channels_last);
  Tensor gi;
  auto bad = channels_last && max_pool_windows_tile(p.window)
                 ? max_pool2d_tile_backward_nhwc(grad_out, offsets, p.window, p.mp.input_size, gi)
                 : max_pool2d_scatter<uint8_t>(grad_out, offsets, p.mp, channels_last, OffsetDecode(p.window), gi);
  if (bad) max_pool_bad_offset_error(*bad, p);
  return gi;
}

Tensor avg_pool2d_cpu(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                      bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool2d";
  PoolParams p = plan_avg_pool2d(input, kernel, stride, padding, ceil_mode);
  if (is_channels_last(input)) return avg_pool2d_nhwc(p, input, count_include_pad);
  Tensor out = new_tensor(p.output_sizes(), input.dtype(), input.device());
  Tensor x = contiguous_cpu(input);
  dispatch_floating(input.dtype(), op, [&]<class T>() {
    const T* xd = static_cast<const T*>(x.data_ptr());
    T* yd = static_cast<T*>(out.data_ptr());
    parallel_for(0, p.planes(), plane_grain(p), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        const T* xp = xd + pl * p.H * p.W;
        T* yp = yd + pl * p.OH * p.OW;
        for_each_avg_window(p, count_include_pad, [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                                                      int64_t divisor) {
          if (h0 >= h1 || w0 >= w1) {
            yp[o] = T(0);
            return;
          }
          T s = 0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) s += xp[h * p.W + w];
          yp[o] = s / static_cast<T>(divisor);
        });
      }
    });
  });
  return out;
}

// grad_input[h, w] += grad_out[o] / divisor(o) for every window o that covers (h, w)
Tensor avg_pool2d_backward_cpu(const Tensor& grad_out, const Tensor& input, const Shape& kernel, const Shape& stride,
                               const Shape& padding, bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool2d_backward";
  PoolParams p = plan_avg_pool2d_backward(grad_out, input, kernel, stride, padding, ceil_mode);
  if (is_channels_last(input)) return avg_pool2d_backward_nhwc(p, grad_out, input, count_include_pad);
  Tensor gi = new_tensor(input.sizes(), grad_out.dtype(), grad_out.device());
  Tensor go = contiguous_cpu(grad_out);
  dispatch_floating(grad_out.dtype(), op, [&]<class T>() {
    const T* gd = static_cast<const T*>(go.data_ptr());
    T* xd = static_cast<T*>(gi.data_ptr());
    parallel_for(0, p.planes(), plane_grain(p), [&](int64_t b, int64_t e) {
      for (int64_t pl = b; pl < e; ++pl) {
        T* xp = xd + pl * p.H * p.W;
        const T* gp = gd + pl * p.OH * p.OW;
        std::fill(xp, xp + p.H * p.W, T(0));
        for_each_avg_window(p, count_include_pad, [&](int64_t o, int64_t h0, int64_t h1, int64_t w0, int64_t w1,
                                                      int64_t divisor) {
          if (h0 >= h1 || w0 >= w1) return;
          T g = gp[o] / static_cast<T>(divisor);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) xp[h * p.W + w] += g;
        });
      }
    });
  });
  return gi;
}

}  // namespace kernels

}  // namespace graft
