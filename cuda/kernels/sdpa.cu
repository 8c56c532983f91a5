// Fused scaled dot-product attention kernels (see sdpa.h), FlashAttention's tiling without its
// speed tricks (no tensor cores, no pipelining): correct and simple.
//
// Every kernel works on 16 x 16 tiles with a block of 256 threads, thread (r, c) = (tid / 16,
// tid % 16): the 16 lanes of a half warp share a row r of the tile, so row reductions are 16-lane
// shuffles and a row broadcasts its 16 values with __shfl_sync(..., 16) (no shared memory for p).
// - Tile scores: tile_dot stages 32 columns of the 16 "own" rows and the 16 "other" rows in shared
//   memory at a time and thread (r, c) sums own_r . other_c, so E and Ev have no upper bound.
// - Output columns: a block writes at most 128 columns of its rows (thread (r, c) owns columns
//   c, c + 16, ..., c + 112 in registers); wider outputs take more blocks along grid.z, each
//   recomputing the scores of its tiles.
// - forward: block = (batch matrix, 16 query rows, 128-column slice of Ev); it walks the key tiles
//   (causal: only those a row of the tile can see) with the online softmax: running max m, running
//   sum l and the un-normalised accumulator, then out = acc / l, lse = m + log l (the z = 0 slice
//   writes lse). A row that sees no key keeps l = 0: out 0, lse -inf.
// - backward: D = rowsum(dout * out) per row (a warp per row); dq per query tile (block = batch
//   matrix, 16 query rows, 128-column slice of E) walks the key tiles; dk and dv per key tile
//   (block = batch matrix, 16 key rows, 128-column slice of max(E, Ev)) walk the query tiles
//   (causal: from the tile's first key on). Each recomputes p = exp(s - lse) (0 where lse = -inf,
//   so a fully masked row passes no gradient) and dp; every output element has exactly one
//   writer, so there are no atomics and the result is deterministic.
#include "cuda/kernels/sdpa.h"

#include <limits>
#include <type_traits>

#include "cuda/cuda_context.h"

