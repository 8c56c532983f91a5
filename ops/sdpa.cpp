// Fused scaled dot-product attention on the CPU: _sdpa_flash and _sdpa_flash_backward.
//
// Tiled as FlashAttention: a task owns Br query rows of one batch matrix and walks the keys in
// tiles of Bc, keeping a running max m, a running sum l and an un-normalised accumulator per row
// (the online softmax), so no L x S matrix exists; only a Br x Bc tile per thread.
//   forward, per key tile j:  s = scale * q_i k_j^T (+ mask)           [Br, Bc]
//                             m' = max(m, rowmax s);  p = exp(s - m')
//                             l = l * exp(m - m') + rowsum p;  acc = acc * exp(m - m') + p v_j
//                             out = acc / l,  lse = m + log l
//   backward (recomputes p per tile from lse; D = rowsum(dout * out)):
//                             p = exp(s - lse_i)
//                             dv_j += p^T dout_i;  dp = dout_i v_j^T;  ds = p * (dp - D_i)
//                             dq_i += scale * ds k_j;  dk_j += scale * ds^T q_i
// Tile products go to oneDNN's sgemm when they are large enough to amortise its call, and to
// plain loops otherwise (float64, a decode step's rows). Up to 32 keys and heads up to 32 wide (a
// ViT's 17 tokens) skip the tiles: whole batch matrices with their scores in registers ("Small
// heads" below). See sdpa_plan.h for the operand geometry and the masked-row rule.
// bfloat16/float16 are native: each task widens the rows it reads to float once, runs the same
// float tiles (scores, online softmax and accumulators in float), and rounds each output element
// once; lse is then float32 (sdpa_lse_dtype), as PyTorch's CPU kernel keeps its logsumexp.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/math/device_math.h"
#include "ops/ops.h"
#include "ops/reduced_float.h"
#include "ops/sdpa_plan.h"
#include "ops/vec_math.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

constexpr int64_t kBr = 64, kBc = 128;
// Below this many multiply-adds a tile product is cheaper in loops than through sgemm's dispatch.
constexpr int64_t kSgemmMinWork = 32 * 32 * 32;

// C[M, N] += alpha * op(A) B for float32 tiles too small for sgemm (a head of 16 and 17 tokens):
// B is packed into `pack` [K, Np] with its width padded to whole 16-lane vectors (zeros), and four
// rows of C are accumulated at once in registers, so every step is one vector load of B and four
// multiply-adds with no store in the K loop.
template <bool kTransA>
[[gnu::always_inline]] inline void small_gemm_f32(int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                                                  int64_t lda, const float* B, int64_t ldb, bool trans_b, float* C,
                                                  int64_t ldc, std::vector<float>& pack) {
  using namespace vec_math;
  const int64_t Np = (N + kLanes - 1) / kLanes * kLanes;
  pack.assign(static_cast<size_t>(K * Np), 0.0f);
  for (int64_t kk = 0; kk < K; ++kk)
    for (int64_t j = 0; j < N; ++j) pack[static_cast<size_t>(kk * Np + j)] = trans_b ? B[j * ldb + kk] : B[kk * ldb + j];
  auto a_at = [&](int64_t i, int64_t kk) { return alpha * (kTransA ? A[kk * lda + i] : A[i * lda + kk]); };
  auto add_row = [&](float* c, f32x16 v, int64_t w) {
    if (w == kLanes) {
      store(c, load(c) + v);
    } else {
      for (int64_t l = 0; l < w; ++l) c[l] += v[l];
    }
  };
  for (int64_t j0 = 0; j0 < N; j0 += kLanes) {
    const int64_t w = std::min<int64_t>(kLanes, N - j0);
    const float* bp = pack.data() + j0;
    int64_t i = 0;
    for (; i + 4 <= M; i += 4) {
      f32x16 c0 = {}, c1 = {}, c2 = {}, c3 = {};
      for (int64_t kk = 0; kk < K; ++kk) {
        f32x16 b = load(bp + kk * Np);
        c0 += a_at(i, kk) * b;
        c1 += a_at(i + 1, kk) * b;
        c2 += a_at(i + 2, kk) * b;
        c3 += a_at(i + 3, kk) * b;
      }
      add_row(C + i * ldc + j0, c0, w);
      add_row(C + (i + 1) * ldc + j0, c1, w);
      add_row(C + (i + 2) * ldc + j0, c2, w);
      add_row(C + (i + 3) * ldc + j0, c3, w);
    }
    for (; i < M; ++i) {
      f32x16 c0 = {};
      for (int64_t kk = 0; kk < K; ++kk) c0 += a_at(i, kk) * load(bp + kk * Np);
      add_row(C + i * ldc + j0, c0, w);
    }
  }
}

// C[M, N] += alpha * op(A) op(B) for one or two rows (a decode step's query): packing B as
// small_gemm_f32 does would cost more than the product. With tb, B's rows are contiguous, so each
// element is a dot product; otherwise each row of C gathers B's contiguous rows scaled by A.
[[gnu::always_inline]] inline void few_rows_gemm_f32(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha,
                                                     const float* A, int64_t lda, const float* B, int64_t ldb,
                                                     float* C, int64_t ldc) {
  using namespace vec_math;
  for (int64_t i = 0; i < M; ++i) {
    float* c = C + i * ldc;
    auto a_at = [&](int64_t kk) { return ta ? A[kk * lda + i] : A[i * lda + kk]; };
    if (tb) {
      for (int64_t j = 0; j < N; ++j) {
        const float* bj = B + j * ldb;
        f32x16 s = {};
        int64_t kk = 0;
        if (!ta)
          for (; kk + kLanes <= K; kk += kLanes) s += load(A + i * lda + kk) * load(bj + kk);
        float t = lane_sum(s);
        for (; kk < K; ++kk) t += a_at(kk) * bj[kk];
        c[j] += alpha * t;
      }
    } else {
      for (int64_t kk = 0; kk < K; ++kk) {
        const float a = alpha * a_at(kk);
        const float* bk = B + kk * ldb;
        for (int64_t j = 0; j < N; ++j) c[j] += a * bk[j];
      }
    }
  }
}

// C[M, N] = alpha * op(A) op(B) + beta * C, row-major with leading dims; op(A) is A^T when ta
// (A stored [K, M]), op(B) is B^T when tb (B stored [N, K]). ta and tb are never both set.
// float32: sgemm for big tiles, small_gemm_f32 otherwise; float64 (tests, gradcheck): plain loops.
template <class T>
[[gnu::always_inline]] inline void tile_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                                             int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc,
                                             std::vector<T>& scratch) {
  if (M == 0 || N == 0) return;
  if constexpr (std::is_same_v<T, float>) {
    if (M * N * K >= kSgemmMinWork) {
      dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    }
  }
  for (int64_t i = 0; i < M; ++i) {
    T* c = C + i * ldc;
    if (beta == T(0))
      std::fill(c, c + N, T(0));
    else if (beta != T(1))
      for (int64_t j = 0; j < N; ++j) c[j] *= beta;
  }
  if constexpr (std::is_same_v<T, float>) {
    if (M <= 2) {
      few_rows_gemm_f32(ta, tb, M, N, K, alpha, A, lda, B, ldb, C, ldc);
      return;
    }
    if (ta)
      small_gemm_f32<true>(M, N, K, alpha, A, lda, B, ldb, tb, C, ldc, scratch);
    else
      small_gemm_f32<false>(M, N, K, alpha, A, lda, B, ldb, tb, C, ldc, scratch);
  } else {
    for (int64_t i = 0; i < M; ++i)
      for (int64_t kk = 0; kk < K; ++kk) {
        T a = alpha * (ta ? A[kk * lda + i] : A[i * lda + kk]);
        for (int64_t j = 0; j < N; ++j) C[i * ldc + j] += a * (tb ? B[j * ldb + kk] : B[kk * ldb + j]);
      }
  }
}

