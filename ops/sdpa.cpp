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
#include <dnnl.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/sdpa_plan.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

constexpr int64_t kBr = 64, kBc = 128;
// Below this many multiply-adds a tile product is cheaper in loops than through sgemm's dispatch.
constexpr int64_t kSgemmMinWork = 32 * 32 * 32;

// C[M, N] = alpha * op(A) op(B) + beta * C, row-major with leading dims; op(A) is A^T when ta
// (A stored [K, M]), op(B) is B^T when tb (B stored [N, K]). ta and tb are never both set.
template <class T>
void tile_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
               int64_t ldb, T beta, T* C, int64_t ldc) {
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
  if (!tb) {
    for (int64_t i = 0; i < M; ++i) {
      T* __restrict c = C + i * ldc;
      for (int64_t kk = 0; kk < K; ++kk) {
        T a = alpha * (ta ? A[kk * lda + i] : A[i * lda + kk]);
        const T* __restrict b = B + kk * ldb;
#pragma omp simd
        for (int64_t j = 0; j < N; ++j) c[j] += a * b[j];
      }
    }
  } else {
    for (int64_t i = 0; i < M; ++i) {
      const T* __restrict a = A + i * lda;
      T* c = C + i * ldc;
      for (int64_t j = 0; j < N; ++j) {
        const T* __restrict b = B + j * ldb;
        T s = 0;
#pragma omp simd reduction(+ : s)
        for (int64_t kk = 0; kk < K; ++kk) s += a[kk] * b[kk];
        c[j] += alpha * s;
      }
    }
  }
}

// The mask and causality of one batch matrix, applied to a row of scores.
template <class T>
struct RowMask {
  SdpaMask kind = SdpaMask::None;
  const void* base = nullptr;  // mask data + this batch's offset
  int64_t rs = 0, cs = 0;
  bool causal = false;

  // s[c] is the score of query i and key j0 + c, for c < n: masked entries become -inf.
  void apply(T* s, int64_t i, int64_t j0, int64_t n) const {
    constexpr T ninf = -std::numeric_limits<T>::infinity();
    if (kind == SdpaMask::Bool) {
      const bool* m = static_cast<const bool*>(base) + i * rs + j0 * cs;
      for (int64_t c = 0; c < n; ++c)
        if (!m[c * cs]) s[c] = ninf;
    } else if (kind == SdpaMask::Additive) {
      const T* m = static_cast<const T*>(base) + i * rs + j0 * cs;
      for (int64_t c = 0; c < n; ++c) s[c] += m[c * cs];
    }
    if (causal)
      for (int64_t c = std::max<int64_t>(0, i + 1 - j0); c < n; ++c) s[c] = ninf;
  }
};

template <class T>
RowMask<T> row_mask(const SdpaGeometry& g, const Tensor& mask, bool causal, int64_t b) {
  RowMask<T> rm;
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

template <class T>
void flash_forward(const SdpaGeometry& g, const T* q, const T* k, const T* v, const Tensor& mask, bool causal,
                   T scale, T* out, T* lse) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  const int64_t tiles = (L + kBr - 1) / kBr;
  parallel_for(0, g.B * tiles, 1, [&](int64_t t0, int64_t t1) {
    std::vector<T> sbuf(static_cast<size_t>(kBr * kBc)), acc(static_cast<size_t>(kBr * Ev));
    std::vector<T> m(kBr), l(kBr);
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t b = t / tiles, i0 = (t % tiles) * kBr, br = std::min(kBr, L - i0);
      const T* qb = q + g.q_off[static_cast<size_t>(b)] + i0 * g.q_rs;
      const T* kb = k + g.k_off[static_cast<size_t>(b)];
      const T* vb = v + g.v_off[static_cast<size_t>(b)];
      RowMask<T> rm = row_mask<T>(g, mask, causal, b);
      std::fill(m.begin(), m.end(), ninf);
      std::fill(l.begin(), l.end(), T(0));
      std::fill(acc.begin(), acc.begin() + br * Ev, T(0));
      const int64_t jend = key_end(S, i0 + br, causal);
      for (int64_t j0 = 0; j0 < jend; j0 += kBc) {
        const int64_t bc = std::min(kBc, jend - j0);
        // s = scale * q_i k_j^T   [br, bc]
        tile_gemm<T>(false, true, br, bc, E, scale, qb, g.q_rs, kb + j0 * g.k_rs, g.k_rs, T(0), sbuf.data(), kBc);
        for (int64_t r = 0; r < br; ++r) {
          T* s = sbuf.data() + r * kBc;
          rm.apply(s, i0 + r, j0, bc);
          T mx = ninf;
          for (int64_t c = 0; c < bc; ++c) mx = std::max(mx, s[c]);
          T mnew = std::max(m[r], mx);
          if (mnew == ninf) {  // nothing visible to this row yet
            std::fill(s, s + bc, T(0));
            continue;
          }
          T corr = std::exp(m[r] - mnew), sum = 0;
          for (int64_t c = 0; c < bc; ++c) {
            s[c] = std::exp(s[c] - mnew);
            sum += s[c];
          }
          l[r] = l[r] * corr + sum;
          m[r] = mnew;
          if (corr != T(1)) {
            T* a = acc.data() + r * Ev;
            for (int64_t e = 0; e < Ev; ++e) a[e] *= corr;
          }
        }
        // acc += p v_j   [br, Ev]
        tile_gemm<T>(false, false, br, Ev, bc, T(1), sbuf.data(), kBc, vb + j0 * g.v_rs, g.v_rs, T(1), acc.data(), Ev);
      }
      T* ob = out + (b * L + i0) * Ev;
      T* lb = lse + b * L + i0;
      for (int64_t r = 0; r < br; ++r) {
        T inv = l[r] > T(0) ? T(1) / l[r] : T(0);
        for (int64_t e = 0; e < Ev; ++e) ob[r * Ev + e] = acc[static_cast<size_t>(r * Ev + e)] * inv;
        lb[r] = l[r] > T(0) ? m[r] + std::log(l[r]) : ninf;
      }
    }
  });
}