namespace graft::cuda {
namespace {

constexpr int kTile = 16;                          // rows per tile, both sides
constexpr int kThreads = kTile * kTile;            // one thread per (own row, other row) of a tile
constexpr int kDotChunk = 32;                      // columns staged per step of a tile's dot products
constexpr int kColsPerThread = 8;                  // output columns a thread accumulates
constexpr int kColSlice = kTile * kColsPerThread;  // output columns per block (grid.z slices the rest)
constexpr unsigned kFull = 0xffffffffu;

template <class T>
__device__ __forceinline__ T neg_inf() {
  return -std::numeric_limits<T>::infinity();
}
__device__ __forceinline__ float exp_t(float x) { return expf(x); }
__device__ __forceinline__ double exp_t(double x) { return exp(x); }
__device__ __forceinline__ float log_t(float x) { return logf(x); }
__device__ __forceinline__ double log_t(double x) { return log(x); }

// Over the 16 lanes of the caller's half warp. Every lane of the warp must call them.
template <class T>
__device__ __forceinline__ T row_sum(T v) {
  for (int o = kTile / 2; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o, kTile);
  return v;
}
template <class T>
__device__ __forceinline__ T row_max(T v) {
  for (int o = kTile / 2; o > 0; o >>= 1) v = fmax(v, __shfl_xor_sync(kFull, v, o, kTile));
  return v;
}

template <class T>
struct DotTiles {
  T a[kTile][kDotChunk + 1];  // +1: thread c reads b[c][e], a stride of 33 words across the lanes
  T b[kTile][kDotChunk + 1];
};

// For thread (r, c): sum over e < n of A[r][e] * B[c][e], A's rows at a + r * a_rs (rows >= a_rows
// read as 0), B's likewise. Every thread of the block must call it; it synchronises, also before
// returning, so the caller may restage any shared buffer right after.
template <class T>
__device__ T tile_dot(const T* a, int64_t a_rs, int a_rows, const T* b, int64_t b_rs, int b_rows, int64_t n,
                      DotTiles<T>& st) {
  const int tid = threadIdx.x, r = tid / kTile, c = tid % kTile;
  T acc = 0;
  for (int64_t e0 = 0; e0 < n; e0 += kDotChunk) {
    const int w = n - e0 < kDotChunk ? static_cast<int>(n - e0) : kDotChunk;
    for (int i = tid; i < kTile * kDotChunk; i += kThreads) {
      const int row = i / kDotChunk, col = i % kDotChunk;
      st.a[row][col] = row < a_rows && col < w ? a[row * a_rs + e0 + col] : T(0);
      st.b[row][col] = row < b_rows && col < w ? b[row * b_rs + e0 + col] : T(0);
    }
    __syncthreads();
    for (int e = 0; e < w; ++e) acc += st.a[r][e] * st.b[c][e];
    __syncthreads();
  }
  return acc;
}

// s[row][col] = a[row * rs + col0 + col] for row < rows and col0 + col < n, else 0. No barrier.
template <class T>
__device__ void stage_cols(T (*s)[kColSlice], const T* a, int64_t rs, int rows, int64_t col0, int64_t n) {
  for (int i = threadIdx.x; i < kTile * kColSlice; i += kThreads) {
    const int row = i / kColSlice, col = i % kColSlice;
    const int64_t e = col0 + col;
    s[row][col] = row < rows && e < n ? a[row * rs + e] : T(0);
  }
}

// The score of query i and key j of batch matrix b (both in range) from their dot product, as the
// CPU's RowMask: scaled, then the bool mask (-inf) or the additive mask, then causality.
template <class T>
__device__ __forceinline__ T score(const SdpaDeviceGeometry& g, const void* mask, int64_t b, int64_t i, int64_t j,
                                   T dot, T scale) {
  T s = scale * dot;
  if (g.mask != kSdpaMaskNone) {
    const int64_t o = g.m_off[b] + i * g.m_rs + j * g.m_cs;
    if (g.mask == kSdpaMaskBool) {
      if (static_cast<const unsigned char*>(mask)[o] == 0) s = neg_inf<T>();
    } else {
      s += static_cast<const T*>(mask)[o];
    }
  }
  if (g.causal && j > i) s = neg_inf<T>();
  return s;
}

// grid: (B * query tiles, 1, Ev slices).
template <class T>
__global__ void __launch_bounds__(kThreads)
    sdpa_forward_kernel(SdpaDeviceGeometry g, const T* __restrict__ q, const T* __restrict__ k,
                        const T* __restrict__ v, const void* __restrict__ mask, T scale, T* __restrict__ out,
                        T* __restrict__ lse, int64_t q_tiles) {
  __shared__ DotTiles<T> st;
  __shared__ T sv[kTile][kColSlice];
  const int tid = threadIdx.x, r = tid / kTile, c = tid % kTile;
  const int64_t b = blockIdx.x / q_tiles, i0 = (blockIdx.x % q_tiles) * kTile, i = i0 + r;
  const int64_t col0 = static_cast<int64_t>(blockIdx.z) * kColSlice;
  const int rows = g.L - i0 < kTile ? static_cast<int>(g.L - i0) : kTile;
  const T* qb = q + g.q_off[b] + i0 * g.q_rs;
  const T* kb = k + g.k_off[b];
  const T* vb = v + g.v_off[b];
  T m = neg_inf<T>(), l = 0, acc[kColsPerThread];
  for (int x = 0; x < kColsPerThread; ++x) acc[x] = 0;
  // Causal: keys past the tile's last query are invisible to all of its rows.
  const int64_t jend = g.causal ? (g.S < i0 + kTile ? g.S : i0 + kTile) : g.S;
  for (int64_t j0 = 0; j0 < jend; j0 += kTile) {
    const int cols = jend - j0 < kTile ? static_cast<int>(jend - j0) : kTile;
    const T dot = tile_dot<T>(qb, g.q_rs, rows, kb + j0 * g.k_rs, g.k_rs, cols, g.E, st);
    const T s = r < rows && c < cols ? score<T>(g, mask, b, i, j0 + c, dot, scale) : neg_inf<T>();
    const T mnew = fmax(m, row_max(s));
    const bool none = mnew == neg_inf<T>();  // nothing visible to this row yet
    const T p = none ? T(0) : exp_t(s - mnew);
    const T corr = none ? T(1) : exp_t(m - mnew);
    l = l * corr + row_sum(p);
    m = mnew;
    // acc = acc * corr + p v_j   (this thread's columns)
    stage_cols<T>(sv, vb + j0 * g.v_rs, g.v_rs, cols, col0, g.Ev);
    __syncthreads();
    for (int x = 0; x < kColsPerThread; ++x) acc[x] *= corr;
    for (int cc = 0; cc < kTile; ++cc) {
      const T pc = __shfl_sync(kFull, p, cc, kTile);
      for (int x = 0; x < kColsPerThread; ++x) acc[x] += pc * sv[cc][c + x * kTile];
    }
    __syncthreads();  // sv is restaged by the next tile
  }
  if (r >= rows) return;
  const T inv = l > T(0) ? T(1) / l : T(0);
  T* orow = out + (b * g.L + i) * g.Ev;
  for (int x = 0; x < kColsPerThread; ++x) {
    const int64_t e = col0 + c + x * kTile;
    if (e < g.Ev) orow[e] = acc[x] * inv;
  }
  if (blockIdx.z == 0 && c == 0) lse[b * g.L + i] = l > T(0) ? m + log_t(l) : neg_inf<T>();
}

// D[row] = dout[row] . out[row] over Ev, a warp per row. rows = B * L.
template <class T>
__global__ void sdpa_delta_kernel(const T* __restrict__ dout, const T* __restrict__ out, T* __restrict__ D,
                                  int64_t rows, int64_t Ev) {
  const int lane = threadIdx.x % 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (blockDim.x / 32);
  for (int64_t row = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32; row < rows; row += warps) {
    T s = 0;
    for (int64_t e = lane; e < Ev; e += 32) s += dout[row * Ev + e] * out[row * Ev + e];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(kFull, s, o);
    if (lane == 0) D[row] = s;
  }
}

// grid: (B * query tiles, 1, E slices). Thread (r, c): query i0 + r, key j0 + c of each key tile.
template <class T>
__global__ void __launch_bounds__(kThreads)
    sdpa_backward_dq_kernel(SdpaDeviceGeometry g, const T* __restrict__ dout, const T* __restrict__ q,
                            const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ lse,
                            const T* __restrict__ D, const void* __restrict__ mask, T scale, T* __restrict__ dq,
                            int64_t q_tiles) {
  __shared__ DotTiles<T> st;
  __shared__ T sk[kTile][kColSlice];
  const int tid = threadIdx.x, r = tid / kTile, c = tid % kTile;
  const int64_t b = blockIdx.x / q_tiles, i0 = (blockIdx.x % q_tiles) * kTile, i = i0 + r;
  const int64_t col0 = static_cast<int64_t>(blockIdx.z) * kColSlice;
  const int rows = g.L - i0 < kTile ? static_cast<int>(g.L - i0) : kTile;
  const T* qb = q + g.q_off[b] + i0 * g.q_rs;
  const T* kb = k + g.k_off[b];
  const T* vb = v + g.v_off[b];
  const T* dob = dout + (b * g.L + i0) * g.Ev;
  const T li = r < rows ? lse[b * g.L + i] : neg_inf<T>();
  const T Di = r < rows ? D[b * g.L + i] : T(0);
  T acc[kColsPerThread];
  for (int x = 0; x < kColsPerThread; ++x) acc[x] = 0;
  const int64_t jend = g.causal ? (g.S < i0 + kTile ? g.S : i0 + kTile) : g.S;
  for (int64_t j0 = 0; j0 < jend; j0 += kTile) {
    const int cols = jend - j0 < kTile ? static_cast<int>(jend - j0) : kTile;
    const T dot = tile_dot<T>(qb, g.q_rs, rows, kb + j0 * g.k_rs, g.k_rs, cols, g.E, st);
    const T dp = tile_dot<T>(dob, g.Ev, rows, vb + j0 * g.v_rs, g.v_rs, cols, g.Ev, st);  // dout_i . v_j
    T p = 0;
    if (r < rows && c < cols && li != neg_inf<T>()) p = exp_t(score<T>(g, mask, b, i, j0 + c, dot, scale) - li);
    const T ds = p * (dp - Di);
    // acc += ds k_j   (this thread's columns of E)
    stage_cols<T>(sk, kb + j0 * g.k_rs, g.k_rs, cols, col0, g.E);
    __syncthreads();
    for (int cc = 0; cc < kTile; ++cc) {
      const T dc = __shfl_sync(kFull, ds, cc, kTile);
      for (int x = 0; x < kColsPerThread; ++x) acc[x] += dc * sk[cc][c + x * kTile];
    }
    __syncthreads();  // sk is restaged by the next tile
  }
  if (r >= rows) return;
  T* row = dq + (b * g.L + i) * g.E;
  for (int x = 0; x < kColsPerThread; ++x) {
    const int64_t e = col0 + c + x * kTile;
    if (e < g.E) row[e] = scale * acc[x];
  }
}

// grid: (B * key tiles, 1, max(E, Ev) slices). Thread (r, c): key j0 + r, query i0 + c of each
// query tile (the transpose of the dq kernel's tiles, so a half warp owns one key).
template <class T>
__global__ void __launch_bounds__(kThreads)
    sdpa_backward_dkdv_kernel(SdpaDeviceGeometry g, const T* __restrict__ dout, const T* __restrict__ q,
                              const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ lse,
                              const T* __restrict__ D, const void* __restrict__ mask, T scale, T* __restrict__ dk,
                              T* __restrict__ dv, int64_t k_tiles) {
  __shared__ DotTiles<T> st;
  __shared__ T sq[kTile][kColSlice];
  __shared__ T sdo[kTile][kColSlice];
  const int tid = threadIdx.x, r = tid / kTile, c = tid % kTile;
  const int64_t b = blockIdx.x / k_tiles, j0 = (blockIdx.x % k_tiles) * kTile, j = j0 + r;
  const int64_t col0 = static_cast<int64_t>(blockIdx.z) * kColSlice;
  const int keys = g.S - j0 < kTile ? static_cast<int>(g.S - j0) : kTile;
  const T* qb = q + g.q_off[b];
  const T* kb = k + g.k_off[b] + j0 * g.k_rs;
  const T* vb = v + g.v_off[b] + j0 * g.v_rs;
  const T* dob = dout + b * g.L * g.Ev;
  T acc_k[kColsPerThread], acc_v[kColsPerThread];
  for (int x = 0; x < kColsPerThread; ++x) acc_k[x] = acc_v[x] = 0;
  // Causal: queries before the tile's first key see none of its keys.
  for (int64_t i0 = g.causal ? j0 : 0; i0 < g.L; i0 += kTile) {
    const int rows = g.L - i0 < kTile ? static_cast<int>(g.L - i0) : kTile;
    const int64_t i = i0 + c;
    const T dot = tile_dot<T>(kb, g.k_rs, keys, qb + i0 * g.q_rs, g.q_rs, rows, g.E, st);  // k_j . q_i
    const T dp = tile_dot<T>(vb, g.v_rs, keys, dob + i0 * g.Ev, g.Ev, rows, g.Ev, st);  // v_j . dout_i
    T p = 0, Di = 0;
    if (r < keys && c < rows) {
      const T li = lse[b * g.L + i];
      if (li != neg_inf<T>()) p = exp_t(score<T>(g, mask, b, i, j, dot, scale) - li);
      Di = D[b * g.L + i];
    }
    const T ds = p * (dp - Di);
    // acc_v += p^T dout_i, acc_k += ds^T q_i   (this thread's columns)
    stage_cols<T>(sdo, dob + i0 * g.Ev, g.Ev, rows, col0, g.Ev);
    stage_cols<T>(sq, qb + i0 * g.q_rs, g.q_rs, rows, col0, g.E);
    __syncthreads();
    for (int cc = 0; cc < kTile; ++cc) {
      const T pc = __shfl_sync(kFull, p, cc, kTile);
      const T dc = __shfl_sync(kFull, ds, cc, kTile);
      for (int x = 0; x < kColsPerThread; ++x) {
        acc_v[x] += pc * sdo[cc][c + x * kTile];
        acc_k[x] += dc * sq[cc][c + x * kTile];
      }
    }
    __syncthreads();  // sq and sdo are restaged by the next tile
  }
  if (r >= keys) return;
  T* krow = dk + (b * g.S + j) * g.E;
  T* vrow = dv + (b * g.S + j) * g.Ev;
  for (int x = 0; x < kColsPerThread; ++x) {
    const int64_t e = col0 + c + x * kTile;
    if (e < g.E) krow[e] = scale * acc_k[x];
    if (e < g.Ev) vrow[e] = acc_v[x];
  }
}

template <class F>
void with_sdpa_dtype(DType dtype, const char* launcher, F&& f) {
  switch (dtype) {
    case DType::Float32: f(float{}); return;
    case DType::Float64: f(double{}); return;
    default: break;
  }
  GRAFT_ERROR("internal error: ", launcher, " was asked for unsupported dtype ", dtype);
}

int64_t tiles(int64_t n) { return (n + kTile - 1) / kTile; }

// grid (B * tiles of n rows, 1, slices of `cols` output columns), checked against CUDA's limits.
dim3 tile_grid(int64_t B, int64_t n, int64_t cols, const char* launcher) {
  const int64_t x = B * tiles(n), z = cols > 0 ? (cols + kColSlice - 1) / kColSlice : 1;
  GRAFT_CHECK(x <= std::numeric_limits<int>::max() && z <= 65535, launcher, ": attention of ", B,
              " batch matrices with ", n, " rows and ", cols, " output columns exceeds the CUDA grid");
  return dim3(static_cast<unsigned>(x), 1, static_cast<unsigned>(z));
}

}  // namespace

void launch_sdpa_forward(const SdpaDeviceGeometry& g, DType dtype, const void* q, const void* k, const void* v,
                         const void* mask, double scale, void* out, void* lse, cudaStream_t stream) {
  if (g.B == 0 || g.L == 0) return;
  with_sdpa_dtype(dtype, "launch_sdpa_forward", [&](auto tag) {
    using T = decltype(tag);
    const dim3 grid = tile_grid(g.B, g.L, g.Ev, "scaled_dot_product_attention");
    sdpa_forward_kernel<T><<<grid, kThreads, 0, stream>>>(g, static_cast<const T*>(q), static_cast<const T*>(k),
                                                          static_cast<const T*>(v), mask, static_cast<T>(scale),
                                                          static_cast<T*>(out), static_cast<T*>(lse), tiles(g.L));
    check_launch("sdpa_forward_kernel");
  });
}

int64_t sdpa_backward_scratch_bytes(const SdpaDeviceGeometry& g, DType dtype) {
  return g.B * g.L * static_cast<int64_t>(element_size(dtype));
}

void launch_sdpa_backward(const SdpaDeviceGeometry& g, DType dtype, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const void* lse, const void* mask, double scale, void* dq,
                          void* dk, void* dv, void* scratch, cudaStream_t stream) {
  if (g.B == 0) return;
  with_sdpa_dtype(dtype, "launch_sdpa_backward", [&](auto tag) {
    using T = decltype(tag);
    const char* op = "scaled_dot_product_attention_backward";
    const T* dop = static_cast<const T*>(dout);
    const T* qp = static_cast<const T*>(q);
    const T* kp = static_cast<const T*>(k);
    const T* vp = static_cast<const T*>(v);
    const T* lp = static_cast<const T*>(lse);
    T* D = static_cast<T*>(scratch);
    const T sc = static_cast<T>(scale);
    if (g.L > 0) {
      const int64_t rows = g.B * g.L, per_block = kThreads / 32;
      int64_t blocks = (rows + per_block - 1) / per_block;
      if (blocks > 65535 * 8) blocks = 65535 * 8;  // the warp-stride loop covers the rest
      sdpa_delta_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dop, static_cast<const T*>(out), D,
                                                                                  rows, g.Ev);
      check_launch("sdpa_delta_kernel");
      sdpa_backward_dq_kernel<T><<<tile_grid(g.B, g.L, g.E, op), kThreads, 0, stream>>>(
          g, dop, qp, kp, vp, lp, D, mask, sc, static_cast<T*>(dq), tiles(g.L));
      check_launch("sdpa_backward_dq_kernel");
    }
    if (g.S > 0) {
      sdpa_backward_dkdv_kernel<T><<<tile_grid(g.B, g.S, g.E > g.Ev ? g.E : g.Ev, op), kThreads, 0, stream>>>(
          g, dop, qp, kp, vp, lp, D, mask, sc, static_cast<T*>(dk), static_cast<T*>(dv), tiles(g.S));
      check_launch("sdpa_backward_dkdv_kernel");
    }
  });
}

}  // namespace graft::cuda