// max over s[0, n).
template <class T>
[[gnu::always_inline]] inline T row_max(const T* s, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    using namespace vec_math;
    if (n >= kLanes) {
      f32x16 mv = load(s);
      for (c = kLanes; c + kLanes <= n; c += kLanes) {
        f32x16 v = load(s + c);
        mv = v > mv ? v : mv;
      }
      for (int l = 0; l < kLanes; ++l) m = std::max(m, mv[l]);
    }
  }
  for (; c < n; ++c) m = std::max(m, s[c]);
  return m;
}

// s[c] = exp(s[c] - shift) for c < n; returns the sum.
template <class T>
[[gnu::always_inline]] inline T exp_shifted(T* s, int64_t n, T shift) {
  T sum = 0;
  int64_t c = 0;
  if constexpr (std::is_same_v<T, float>) {
    using namespace vec_math;
    f32x16 acc = {};
    for (; c + kLanes <= n; c += kLanes) {
      f32x16 e = vec_math::exp(load(s + c) - shift);
      store(s + c, e);
      acc += e;
    }
    for (int l = 0; l < kLanes; ++l) sum += acc[l];
  }
  for (; c < n; ++c) {
    s[c] = vec_math::exp(s[c] - shift);
    sum += s[c];
  }
  return sum;
}

// The mask and causality of one batch matrix, applied to a row of scores of type T; an additive
// mask holds M (the operands' dtype: bfloat16/float16 masks are widened as they are added).
template <class T, class M = T>
struct RowMask {
  SdpaMask kind = SdpaMask::None;
  const void* base = nullptr;  // mask data + this batch's offset
  int64_t rs = 0, cs = 0;
  bool causal = false;

  // s[c] is the score of query i and key j0 + c, for c < n: masked entries become -inf.
  [[gnu::always_inline]] void apply(T* s, int64_t i, int64_t j0, int64_t n) const {
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    if (kind == SdpaMask::Bool) {
      const bool* m = static_cast<const bool*>(base) + i * rs + j0 * cs;
      for (int64_t c = 0; c < n; ++c)
        if (!m[c * cs]) s[c] = ninf;
    } else if (kind == SdpaMask::Additive) {
      const M* m = static_cast<const M*>(base) + i * rs + j0 * cs;
      for (int64_t c = 0; c < n; ++c) s[c] += static_cast<T>(m[c * cs]);
    }
    if (causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < n; ++c) s[c] = ninf;
  }
};

template <class T, class M = T>
RowMask<T, M> row_mask(const SdpaGeometry& g, const Tensor& mask, bool causal, int64_t b) {
  RowMask<T, M> rm;
  rm.kind = g.mask;
  rm.causal = causal;
  if (g.mask != SdpaMask::None) {
    const char* base = static_cast<const char*>(mask.data_ptr());
    rm.base = base + g.m_off[static_cast<size_t>(b)] * static_cast<int64_t>(mask.element_size());
    rm.rs = g.m_rs;
    rm.cs = g.m_cs;
  }
  return rm;
}

// Keys a query tile [i0, i1) may see: all S, or [0, i1) when causal.
int64_t key_end(int64_t S, int64_t i1, bool causal) { return causal ? std::min(S, i1) : S; }

// What a forward or backward task reads and writes (pointers to the first element of each tensor).
// S is the stored dtype: T itself, or bfloat16/float16 with T = float (lse is then float32, as
// PyTorch's CPU flash attention keeps its logsumexp).
template <class T, class S = T>
struct FlashArgs {
  const SdpaGeometry* g = nullptr;
  const Tensor* mask = nullptr;
  bool causal = false;
  T scale = 1;
  const S *q = nullptr, *k = nullptr, *v = nullptr;
  const S *out = nullptr, *dout = nullptr;  // backward only
  const T* lse = nullptr;                   // backward only
  S* out_w = nullptr;                       // forward outputs
  T* lse_w = nullptr;
  // out (forward: out_w) and dout rows: base + off[b] + i * row stride (out follows q's layout)
  const int64_t* o_off = nullptr;
  const int64_t* do_off = nullptr;
  int64_t o_rs = 0, do_rs = 0;
  // dq, dk, dv rows likewise (each gradient follows its input's layout)
  const int64_t *dq_off = nullptr, *dk_off = nullptr, *dv_off = nullptr;
  int64_t dq_rs = 0, dk_rs = 0, dv_rs = 0;
  S *dq = nullptr, *dk = nullptr, *dv = nullptr;  // backward outputs
};

// A tile's rows as the tile loops read them: a pointer and a row stride.
template <class T>
struct Rows {
  const T* p;
  int64_t rs;
};

// Per-thread buffers of the forward, for tiles of at most min(kBr, L) query rows: a decode step
// (L = 1) needs one row of scores, not kBr of them zeroed on every call.
template <class T>
struct ForwardScratch {
  explicit ForwardScratch(int64_t L)
      : sbuf(static_cast<size_t>(std::min(kBr, L) * kBc)), m(static_cast<size_t>(std::min(kBr, L))),
        l(static_cast<size_t>(std::min(kBr, L))) {}
  std::vector<T> sbuf, acc, scratch, m, l;
};

// One query tile: q rows [br, E] against keys/values rows [0, jend), written to out rows
// [br, Ev] (stride o_rs) and lse[br].
template <class T, class M>
[[gnu::always_inline]] inline void forward_tile(const SdpaGeometry& g, Rows<T> q, Rows<T> k, Rows<T> v,
                                                const RowMask<T, M>& rm, T scale, int64_t i0, int64_t br,
                                                int64_t jend, T* ob, int64_t o_rs, T* lb, ForwardScratch<T>& w) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t E = g.E, Ev = g.Ev;
  w.acc.assign(static_cast<size_t>(br * Ev), T(0));
  std::fill(w.m.begin(), w.m.end(), ninf);
  std::fill(w.l.begin(), w.l.end(), T(0));
  for (int64_t j0 = 0; j0 < jend; j0 += kBc) {
    const int64_t bc = std::min(kBc, jend - j0);
    // s = scale * q_i k_j^T   [br, bc]
    tile_gemm<T>(false, true, br, bc, E, scale, q.p, q.rs, k.p + j0 * k.rs, k.rs, T(0), w.sbuf.data(), kBc,
                 w.scratch);
    for (int64_t r = 0; r < br; ++r) {
      T* s = w.sbuf.data() + r * kBc;
      rm.apply(s, i0 + r, j0, bc);
      T mnew = std::max(w.m[r], row_max(s, bc));
      if (mnew == ninf) {  // nothing visible to this row yet
        std::fill(s, s + bc, T(0));
        continue;
      }
      T corr = vec_math::exp(w.m[r] - mnew);
      w.l[r] = w.l[r] * corr + exp_shifted(s, bc, mnew);
      w.m[r] = mnew;
      if (corr != T(1)) {
        T* ar = w.acc.data() + r * Ev;
        for (int64_t e = 0; e < Ev; ++e) ar[e] *= corr;
      }
    }
    // acc += p v_j   [br, Ev]
    tile_gemm<T>(false, false, br, Ev, bc, T(1), w.sbuf.data(), kBc, v.p + j0 * v.rs, v.rs, T(1), w.acc.data(), Ev,
                 w.scratch);
  }
  for (int64_t r = 0; r < br; ++r) {
    T inv = w.l[r] > T(0) ? T(1) / w.l[r] : T(0);
    for (int64_t e = 0; e < Ev; ++e) ob[r * o_rs + e] = w.acc[static_cast<size_t>(r * Ev + e)] * inv;
    lb[r] = w.l[r] > T(0) ? w.m[r] + std::log(w.l[r]) : ninf;
  }
}

