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
// plain loops otherwise (float64, and the tiny heads of small models). See sdpa_plan.h for the
// operand geometry and the masked-row rule.
// bfloat16/float16 are native: each task widens the rows it reads to float once, runs the same
// float tiles (scores, online softmax and accumulators in float), and rounds each output element
// once; lse is then float32 (sdpa_lse_dtype), as PyTorch's CPU kernel keeps its logsumexp.
#include <dnnl.h>

#include <algorithm>
#include <cmath>
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
    const int64_t tiles = (g.L + kBr - 1) / kBr;
    parallel_for(0, g.B * tiles, 1, [&](int64_t t0, int64_t t1) { run_forward_tasks(a, t0, t1); });
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
    parallel_for(0, g.B, 1, [&](int64_t b0, int64_t b1) { run_backward_tasks(a, b0, b1); });
  });
  return {dq, dk, dv};
}

}  // namespace kernels

}  // namespace graft
