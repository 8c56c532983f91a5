// layer_norm kernels (see layer_norm.h). A group of G threads (32, or 256 for rows longer than
// 1024) owns a row: the statistics are strided passes plus group reductions in double, then the
// write. The parameter gradients are a separate column pass: thread i of piece p sums column i
// over the piece's rows (reads coalesced across i).
#include "cuda/kernels/layer_norm.h"

#include "cuda/kernels/reduce_common.cuh"
#include "ops/scalar_math.h"

namespace graft::cuda {
using namespace rdetail;
namespace {

constexpr int64_t kMaxPieces = 64;
constexpr int64_t kRowsPerPiece = 256;

int64_t param_pieces(int64_t M) {
  int64_t p = (M + kRowsPerPiece - 1) / kRowsPerPiece;
  return p < 1 ? 1 : p > kMaxPieces ? kMaxPieces : p;
}

struct AddOp {
  __device__ void operator()(double& a, const double& b) const { a += b; }
};

// x, y: [M, N]; mean, rstd: [M].
template <int G, class T>
__global__ void layer_norm_forward_kernel(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t M,
                                          int64_t N, double eps) {
  double* buf = shared_buffer<double>();
  constexpr int kGroups = kBlock / G;
  int g = threadIdx.x / G, lane = threadIdx.x % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroups; base < M;
       base += static_cast<int64_t>(gridDim.x) * kGroups) {
    int64_t r = base + g;
    bool active = r < M;
    const T* xr = x + r * N;
    T* yr = y + r * N;
    double s = 0;
    if (active)
      for (int64_t i = lane; i < N; i += G) s += static_cast<double>(xr[i]);
    s = group_reduce<G>(s, buf, AddOp{});
    double mu = s / static_cast<double>(N);
    double v = 0;
    if (active)
      for (int64_t i = lane; i < N; i += G) {
        double d = static_cast<double>(xr[i]) - mu;
        v += d * d;
      }
    v = group_reduce<G>(v, buf, AddOp{});
    if (!active) continue;  // no barrier below
    double rs = 1.0 / sqrt(v / static_cast<double>(N) + eps);
    if (lane == 0) {
      mean[r] = static_cast<T>(mu);
      rstd[r] = static_cast<T>(rs);
    }
    // The CPU kernel's steps in M (T itself, or float for the 16-bit types: one rounding at the
    // store, from the unrounded statistics, as the CPU's float fallback).
    using M = math::opmath_t<T>;
    M m = static_cast<M>(mu), q = static_cast<M>(rs);
    for (int64_t i = lane; i < N; i += G) {
      M h = (static_cast<M>(xr[i]) - m) * q;
      yr[i] = static_cast<T>((w ? h * static_cast<M>(w[i]) : h) + (b ? static_cast<M>(b[i]) : M(0)));
    }
  }
}

template <int G, class T>
__global__ void layer_norm_backward_dx_kernel(const T* dy, const T* x, const T* mean, const T* rstd, const T* w,
                                              T* dx, int64_t M, int64_t N) {
  double* buf = shared_buffer<double>();
  constexpr int kGroups = kBlock / G;
  int g = threadIdx.x / G, lane = threadIdx.x % G;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroups; base < M;
       base += static_cast<int64_t>(gridDim.x) * kGroups) {
    int64_t r = base + g;
    bool active = r < M;
    const T* dyr = dy + r * N;
    const T* xr = x + r * N;
    double mu = active ? static_cast<double>(mean[r]) : 0.0, rs = active ? static_cast<double>(rstd[r]) : 0.0;
    double sum_g = 0, sum_gx = 0;
    if (active)
      for (int64_t i = lane; i < N; i += G) {
        double h = (static_cast<double>(xr[i]) - mu) * rs;
        double gi = static_cast<double>(dyr[i]) * (w ? static_cast<double>(w[i]) : 1.0);
        sum_g += gi;
        sum_gx += gi * h;
      }
    sum_g = group_reduce<G>(sum_g, buf, AddOp{});
    sum_gx = group_reduce<G>(sum_gx, buf, AddOp{});
    if (!active) continue;  // no barrier below
    double a = sum_g / static_cast<double>(N), c = sum_gx / static_cast<double>(N);
    T* dxr = dx + r * N;
    for (int64_t i = lane; i < N; i += G) {
      double h = (static_cast<double>(xr[i]) - mu) * rs;
      double gi = static_cast<double>(dyr[i]) * (w ? static_cast<double>(w[i]) : 1.0);
      dxr[i] = static_cast<T>(rs * (gi - a - h * c));
    }
  }
}