// Forward tasks [t0, t1): task t is query tile t % tiles of batch matrix t / tiles.
template <class T>
[[gnu::always_inline]] inline void forward_tasks(const FlashArgs<T>& a, int64_t t0, int64_t t1) {
  const SdpaGeometry& g = *a.g;
  const int64_t L = g.L, S = g.S;
  const int64_t tiles = (L + kBr - 1) / kBr;
  ForwardScratch<T> w(L);
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t b = t / tiles, i0 = (t % tiles) * kBr, br = std::min(kBr, L - i0);
    const Rows<T> q{a.q + g.q_off[static_cast<size_t>(b)] + i0 * g.q_rs, g.q_rs};
    const Rows<T> k{a.k + g.k_off[static_cast<size_t>(b)], g.k_rs}, v{a.v + g.v_off[static_cast<size_t>(b)], g.v_rs};
    forward_tile(g, q, k, v, row_mask<T>(g, *a.mask, a.causal, b), a.scale, i0, br, key_end(S, i0 + br, a.causal),
                 a.out_w + a.o_off[b] + i0 * a.o_rs, a.o_rs, a.lse_w + b * L + i0, w);
  }
}

// rows x cols of src (row stride rs) widened into dst [rows, cols].
template <class S>
void widen_rows(const S* src, int64_t rs, int64_t rows, int64_t cols, float* dst) {
  for (int64_t r = 0; r < rows; ++r) to_float(src + r * rs, dst + r * cols, cols);
}
// dst rows (stride rs) = src [rows, cols] rounded once.
template <class S>
void round_rows(const float* src, int64_t rows, int64_t cols, S* dst, int64_t rs) {
  for (int64_t r = 0; r < rows; ++r) from_float(src + r * cols, dst + r * rs, cols);
}

// bfloat16/float16 forward tasks: the tile's q rows and the keys and values it sees are widened to
// float once per task, the tile runs in float (scores, softmax, accumulator), and each output
// element is rounded once. No float copy of a whole operand exists.
template <class S>
[[gnu::always_inline]] inline void forward_tasks_reduced(const FlashArgs<float, S>& a, int64_t t0, int64_t t1) {
  const SdpaGeometry& g = *a.g;
  const int64_t L = g.L, S_ = g.S, E = g.E, Ev = g.Ev;
  const int64_t tiles = (L + kBr - 1) / kBr;
  ForwardScratch<float> w(L);
  std::vector<float> qf, kf, vf, of;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t b = t / tiles, i0 = (t % tiles) * kBr, br = std::min(kBr, L - i0);
    const int64_t jend = key_end(S_, i0 + br, a.causal);
    qf.resize(static_cast<size_t>(br * E));
    kf.resize(static_cast<size_t>(jend * E));
    vf.resize(static_cast<size_t>(jend * Ev));
    of.resize(static_cast<size_t>(br * Ev));
    widen_rows(a.q + g.q_off[static_cast<size_t>(b)] + i0 * g.q_rs, g.q_rs, br, E, qf.data());
    widen_rows(a.k + g.k_off[static_cast<size_t>(b)], g.k_rs, jend, E, kf.data());
    widen_rows(a.v + g.v_off[static_cast<size_t>(b)], g.v_rs, jend, Ev, vf.data());
    forward_tile(g, Rows<float>{qf.data(), E}, Rows<float>{kf.data(), E}, Rows<float>{vf.data(), Ev},
                 row_mask<float, S>(g, *a.mask, a.causal, b), a.scale, i0, br, jend, of.data(), Ev,
                 a.lse_w + b * L + i0, w);
    round_rows(of.data(), br, Ev, a.out_w + a.o_off[b] + i0 * a.o_rs, a.o_rs);
  }
}

// Per-thread buffers of the backward.
template <class T>
struct BackwardScratch {
  std::vector<T> p = std::vector<T>(static_cast<size_t>(kBr * kBc)), dp = std::vector<T>(static_cast<size_t>(kBr * kBc)),
                 D, scratch;
};
template <class T>
struct OutRows {
  T* p;
  int64_t rs;
};

// The backward of one batch matrix: dq [L, E], dk [S, E] and dv [S, Ev] (zeroed here) from
// q, k, v, out, dout rows and lse[L].
template <class T, class M>
[[gnu::always_inline]] inline void backward_matrix(const SdpaGeometry& g, Rows<T> q, Rows<T> k, Rows<T> v, Rows<T> o,
                                                   Rows<T> dout, const T* lb, OutRows<T> dq, OutRows<T> dk,
                                                   OutRows<T> dv, const RowMask<T, M>& rm, T scale, bool causal,
                                                   BackwardScratch<T>& w) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  for (int64_t i = 0; i < L; ++i) std::fill(dq.p + i * dq.rs, dq.p + i * dq.rs + E, T(0));
  for (int64_t j = 0; j < S; ++j) std::fill(dk.p + j * dk.rs, dk.p + j * dk.rs + E, T(0));
  for (int64_t j = 0; j < S; ++j) std::fill(dv.p + j * dv.rs, dv.p + j * dv.rs + Ev, T(0));
  w.D.resize(static_cast<size_t>(L));
  for (int64_t i = 0; i < L; ++i) {
    T s = 0;
    for (int64_t e = 0; e < Ev; ++e) s += dout.p[i * dout.rs + e] * o.p[i * o.rs + e];
    w.D[static_cast<size_t>(i)] = s;
  }
  for (int64_t j0 = 0; j0 < S; j0 += kBc) {
    const int64_t bc = std::min(kBc, S - j0);
    // Causal: query rows before j0 see none of these keys.
    for (int64_t i0 = causal ? (std::min(j0, L) / kBr) * kBr : 0; i0 < L; i0 += kBr) {
      const int64_t br = std::min(kBr, L - i0);
      const T* qi = q.p + i0 * q.rs;
      const T* doi = dout.p + i0 * dout.rs;
      tile_gemm<T>(false, true, br, bc, E, scale, qi, q.rs, k.p + j0 * k.rs, k.rs, T(0), w.p.data(), kBc, w.scratch);
      for (int64_t r = 0; r < br; ++r) {
        T* s = w.p.data() + r * kBc;
        T li = lb[i0 + r];
        if (li == ninf) {  // a fully masked row: no gradient flows through it
          std::fill(s, s + bc, T(0));
          continue;
        }
        rm.apply(s, i0 + r, j0, bc);
        exp_shifted(s, bc, li);
      }
      // dv_j += p^T dout_i   [bc, Ev]
      tile_gemm<T>(true, false, bc, Ev, br, T(1), w.p.data(), kBc, doi, dout.rs, T(1), dv.p + j0 * dv.rs, dv.rs,
                   w.scratch);
      // dp = dout_i v_j^T   [br, bc]
      tile_gemm<T>(false, true, br, bc, Ev, T(1), doi, dout.rs, v.p + j0 * v.rs, v.rs, T(0), w.dp.data(), kBc,
                   w.scratch);
      // ds = p * (dp - D_i), in place in dp
      for (int64_t r = 0; r < br; ++r) {
        const T* pr = w.p.data() + r * kBc;
        T* d = w.dp.data() + r * kBc;
        T Di = w.D[static_cast<size_t>(i0 + r)];
        for (int64_t c = 0; c < bc; ++c) d[c] = pr[c] * (d[c] - Di);
      }
      // dq_i += scale * ds k_j   [br, E];  dk_j += scale * ds^T q_i   [bc, E]
      tile_gemm<T>(false, false, br, E, bc, scale, w.dp.data(), kBc, k.p + j0 * k.rs, k.rs, T(1), dq.p + i0 * dq.rs,
                   dq.rs, w.scratch);
      tile_gemm<T>(true, false, bc, E, br, scale, w.dp.data(), kBc, qi, q.rs, T(1), dk.p + j0 * dk.rs, dk.rs,
                   w.scratch);
    }
  }
}