template <class T>
void flash_backward(const SdpaGeometry& g, const T* dout, const T* q, const T* k, const T* v, const T* out,
                    const T* lse, const Tensor& mask, bool causal, T scale, T* dq, T* dk, T* dv) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  const int64_t L = g.L, S = g.S, E = g.E, Ev = g.Ev;
  // One task per batch matrix: dq rows collect from every key tile and dk/dv rows from every query
  // tile, so a batch matrix stays on one thread and nothing races.
  parallel_for(0, g.B, 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> p(static_cast<size_t>(kBr * kBc)), dp(static_cast<size_t>(kBr * kBc)), D(static_cast<size_t>(L));
    for (int64_t b = b0; b < b1; ++b) {
      const T* qb = q + g.q_off[static_cast<size_t>(b)];
      const T* kb = k + g.k_off[static_cast<size_t>(b)];
      const T* vb = v + g.v_off[static_cast<size_t>(b)];
      const T* dob = dout + b * L * Ev;
      const T* ob = out + b * L * Ev;
      const T* lb = lse + b * L;
      T* dqb = dq + b * L * E;
      T* dkb = dk + b * S * E;
      T* dvb = dv + b * S * Ev;
      std::fill(dqb, dqb + L * E, T(0));
      std::fill(dkb, dkb + S * E, T(0));
      std::fill(dvb, dvb + S * Ev, T(0));
      for (int64_t i = 0; i < L; ++i) {
        T s = 0;
        for (int64_t e = 0; e < Ev; ++e) s += dob[i * Ev + e] * ob[i * Ev + e];
        D[static_cast<size_t>(i)] = s;
      }
      RowMask<T> rm = row_mask<T>(g, mask, causal, b);
      for (int64_t j0 = 0; j0 < S; j0 += kBc) {
        const int64_t bc = std::min(kBc, S - j0);
        // Causal: query rows before j0 see none of these keys.
        for (int64_t i0 = causal ? (std::min(j0, L) / kBr) * kBr : 0; i0 < L; i0 += kBr) {
          const int64_t br = std::min(kBr, L - i0);
          const T* qi = qb + i0 * g.q_rs;
          const T* doi = dob + i0 * Ev;
          tile_gemm<T>(false, true, br, bc, E, scale, qi, g.q_rs, kb + j0 * g.k_rs, g.k_rs, T(0), p.data(), kBc);
          for (int64_t r = 0; r < br; ++r) {
            T* s = p.data() + r * kBc;
            T li = lb[i0 + r];
            if (li == ninf) {  // a fully masked row: no gradient flows through it
              std::fill(s, s + bc, T(0));
              continue;
            }
            rm.apply(s, i0 + r, j0, bc);
            for (int64_t c = 0; c < bc; ++c) s[c] = std::exp(s[c] - li);
          }
          // dv_j += p^T dout_i   [bc, Ev]
          tile_gemm<T>(true, false, bc, Ev, br, T(1), p.data(), kBc, doi, Ev, T(1), dvb + j0 * Ev, Ev);
          // dp = dout_i v_j^T   [br, bc]
          tile_gemm<T>(false, true, br, bc, Ev, T(1), doi, Ev, vb + j0 * g.v_rs, g.v_rs, T(0), dp.data(), kBc);
          // ds = p * (dp - D_i), in place in dp
          for (int64_t r = 0; r < br; ++r) {
            const T* pr = p.data() + r * kBc;
            T* d = dp.data() + r * kBc;
            T Di = D[static_cast<size_t>(i0 + r)];
            for (int64_t c = 0; c < bc; ++c) d[c] = pr[c] * (d[c] - Di);
          }
          // dq_i += scale * ds k_j   [br, E];  dk_j += scale * ds^T q_i   [bc, E]
          tile_gemm<T>(false, false, br, E, bc, scale, dp.data(), kBc, kb + j0 * g.k_rs, g.k_rs, T(1), dqb + i0 * E, E);
          tile_gemm<T>(true, false, bc, E, br, scale, dp.data(), kBc, qi, g.q_rs, T(1), dkb + j0 * E, E);
        }
      }
    }
  });
}