// grid: (columns / kBlock, pieces). pdw/pdb: [pieces, N] doubles.
template <class T>
__global__ void layer_norm_params_partial_kernel(const T* dy, const T* x, const T* mean, const T* rstd, int64_t M,
                                                 int64_t N, int64_t pieces, double* pdw, double* pdb) {
  int64_t p = blockIdx.y;
  int64_t r0 = p * M / pieces, r1 = (p + 1) * M / pieces;
  for (int64_t i = global_thread(); i < N; i += global_stride()) {
    double sw = 0, sb = 0;
    for (int64_t r = r0; r < r1; ++r) {
      double h = (static_cast<double>(x[r * N + i]) - static_cast<double>(mean[r])) * static_cast<double>(rstd[r]);
      double d = static_cast<double>(dy[r * N + i]);
      sw += d * h;
      sb += d;
    }
    pdw[p * N + i] = sw;
    pdb[p * N + i] = sb;
  }
}

template <class T>
__global__ void layer_norm_params_finish_kernel(const double* pdw, const double* pdb, int64_t N, int64_t pieces,
                                                T* dw, T* db) {
  for (int64_t i = global_thread(); i < N; i += global_stride())
    scalar_math::finish_param_grads(pdw, pdb, N, pieces, i, dw, db);
}

}  // namespace

void launch_layer_norm_forward(const void* x, const void* w, const void* b, void* y, void* mean, void* rstd,
                               DType dtype, int64_t M, int64_t N, double eps, cudaStream_t stream) {
  if (M == 0) return;
  with_floating_or_reduced(dtype, "launch_layer_norm_forward", [&](auto tag) {
    using T = decltype(tag);
    auto args = [&](auto kernel, unsigned int grid) {
      kernel<<<grid, kBlock, 0, stream>>>(static_cast<const T*>(x), static_cast<const T*>(w),
                                         static_cast<const T*>(b), static_cast<T*>(y), static_cast<T*>(mean),
                                         static_cast<T*>(rstd), M, N, eps);
    };
    if (N > 1024) args(layer_norm_forward_kernel<256, T>, grid_for(M, 1));
    else args(layer_norm_forward_kernel<32, T>, grid_for(M, kBlock / 32));
    check_launch("layer_norm_forward_kernel");
  });
}

int64_t layer_norm_backward_scratch_bytes(int64_t M, int64_t N) {
  return 2 * param_pieces(M) * N * static_cast<int64_t>(sizeof(double));
}

void launch_layer_norm_backward(const void* dy, const void* x, const void* mean, const void* rstd, const void* w,
                                void* dx, void* dw, void* db, DType dtype, int64_t M, int64_t N, void* scratch,
                                cudaStream_t stream) {
  with_floating_or_reduced(dtype, "launch_layer_norm_backward", [&](auto tag) {
    using T = decltype(tag);
    const T* dyp = static_cast<const T*>(dy);
    const T* xp = static_cast<const T*>(x);
    const T* mp = static_cast<const T*>(mean);
    const T* rp = static_cast<const T*>(rstd);
    if (M > 0 && N > 0) {
      if (N > 1024)
        layer_norm_backward_dx_kernel<256, T><<<grid_for(M, 1), kBlock, 0, stream>>>(
            dyp, xp, mp, rp, static_cast<const T*>(w), static_cast<T*>(dx), M, N);
      else
        layer_norm_backward_dx_kernel<32, T><<<grid_for(M, kBlock / 32), kBlock, 0, stream>>>(
            dyp, xp, mp, rp, static_cast<const T*>(w), static_cast<T*>(dx), M, N);
      check_launch("layer_norm_backward_dx_kernel");
    }
    if ((!dw && !db) || N == 0) return;
    int64_t pieces = param_pieces(M);
    double* pdw = static_cast<double*>(scratch);
    double* pdb = pdw + pieces * N;
    unsigned int gx = grid_for(N);
    if (gx > 65535) gx = 65535;  // grid-stride covers the rest
    dim3 grid(gx, static_cast<unsigned int>(pieces));
    layer_norm_params_partial_kernel<T><<<grid, kBlock, 0, stream>>>(dyp, xp, mp, rp, M, N, pieces, pdw, pdb);
    check_launch("layer_norm_params_partial_kernel");
    layer_norm_params_finish_kernel<T><<<grid_for(N), kBlock, 0, stream>>>(pdw, pdb, N, pieces, static_cast<T*>(dw),
                                                                          static_cast<T*>(db));
    check_launch("layer_norm_params_finish_kernel");
  });
}

}  // namespace graft::cuda