// Backward of batch matrices [b0, b1). One task per batch matrix: dq rows collect from every key
// tile and dk/dv rows from every query tile, so a batch matrix stays on one thread and nothing races.
template <class T>
[[gnu::always_inline]] inline void backward_tasks(const FlashArgs<T>& a, int64_t b0, int64_t b1) {
  const SdpaGeometry& g = *a.g;
  BackwardScratch<T> w;
  for (int64_t b = b0; b < b1; ++b) {
    const size_t bi = static_cast<size_t>(b);
    backward_matrix(g, Rows<T>{a.q + g.q_off[bi], g.q_rs}, Rows<T>{a.k + g.k_off[bi], g.k_rs},
                    Rows<T>{a.v + g.v_off[bi], g.v_rs}, Rows<T>{a.out + a.o_off[b], a.o_rs},
                    Rows<T>{a.dout + a.do_off[b], a.do_rs}, a.lse + b * g.L, OutRows<T>{a.dq + a.dq_off[b], a.dq_rs},
                    OutRows<T>{a.dk + a.dk_off[b], a.dk_rs}, OutRows<T>{a.dv + a.dv_off[b], a.dv_rs},
                    row_mask<T>(g, *a.mask, a.causal, b), a.scale, a.causal, w);
  }
}

// bfloat16/float16 backward: a batch matrix's operands are widened to float once, its gradients
// accumulate in float and are rounded once into dq, dk and dv.
template <class S>
[[gnu::always_inline]] inline void backward_tasks_reduced(const FlashArgs<float, S>& a, int64_t b0, int64_t b1) {
  const SdpaGeometry& g = *a.g;
  const int64_t L = g.L, S_ = g.S, E = g.E, Ev = g.Ev;
  BackwardScratch<float> w;
  std::vector<float> qf(static_cast<size_t>(L * E)), kf(static_cast<size_t>(S_ * E)), vf(static_cast<size_t>(S_ * Ev)),
      of(static_cast<size_t>(L * Ev)), dof(static_cast<size_t>(L * Ev)), dqf(static_cast<size_t>(L * E)),
      dkf(static_cast<size_t>(S_ * E)), dvf(static_cast<size_t>(S_ * Ev));
  for (int64_t b = b0; b < b1; ++b) {
    const size_t bi = static_cast<size_t>(b);
    widen_rows(a.q + g.q_off[bi], g.q_rs, L, E, qf.data());
    widen_rows(a.k + g.k_off[bi], g.k_rs, S_, E, kf.data());
    widen_rows(a.v + g.v_off[bi], g.v_rs, S_, Ev, vf.data());
    widen_rows(a.out + a.o_off[b], a.o_rs, L, Ev, of.data());
    widen_rows(a.dout + a.do_off[b], a.do_rs, L, Ev, dof.data());
    backward_matrix(g, Rows<float>{qf.data(), E}, Rows<float>{kf.data(), E}, Rows<float>{vf.data(), Ev},
                    Rows<float>{of.data(), Ev}, Rows<float>{dof.data(), Ev}, a.lse + b * L,
                    OutRows<float>{dqf.data(), E}, OutRows<float>{dkf.data(), E}, OutRows<float>{dvf.data(), Ev},
                    row_mask<float, S>(g, *a.mask, a.causal, b), a.scale, a.causal, w);
    round_rows(dqf.data(), L, E, a.dq + a.dq_off[b], a.dq_rs);
    round_rows(dkf.data(), S_, E, a.dk + a.dk_off[b], a.dk_rs);
    round_rows(dvf.data(), S_, Ev, a.dv + a.dv_off[b], a.dv_rs);
  }
}

// ---- Small heads: whole batch matrices, scores in registers ----
//
// Where the keys and the heads fit in two vectors (S <= 32, E and Ev <= 32: the ViT's 17 tokens and
// heads of 16), the tiles above spend more on packing, dispatch and the online softmax's
// bookkeeping than on products. Measured against the tiles (2 cores): [128, 4, 17, 16] forward
// 0.39 -> 0.28 ms, backward 0.57 -> 0.42 ms; at 64 keys (the baby GPT's) the tiles were faster,
// and at heads of 64 the backward's 4 x 4 row vectors spill (0.045 -> 0.054 ms for [4, 4, 16, 64]). A task then owns whole batch matrices: its operands are widened
// once into zero-padded float buffers (K and V also transposed), and each group of R query rows
// keeps its scores, NS vectors of 16 keys, in registers from the product to the probabilities:
//   forward, R rows at a time:   s = scale * q K^T + bias                         [R, Sp]  (Sp = 16 NS)
//                                p = exp(s - rowmax s);  l = rowsum p
//                                out = (p V) / l;  lse = rowmax s + log l
//   backward, R rows at a time:  p = exp(s - lse);  dp = dout V^T
//                                ds = scale * p * (dp - rowsum(dout * out))
//                                dq = ds K;  dk += ds^T q;  dv += p^T dout
// `bias` carries the mask, causality and the padding lanes (j >= S) as one additive row per query
// (one row shared by all queries when there is neither mask nor causality): -inf marks a key the
// query may not see, and replaces the score rather than adding to it. The softmax sees the whole
// row at once, so it needs no running max.
constexpr int64_t kSmallKeys = 32, kSmallWidth = 32;