// A q/k/v operand as the kernels read it (sdpa_plan.h, invariant 2).
Tensor prepared(const Tensor& t) { return sdpa_operand_needs_copy(t) ? contiguous_cpu(t) : t; }

std::vector<Tensor> sdpa_flash_cpu(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& mask,
                                   bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention";
  Tensor q = prepared(q0), k = prepared(k0), v = prepared(v0);
  SdpaGeometry g = plan_sdpa(q, k, v, mask, op);
  Tensor out = new_tensor(g.out_sizes(), q.dtype(), q.device());
  Tensor lse = new_tensor(g.lse_sizes(), q.dtype(), q.device());
  if (out.numel() == 0 && lse.numel() == 0) return {out, lse};
  dispatch_floating(q.dtype(), op, [&]<class T>() {
    flash_forward<T>(g, static_cast<const T*>(q.data_ptr()), static_cast<const T*>(k.data_ptr()),
                     static_cast<const T*>(v.data_ptr()), mask, is_causal, static_cast<T>(scale),
                     static_cast<T*>(out.data_ptr()), static_cast<T*>(lse.data_ptr()));
  });
  return {out, lse};
}

std::vector<Tensor> sdpa_flash_backward_cpu(const Tensor& grad_out, const Tensor& q0, const Tensor& k0,
                                            const Tensor& v0, const Tensor& out, const Tensor& lse,
                                            const Tensor& mask, bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention_backward";
  Tensor q = prepared(q0), k = prepared(k0), v = prepared(v0);
  SdpaGeometry g = plan_sdpa_backward(grad_out, q, k, v, out, lse, mask, op);
  Tensor go = contiguous_cpu(grad_out), oc = contiguous_cpu(out), lc = contiguous_cpu(lse);
  Shape dq_sizes = g.batch, dk_sizes = g.batch, dv_sizes = g.batch;
  dq_sizes.insert(dq_sizes.end(), {g.L, g.E});
  dk_sizes.insert(dk_sizes.end(), {g.S, g.E});
  dv_sizes.insert(dv_sizes.end(), {g.S, g.Ev});
  Tensor dq = new_tensor(dq_sizes, q.dtype(), q.device());
  Tensor dk = new_tensor(dk_sizes, q.dtype(), q.device());
  Tensor dv = new_tensor(dv_sizes, q.dtype(), q.device());
  dispatch_floating(q.dtype(), op, [&]<class T>() {
    flash_backward<T>(g, static_cast<const T*>(go.data_ptr()), static_cast<const T*>(q.data_ptr()),
                      static_cast<const T*>(k.data_ptr()), static_cast<const T*>(v.data_ptr()),
                      static_cast<const T*>(oc.data_ptr()), static_cast<const T*>(lc.data_ptr()), mask, is_causal,
                      static_cast<T>(scale), static_cast<T*>(dq.data_ptr()), static_cast<T*>(dk.data_ptr()),
                      static_cast<T*>(dv.data_ptr()));
  });
  return {dq, dk, dv};
}

}  // namespace

GRAFT_DEFINE_OP(
    "_sdpa_flash(Tensor query, Tensor key, Tensor value, Tensor? attn_mask, bool is_causal, float scale) -> "
    "(Tensor, Tensor)");
GRAFT_DEFINE_OP(
    "_sdpa_flash_backward(Tensor grad_out, Tensor query, Tensor key, Tensor value, Tensor out, Tensor lse, "
    "Tensor? attn_mask, bool is_causal, float scale) -> (Tensor, Tensor, Tensor)");
GRAFT_KERNEL("_sdpa_flash", CPU, sdpa_flash_cpu);
GRAFT_KERNEL("_sdpa_flash_backward", CPU, sdpa_flash_backward_cpu);

}  // namespace kernels

namespace ops {

std::vector<Tensor> _sdpa_flash(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                bool is_causal, double scale) {
  GRAFT_OP_HANDLE(op, "_sdpa_flash");
  return call_op(op, q, k, v, attn_mask, is_causal, scale);
}

std::vector<Tensor> _sdpa_flash_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& out, const Tensor& lse, const Tensor& attn_mask,
                                         bool is_causal, double scale) {
  GRAFT_OP_HANDLE(op, "_sdpa_flash_backward");
  return call_op(op, grad_out, q, k, v, out, lse, attn_mask, is_causal, scale);
}

}  // namespace ops
}  // namespace graft