// One batch matrix in float buffers. Widths are padded to Wp = 16 NW lanes, keys to Sp = 16 NS,
// and query rows to Lp, a multiple of R; the padding is zero except in bias (-inf).
struct SmallHead {
  int64_t L = 0, S = 0, E = 0, Ev = 0;
  float scale = 1;
  const float* q = nullptr;     // [Lp, Wp]
  const float* kt = nullptr;    // [E, Sp]   K^T
  const float* k = nullptr;     // [S, Wp]   backward
  const float* v = nullptr;     // [S, Wp]   forward
  const float* vt = nullptr;    // [Ev, Sp]  V^T, backward
  const float* bias = nullptr;  // [Lp, Sp], or one row when bias_rs = 0
  int64_t bias_rs = 0;
  float* out = nullptr;         // [Lp, Wp]  forward
  float* lse = nullptr;         // [Lp]      forward writes it, backward reads it (-inf in padding rows)
  const float* o = nullptr;     // [Lp, Wp]  backward
  const float* dout = nullptr;  // [Lp, Wp]  backward
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;  // [Lp, Wp], [S, Wp], [S, Wp]
  float *p = nullptr, *ds = nullptr;                  // [R, Sp] scratch
};

// Query rows per group: R x NS score vectors (twice that in the backward) stay in registers.
constexpr int kSmallRows = 4;


// s[r] = scale * q_r K^T + bias_r for the R query rows from i0; into dp[r] = dout_r V^T when DP.
template <int NS, int NW, int R, bool DP>
GRAFT_VEC_INLINE void small_scores(const SmallHead& h, int64_t i0, vec_math::f32x16 (&s)[R][NS],
                                   vec_math::f32x16 (&dp)[R][NS]) {
  using namespace vec_math;
  constexpr int64_t Sp = kLanes * NS, Wp = kLanes * NW;
  const f32x16 ninf = splat<f32x16>(-std::numeric_limits<float>::infinity());
  for (int r = 0; r < R; ++r)
    for (int n = 0; n < NS; ++n) s[r][n] = dp[r][n] = f32x16{};
  for (int64_t e = 0; e < h.E; ++e) {
    f32x16 kv[NS];
    for (int n = 0; n < NS; ++n) kv[n] = load(h.kt + e * Sp + n * kLanes);
    for (int r = 0; r < R; ++r) {
      const float qe = h.q[(i0 + r) * Wp + e];
      for (int n = 0; n < NS; ++n) s[r][n] += qe * kv[n];
    }
  }
  if constexpr (DP) {
    for (int64_t e = 0; e < h.Ev; ++e) {
      f32x16 vv[NS];
      for (int n = 0; n < NS; ++n) vv[n] = load(h.vt + e * Sp + n * kLanes);
      for (int r = 0; r < R; ++r) {
        const float de = h.dout[(i0 + r) * Wp + e];
        for (int n = 0; n < NS; ++n) dp[r][n] += de * vv[n];
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const float* b = h.bias + (i0 + r) * h.bias_rs;
    for (int n = 0; n < NS; ++n) {
      const f32x16 bn = load(b + n * kLanes);
      s[r][n] = bn == ninf ? ninf : s[r][n] * h.scale + bn;
    }
  }
}

// acc[r] = sum_{j < S} a[r, j] m[j] for the R rows of a [R, Sp] (scratch p or ds) against the
// rows of m [S, Wp]: one broadcast per key and row against the key's row (p V, ds K).
template <int NW, int R>
GRAFT_VEC_INLINE void small_rows_times(const float* a, int64_t Sp, const float* m, int64_t S,
                                       vec_math::f32x16 (&acc)[R][NW]) {
  using namespace vec_math;
  constexpr int64_t Wp = kLanes * NW;
  for (int r = 0; r < R; ++r)
    for (int w = 0; w < NW; ++w) acc[r][w] = f32x16{};
  for (int64_t j = 0; j < S; ++j) {
    f32x16 mj[NW];
    for (int w = 0; w < NW; ++w) mj[w] = load(m + j * Wp + w * kLanes);
    for (int r = 0; r < R; ++r) {
      const float arj = a[r * Sp + j];
      for (int w = 0; w < NW; ++w) acc[r][w] += arj * mj[w];
    }
  }
}

template <int NS, int NW>
GRAFT_VEC_INLINE void small_forward(const SmallHead& h) {
  using namespace vec_math;
  constexpr int R = kSmallRows;
  constexpr int64_t Sp = kLanes * NS, Wp = kLanes * NW;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (int64_t i0 = 0; i0 < h.L; i0 += R) {
    f32x16 s[R][NS], no_dp[R][NS];
    small_scores<NS, NW, R, false>(h, i0, s, no_dp);
    float m[R], l[R];
    for (int r = 0; r < R; ++r) {
      f32x16 mx = s[r][0];
      for (int n = 1; n < NS; ++n) mx = s[r][n] > mx ? s[r][n] : mx;
      m[r] = vec_math::lane_max(mx);
      f32x16 sum = {};
      for (int n = 0; n < NS; ++n) {
        // A row with no visible key (m = -inf) gets p = 0 rather than exp(-inf + inf).
        const f32x16 e = m[r] == kNegInf ? f32x16{} : exp(s[r][n] - m[r]);
        store(h.p + r * Sp + n * kLanes, e);
        sum += e;
      }
      l[r] = lane_sum(sum);
    }
    f32x16 acc[R][NW];
    small_rows_times<NW, R>(h.p, Sp, h.v, h.S, acc);  // p V
    for (int r = 0; r < R; ++r) {
      const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;
      for (int w = 0; w < NW; ++w) store(h.out + (i0 + r) * Wp + w * kLanes, acc[r][w] * inv);
      h.lse[i0 + r] = l[r] > 0.0f ? m[r] + std::log(l[r]) : kNegInf;
    }
  }
}

template <int NS, int NW>
GRAFT_VEC_INLINE void small_backward(const SmallHead& h) {
  using namespace vec_math;
  constexpr int R = kSmallRows;
  constexpr int64_t Sp = kLanes * NS, Wp = kLanes * NW;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  std::fill(h.dk, h.dk + h.S * Wp, 0.0f);
  std::fill(h.dv, h.dv + h.S * Wp, 0.0f);
  for (int64_t i0 = 0; i0 < h.L; i0 += R) {
    f32x16 s[R][NS], dp[R][NS];
    small_scores<NS, NW, R, true>(h, i0, s, dp);
    for (int r = 0; r < R; ++r) {
      const float li = h.lse[i0 + r];  // -inf: a fully masked row or padding, no gradient
      f32x16 dsum = {};
      for (int w = 0; w < NW; ++w)
        dsum += load(h.dout + (i0 + r) * Wp + w * kLanes) * load(h.o + (i0 + r) * Wp + w * kLanes);
      const float D = lane_sum(dsum);
      for (int n = 0; n < NS; ++n) {
        const f32x16 p = li == kNegInf ? f32x16{} : exp(s[r][n] - li);
        store(h.p + r * Sp + n * kLanes, p);
        store(h.ds + r * Sp + n * kLanes, h.scale * (p * (dp[r][n] - D)));
      }
    }
    f32x16 dq[R][NW];
    small_rows_times<NW, R>(h.ds, Sp, h.k, h.S, dq);  // dq_r = ds_r K
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < NW; ++w) store(h.dq + (i0 + r) * Wp + w * kLanes, dq[r][w]);
    // dk_j += sum_r ds_rj q_r;  dv_j += sum_r p_rj dout_r
    f32x16 qr[R][NW], dor[R][NW];
    for (int r = 0; r < R; ++r)
      for (int w = 0; w < NW; ++w) {
        qr[r][w] = load(h.q + (i0 + r) * Wp + w * kLanes);
        dor[r][w] = load(h.dout + (i0 + r) * Wp + w * kLanes);
      }
    for (int64_t j = 0; j < h.S; ++j) {
      for (int w = 0; w < NW; ++w) {
        f32x16 a = load(h.dk + j * Wp + w * kLanes), c = load(h.dv + j * Wp + w * kLanes);
        for (int r = 0; r < R; ++r) {
          a += h.ds[r * Sp + j] * qr[r][w];
          c += h.p[r * Sp + j] * dor[r][w];
        }
        store(h.dk + j * Wp + w * kLanes, a);
        store(h.dv + j * Wp + w * kLanes, c);
      }
    }
  }
}

// NS and NW take 1 or 2: four shapes per direction, each with its own registers.
constexpr int small_vectors(int64_t n) { return n <= vec_math::kLanes ? 1 : 2; }
template <int NS, int NW, bool kForward>
GRAFT_VEC_INLINE void small_run(const SmallHead& h) {
  if constexpr (kForward) small_forward<NS, NW>(h);
  else small_backward<NS, NW>(h);
}
// (A lambda here would be compiled for generic x86-64, outside the clones.)
template <int NS, bool kForward>
GRAFT_VEC_INLINE void small_dispatch_nw(const SmallHead& h, int nw) {
  if (nw == 1) small_run<NS, 1, kForward>(h);
  else small_run<NS, 2, kForward>(h);
}
template <bool kForward>
GRAFT_VEC_INLINE void small_dispatch(const SmallHead& h, int ns, int nw) {
  if (ns == 1) small_dispatch_nw<1, kForward>(h, nw);
  else small_dispatch_nw<2, kForward>(h, nw);
}
GRAFT_VECTOR_CLONES void small_forward_kernel(const SmallHead& h, int ns, int nw) { small_dispatch<true>(h, ns, nw); }
GRAFT_VECTOR_CLONES void small_backward_kernel(const SmallHead& h, int ns, int nw) {
  small_dispatch<false>(h, ns, nw);
}

// Whether the small-heads kernels take this geometry (callers compute in float: float32 and the
// 16-bit dtypes). Fewer query rows than a block (a decode step's one row) go to the flash tasks:
// the small kernels pad them to kSmallRows and widen whole heads, 2x the flash tasks' time there.
bool small_heads(const SdpaGeometry& g) {
  return g.S <= kSmallKeys && g.E <= kSmallWidth && g.Ev <= kSmallWidth && g.S > 0 && g.L >= kSmallRows;
}

// A thread's buffers for small heads, and the widening of one batch matrix's operands into them.
template <class S>
struct SmallBuffers {
  int ns, nw, R;
  int64_t Sp, Wp, Lp;
  std::vector<float> q, kt, k, v, vt, bias, out, lse, o, dout, dq, dk, dv, p, ds;
  explicit SmallBuffers(const SdpaGeometry& g)
      : ns(small_vectors(g.S)), nw(small_vectors(std::max(g.E, g.Ev))), R(kSmallRows),
        Sp(vec_math::kLanes * ns), Wp(vec_math::kLanes * nw), Lp((g.L + R - 1) / R * R) {}
  static void zeros(std::vector<float>& b, int64_t n) { b.assign(static_cast<size_t>(n), 0.0f); }
  // The row conversions are inline loops, vectorised in each clone of the tasks below: a library
  // call per 16-float row costs as much as the row's products. float16 rows, rare on a CPU, go
  // through the F16C converters.
  GRAFT_VEC_INLINE static void widen(const S* src, float* dst, int64_t n) {
    if constexpr (std::is_same_v<S, float>) {
      for (int64_t c = 0; c < n; ++c) dst[c] = src[c];
    } else if constexpr (std::is_same_v<S, BFloat16>) {
      for (int64_t c = 0; c < n; ++c) dst[c] = half_bits::bf16_to_float(src[c].x);
    } else {
      to_float(src, dst, n);
    }
  }
  GRAFT_VEC_INLINE static void narrow(const float* src, S* dst, int64_t n) {
    if constexpr (std::is_same_v<S, float>) {
      for (int64_t c = 0; c < n; ++c) dst[c] = src[c];
    } else {
      from_float(src, dst, n);
    }
  }
  // rows [rows, n] (stride rs) into dst [rows, Wp]
  GRAFT_VEC_INLINE void widen_rows(const S* src, int64_t rs, int64_t rows, int64_t n, float* dst) const {
    for (int64_t r = 0; r < rows; ++r) widen(src + r * rs, dst + r * Wp, n);
  }
  // dst [n, Sp] = src [rows, Wp]^T over the first n columns
  GRAFT_VEC_INLINE void transpose(const float* src, int64_t rows, int64_t n, float* dst) const {
    for (int64_t c = 0; c < n; ++c)
      for (int64_t r = 0; r < rows; ++r) dst[c * Sp + r] = src[r * Wp + c];
  }
  GRAFT_VEC_INLINE void store_rows(const float* src, int64_t rows, int64_t n, S* dst, int64_t rs) const {
    for (int64_t r = 0; r < rows; ++r) narrow(src + r * Wp, dst + r * rs, n);
  }
  // The bias rows of batch matrix b: the mask (RowMask's -inf and additive values), causality,
  // and -inf over the padding lanes; one shared row when neither mask nor causality applies.
  template <class M>
  int64_t fill_bias(const SdpaGeometry& g, const RowMask<float, M>& rm) {
    constexpr float ninf = -std::numeric_limits<float>::infinity();
    const bool per_row = rm.kind != SdpaMask::None || rm.causal;
    const int64_t rows = per_row ? Lp : 1;
    bias.resize(static_cast<size_t>(rows * Sp));
    for (int64_t i = 0; i < rows; ++i) {
      float* b = bias.data() + i * Sp;
      std::fill(b, b + g.S, 0.0f);
      std::fill(b + g.S, b + Sp, ninf);
      if (per_row && i < g.L) rm.apply(b, i, 0, g.S);
    }
    return per_row ? Sp : 0;
  }
  // Sizes and zeroes the buffers of one direction: their padding stays zero, since the loads below
  // write only real rows and columns.
  void zero_buffers(const SdpaGeometry& g, bool backward) {
    zeros(q, Lp * Wp);
    zeros(kt, g.E * Sp);
    zeros(k, g.S * Wp);
    zeros(v, g.S * Wp);
    zeros(p, R * Sp);
    if (!backward) {
      zeros(out, Lp * Wp);
      zeros(lse, Lp);
      return;
    }
    for (std::vector<float>* b : {&o, &dout, &dq}) zeros(*b, Lp * Wp);
    zeros(vt, g.Ev * Sp);
    zeros(dk, g.S * Wp);
    zeros(dv, g.S * Wp);
    zeros(ds, R * Sp);
    lse.assign(static_cast<size_t>(Lp), -std::numeric_limits<float>::infinity());  // padding rows: no gradient
  }
  // Batch matrix b's q and k rows, K^T and v rows (and V^T for the backward), and its bias in h
  // (computed once where every batch shares it).
  GRAFT_VEC_INLINE void load(const FlashArgs<float, S>& a, int64_t b, bool backward, SmallHead& h) {
    const SdpaGeometry& g = *a.g;
    const size_t bi = static_cast<size_t>(b);
    widen_rows(a.q + g.q_off[bi], g.q_rs, g.L, g.E, q.data());
    widen_rows(a.k + g.k_off[bi], g.k_rs, g.S, g.E, k.data());
    transpose(k.data(), g.S, g.E, kt.data());
    widen_rows(a.v + g.v_off[bi], g.v_rs, g.S, g.Ev, v.data());
    if (backward) transpose(v.data(), g.S, g.Ev, vt.data());
    if (!h.bias || h.bias_rs != 0) {
      h.bias_rs = fill_bias(g, row_mask<float, S>(g, *a.mask, a.causal, b));
      h.bias = bias.data();
    }
  }
};

template <class S>
GRAFT_VEC_INLINE void small_forward_tasks(const FlashArgs<float, S>& a, int64_t b0, int64_t b1) {
  const SdpaGeometry& g = *a.g;
  SmallBuffers<S> w(g);
  w.zero_buffers(g, false);
  SmallHead h{.L = g.L, .S = g.S, .E = g.E, .Ev = g.Ev, .scale = a.scale, .q = w.q.data(), .kt = w.kt.data(),
              .v = w.v.data(), .out = w.out.data(), .lse = w.lse.data(), .p = w.p.data()};
  for (int64_t b = b0; b < b1; ++b) {
    w.load(a, b, false, h);
    small_forward_kernel(h, w.ns, w.nw);
    w.store_rows(w.out.data(), g.L, g.Ev, a.out_w + a.o_off[b], a.o_rs);
    std::copy(w.lse.begin(), w.lse.begin() + g.L, a.lse_w + b * g.L);
  }
}

template <class S>
GRAFT_VEC_INLINE void small_backward_tasks(const FlashArgs<float, S>& a, int64_t b0, int64_t b1) {
  const SdpaGeometry& g = *a.g;
  SmallBuffers<S> w(g);
  w.zero_buffers(g, true);
  SmallHead h{.L = g.L, .S = g.S, .E = g.E, .Ev = g.Ev, .scale = a.scale, .q = w.q.data(), .kt = w.kt.data(),
              .k = w.k.data(), .vt = w.vt.data(), .lse = w.lse.data(), .o = w.o.data(), .dout = w.dout.data(),
              .dq = w.dq.data(), .dk = w.dk.data(), .dv = w.dv.data(), .p = w.p.data(), .ds = w.ds.data()};
  for (int64_t b = b0; b < b1; ++b) {
    w.load(a, b, true, h);
    w.widen_rows(a.out + a.o_off[b], a.o_rs, g.L, g.Ev, w.o.data());
    w.widen_rows(a.dout + a.do_off[b], a.do_rs, g.L, g.Ev, w.dout.data());
    std::copy(a.lse + b * g.L, a.lse + (b + 1) * g.L, w.lse.begin());
    small_backward_kernel(h, w.ns, w.nw);
    w.store_rows(w.dq.data(), g.L, g.E, a.dq + a.dq_off[b], a.dq_rs);
    w.store_rows(w.dk.data(), g.S, g.E, a.dk + a.dk_off[b], a.dk_rs);
    w.store_rows(w.dv.data(), g.S, g.Ev, a.dv + a.dv_off[b], a.dv_rs);
  }
}

// Each dtype's small-head tasks in clones, so the row conversions vectorise.
#define GRAFT_SMALL_TASKS(name, S)                                                                  \
  GRAFT_VECTOR_CLONES void small_forward_##name(const FlashArgs<float, S>& a, int64_t b0, int64_t b1) { \
    small_forward_tasks<S>(a, b0, b1);                                                              \
  }                                                                                                 \
  GRAFT_VECTOR_CLONES void small_backward_##name(const FlashArgs<float, S>& a, int64_t b0, int64_t b1) { \
    small_backward_tasks<S>(a, b0, b1);                                                             \
  }
GRAFT_SMALL_TASKS(f32, float)
GRAFT_SMALL_TASKS(bf16, BFloat16)
GRAFT_SMALL_TASKS(f16, Half)
#undef GRAFT_SMALL_TASKS
template <class S>
void run_small_tasks(bool forward, const FlashArgs<float, S>& a, int64_t b0, int64_t b1) {
  if constexpr (std::is_same_v<S, BFloat16>) forward ? small_forward_bf16(a, b0, b1) : small_backward_bf16(a, b0, b1);
  else if constexpr (std::is_same_v<S, Half>) forward ? small_forward_f16(a, b0, b1) : small_backward_f16(a, b0, b1);
  else forward ? small_forward_f32(a, b0, b1) : small_backward_f32(a, b0, b1);
}

// float32 (and the 16-bit dtypes, which compute in float) get AVX2/AVX-512 clones of the task
// loops (the tile loops and vec_math inline into them).
GRAFT_VECTOR_CLONES void forward_tasks_f32(const FlashArgs<float>& a, int64_t t0, int64_t t1) {
  forward_tasks<float>(a, t0, t1);
}
GRAFT_VECTOR_CLONES void backward_tasks_f32(const FlashArgs<float>& a, int64_t b0, int64_t b1) {
  backward_tasks<float>(a, b0, b1);
}
GRAFT_VECTOR_CLONES void forward_tasks_bf16(const FlashArgs<float, BFloat16>& a, int64_t t0, int64_t t1) {
  forward_tasks_reduced<BFloat16>(a, t0, t1);
}
GRAFT_VECTOR_CLONES void backward_tasks_bf16(const FlashArgs<float, BFloat16>& a, int64_t b0, int64_t b1) {
  backward_tasks_reduced<BFloat16>(a, b0, b1);
}
GRAFT_VECTOR_CLONES void forward_tasks_f16(const FlashArgs<float, Half>& a, int64_t t0, int64_t t1) {
  forward_tasks_reduced<Half>(a, t0, t1);
}
GRAFT_VECTOR_CLONES void backward_tasks_f16(const FlashArgs<float, Half>& a, int64_t b0, int64_t b1) {
  backward_tasks_reduced<Half>(a, b0, b1);
}
template <class T, class S>
void run_forward_tasks(const FlashArgs<T, S>& a, int64_t t0, int64_t t1) {
  if constexpr (std::is_same_v<S, BFloat16>) forward_tasks_bf16(a, t0, t1);
  else if constexpr (std::is_same_v<S, Half>) forward_tasks_f16(a, t0, t1);
  else if constexpr (std::is_same_v<T, float>) forward_tasks_f32(a, t0, t1);
  else forward_tasks<T>(a, t0, t1);
}
template <class T, class S>
void run_backward_tasks(const FlashArgs<T, S>& a, int64_t b0, int64_t b1) {
  if constexpr (std::is_same_v<S, BFloat16>) backward_tasks_bf16(a, b0, b1);
  else if constexpr (std::is_same_v<S, Half>) backward_tasks_f16(a, b0, b1);
  else if constexpr (std::is_same_v<T, float>) backward_tasks_f32(a, b0, b1);
  else backward_tasks<T>(a, b0, b1);
}

// The compute type of a stored dtype: float for bfloat16/float16.
template <class S>
using SdpaCompute = math::opmath_t<S>;

// The fields forward and backward share.
template <class S>
FlashArgs<SdpaCompute<S>, S> flash_args(const SdpaGeometry& g, const Tensor& mask, bool causal, double scale,
                                        const Tensor& q, const Tensor& k, const Tensor& v) {
  FlashArgs<SdpaCompute<S>, S> a;
  a.g = &g;
  a.mask = &mask;
  a.causal = causal;
  a.scale = static_cast<SdpaCompute<S>>(scale);
  a.q = static_cast<const S*>(q.data_ptr());
  a.k = static_cast<const S*>(k.data_ptr());
  a.v = static_cast<const S*>(v.data_ptr());
  return a;
}

// A q/k/v operand as the kernels read it (sdpa_plan.h, invariant 2).
Tensor prepared(const Tensor& t) { return sdpa_operand_needs_copy(t) ? contiguous_cpu(t) : t; }

// Tasks per thread so that a thread's share (kGrainSize multiply-adds) is worth waking the pool,
// for tasks that each take 1 / tasks_per_head of a head: a decode step's attention (one query row
// over at most 64 keys, 4 heads) is ~16K multiply-adds and stays on the calling thread. Each task
// is computed alone, so the split never changes a bit.
int64_t tasks_grain(const SdpaGeometry& g, int64_t tasks_per_head = 1) {
  const int64_t per_task = g.L * g.S * (g.E + g.Ev) / tasks_per_head;
  return grain_for(per_task);
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

std::vector<Tensor> sdpa_flash_cpu(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& mask,
                                   bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention";
  Tensor q = prepared(q0), k = prepared(k0), v = prepared(v0);
  SdpaGeometry g = plan_sdpa(q, k, v, mask, op);
  Tensor out = new_strided(g.out_sizes(), sdpa_out_strides(q, g.out_sizes()), q.dtype(), q.device());
  Tensor lse = new_tensor(g.lse_sizes(), sdpa_lse_dtype(q.dtype()), q.device());
  if (out.numel() == 0 && lse.numel() == 0) return {out, lse};
  std::vector<int64_t> o_off = sdpa_batch_offsets(out, g.batch);
  dispatch_floating_or_reduced(q.dtype(), op, [&]<class S>() {
    using T = SdpaCompute<S>;
    auto a = flash_args<S>(g, mask, is_causal, scale, q, k, v);
    a.out_w = static_cast<S*>(out.data_ptr());
    a.lse_w = static_cast<T*>(lse.data_ptr());
    a.o_off = o_off.data();
    a.o_rs = out.dim() >= 2 ? out.stride(-2) : 0;
    if constexpr (std::is_same_v<T, float>) {
      if (small_heads(g)) {
        parallel_for(0, g.B, tasks_grain(g), [&](int64_t b0, int64_t b1) { run_small_tasks(true, a, b0, b1); });
        return;
      }
    }
    const int64_t tiles = (g.L + kBr - 1) / kBr;
    parallel_for(0, g.B * tiles, tasks_grain(g, tiles), [&](int64_t t0, int64_t t1) { run_forward_tasks(a, t0, t1); });
  });
  return {out, lse};
}

std::vector<Tensor> sdpa_flash_backward_cpu(const Tensor& grad_out, const Tensor& q0, const Tensor& k0,
                                            const Tensor& v0, const Tensor& out, const Tensor& lse,
                                            const Tensor& mask, bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention_backward";
  Tensor q = prepared(q0), k = prepared(k0), v = prepared(v0);
  SdpaGeometry g = plan_sdpa_backward(grad_out, q, k, v, out, lse, mask, op);
  // grad_out and out are read in place when their rows are unit-stride (out as the forward laid it
  // out, grad_out usually the same: the gradient of MultiheadAttention's merged heads).
  auto rows = [](const Tensor& t) { return t.size(-1) > 1 && t.stride(-1) != 1 ? contiguous_cpu(t) : t; };
  Tensor go = rows(grad_out), oc = rows(out), lc = contiguous_cpu(lse);
  std::vector<int64_t> o_off = sdpa_batch_offsets(oc, g.batch), do_off = sdpa_batch_offsets(go, g.batch);
  Shape dq_sizes = g.batch, dk_sizes = g.batch, dv_sizes = g.batch;
  dq_sizes.insert(dq_sizes.end(), {g.L, g.E});
  dk_sizes.insert(dk_sizes.end(), {g.S, g.E});
  dv_sizes.insert(dv_sizes.end(), {g.S, g.Ev});
  // Each gradient in its input's layout: heads read from [N, L, H, D] views get [N, L, H, D]
  // gradients, which the views' backward passes on without a copy.
  Tensor dq = new_strided(dq_sizes, sdpa_out_strides(q0, dq_sizes), q.dtype(), q.device());
  Tensor dk = new_strided(dk_sizes, sdpa_out_strides(k0, dk_sizes), q.dtype(), q.device());
  Tensor dv = new_strided(dv_sizes, sdpa_out_strides(v0, dv_sizes), q.dtype(), q.device());
  std::vector<int64_t> dq_off = sdpa_batch_offsets(dq, g.batch), dk_off = sdpa_batch_offsets(dk, g.batch),
                       dv_off = sdpa_batch_offsets(dv, g.batch);
  dispatch_floating_or_reduced(q.dtype(), op, [&]<class S>() {
    using T = SdpaCompute<S>;
    auto a = flash_args<S>(g, mask, is_causal, scale, q, k, v);
    a.out = static_cast<const S*>(oc.data_ptr());
    a.lse = static_cast<const T*>(lc.data_ptr());
    a.dout = static_cast<const S*>(go.data_ptr());
    a.o_off = o_off.data();
    a.do_off = do_off.data();
    a.o_rs = oc.stride(-2);
    a.do_rs = go.stride(-2);
    a.dq = static_cast<S*>(dq.data_ptr());
    a.dk = static_cast<S*>(dk.data_ptr());
    a.dv = static_cast<S*>(dv.data_ptr());
    a.dq_off = dq_off.data();
    a.dk_off = dk_off.data();
    a.dv_off = dv_off.data();
    a.dq_rs = dq.stride(-2);
    a.dk_rs = dk.stride(-2);
    a.dv_rs = dv.stride(-2);
    if constexpr (std::is_same_v<T, float>) {
      if (small_heads(g)) {
        parallel_for(0, g.B, tasks_grain(g), [&](int64_t b0, int64_t b1) { run_small_tasks(false, a, b0, b1); });
        return;
      }
    }
    parallel_for(0, g.B, tasks_grain(g), [&](int64_t b0, int64_t b1) { run_backward_tasks(a, b0, b1); });
  });
  return {dq, dk, dv};
}

}  // namespace kernels

}  // namespace graft
