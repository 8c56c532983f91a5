// Pooling kernels (see pool.h). One thread per output element (forward) or per input element
// (avg backward); max backward scatters with atomics.
#include <limits>
#include <type_traits>

#include "cuda/cuda_context.h"
#include "cuda/kernels/pool.h"

namespace graft::cuda {
namespace {

template <class T>
__device__ __forceinline__ T lowest_value() {
  if constexpr (std::is_floating_point_v<T>)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}

// Window scan in (i, j) order; a strictly greater value or a NaN takes over, so the first
// maximum wins and the last NaN wins, exactly as the CPU kernel. An output whose window holds
// nothing above `lowest` reports the window's first in-bounds position.
template <class T>
__global__ void max_pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t* __restrict__ ind,
                                  uint8_t* __restrict__ off, PoolGeometry g, int64_t total) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t ow = idx % g.OW, oh = (idx / g.OW) % g.OH, pl = idx / (g.OW * g.OH);
    const T* xp = x + pl * g.H * g.W;
    const int64_t h0 = oh * g.sh - g.ph, w0 = ow * g.sw - g.pw;
    int64_t hs = h0, ws = w0;
    while (hs < 0) hs += g.dh;
    while (ws < 0) ws += g.dw;
    T m = lowest_value<T>();
    int64_t best = hs * g.W + ws;
    int64_t best_tap = (hs - h0) / g.dh * g.kw + (ws - w0) / g.dw;
    for (int64_t i = 0; i < g.kh; ++i) {
      const int64_t h = h0 + i * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (int64_t j = 0; j < g.kw; ++j) {
        const int64_t w = w0 + j * g.dw;
        if (w < 0 || w >= g.W) continue;
        const T v = xp[h * g.W + w];
        bool take = v > m;
        if constexpr (std::is_floating_point_v<T>) take = take || (v != v);
        if (take) {
          m = v;
          best = h * g.W + w;
          best_tap = i * g.kw + j;
        }
      }
    }
    y[idx] = m;
    if (ind) ind[idx] = best;
    if (off) off[idx] = static_cast<uint8_t>(best_tap);
  }
}

template <class T>
__global__ void max_pool2d_backward_kernel(const T* __restrict__ gy, const int64_t* __restrict__ ind,
                                           T* __restrict__ gx, int64_t per_out, int64_t per_in,
                                           unsigned long long* __restrict__ bad, int64_t total) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t k = ind[idx];
    if (k < 0 || k >= per_in) {
      atomicExch(&bad[1], static_cast<unsigned long long>(k));
      atomicExch(&bad[0], 1ULL);
      continue;
    }
    atomicAdd(&gx[(idx / per_out) * per_in + k], gy[idx]);
  }
}

// The same scatter from window offsets: output idx's window origin plus the offset's (i * dh, j * dw).
template <class T>
__global__ void max_pool2d_offsets_backward_kernel(const T* __restrict__ gy, const uint8_t* __restrict__ off,
                                                   T* __restrict__ gx, PoolGeometry g,
                                                   unsigned long long* __restrict__ bad, int64_t total) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t ow = idx % g.OW, oh = (idx / g.OW) % g.OH, pl = idx / (g.OW * g.OH);
    const int64_t t = off[idx];
    const int64_t h = oh * g.sh - g.ph + t / g.kw * g.dh, w = ow * g.sw - g.pw + t % g.kw * g.dw;
    if (t >= g.kh * g.kw || h < 0 || h >= g.H || w < 0 || w >= g.W) {
      atomicExch(&bad[1], static_cast<unsigned long long>(t));
      atomicExch(&bad[0], 1ULL);
      continue;
    }
    atomicAdd(&gx[pl * g.H * g.W + h * g.W + w], gy[idx]);
  }
}

// The window of output (oh, ow) clipped to the input, and its divisor, as the CPU's
// for_each_avg_window: the unclipped window is cut at input + right padding first.
struct AvgWindow {
  int64_t h0, h1, w0, w1, divisor;
};

__device__ __forceinline__ AvgWindow avg_window(const PoolGeometry& g, int64_t oh, int64_t ow, bool count_include_pad) {
  const int64_t h0 = oh * g.sh - g.ph, h1 = min(h0 + g.kh, g.H + g.ph);
  const int64_t w0 = ow * g.sw - g.pw, w1 = min(w0 + g.kw, g.W + g.pw);
  const int64_t pool_size = (h1 - h0) * (w1 - w0);
  AvgWindow a;
  a.h0 = max(h0, int64_t{0});
  a.w0 = max(w0, int64_t{0});
  a.h1 = min(h1, g.H);
  a.w1 = min(w1, g.W);
  a.divisor = count_include_pad ? pool_size : (a.h1 - a.h0) * (a.w1 - a.w0);
  return a;
}

template <class T>
__global__ void avg_pool2d_kernel(const T* __restrict__ x, T* __restrict__ y, PoolGeometry g, bool count_include_pad,
                                  int64_t total) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t ow = idx % g.OW, oh = (idx / g.OW) % g.OH, pl = idx / (g.OW * g.OH);
    const AvgWindow a = avg_window(g, oh, ow, count_include_pad);
    if (a.h0 >= a.h1 || a.w0 >= a.w1) {
      y[idx] = T(0);
      continue;
    }
    const T* xp = x + pl * g.H * g.W;
    T s = 0;
    for (int64_t h = a.h0; h < a.h1; ++h)
      for (int64_t w = a.w0; w < a.w1; ++w) s += xp[h * g.W + w];
    y[idx] = s / static_cast<T>(a.divisor);
  }
}

// Output rows whose window covers input row h: oh*s - p <= h < oh*s - p + k, within [0, out).
__device__ __forceinline__ void covering_range(int64_t h, int64_t k, int64_t s, int64_t p, int64_t out, int64_t& lo,
                                               int64_t& hi) {
  const int64_t t = h + p - k + 1;  // oh*s >= t
  lo = t <= 0 ? 0 : (t + s - 1) / s;
  hi = min((h + p) / s + 1, out);
}

template <class T>
__global__ void avg_pool2d_backward_kernel(const T* __restrict__ gy, T* __restrict__ gx, PoolGeometry g,
                                           bool count_include_pad, int64_t total) {
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t w = idx % g.W, h = (idx / g.W) % g.H, pl = idx / (g.W * g.H);
    const T* gp = gy + pl * g.OH * g.OW;
    int64_t oh0, oh1, ow0, ow1;
    covering_range(h, g.kh, g.sh, g.ph, g.OH, oh0, oh1);
    covering_range(w, g.kw, g.sw, g.pw, g.OW, ow0, ow1);
    T acc = 0;
    for (int64_t oh = oh0; oh < oh1; ++oh)
      for (int64_t ow = ow0; ow < ow1; ++ow) {
        const AvgWindow a = avg_window(g, oh, ow, count_include_pad);
        acc += gp[oh * g.OW + ow] / static_cast<T>(a.divisor);
      }
    gx[idx] = acc;
  }
}

}  // namespace

template <class T>
void launch_max_pool2d(const T* x, T* y, int64_t* ind, uint8_t* off, const PoolGeometry& g, cudaStream_t stream) {
  const int64_t total = g.planes * g.OH * g.OW;
  if (total == 0) return;
  max_pool2d_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(x, y, ind, off, g, total);
  check_launch("max_pool2d_kernel");
}

template <class T>
void launch_max_pool2d_backward(const T* gy, const int64_t* ind, T* gx, int64_t planes, int64_t per_out,
                                int64_t per_in, unsigned long long* bad, cudaStream_t stream) {
  const int64_t total = planes * per_out;
  if (total == 0) return;
  max_pool2d_backward_kernel<T>
      <<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(gy, ind, gx, per_out, per_in, bad, total);
  check_launch("max_pool2d_backward_kernel");
}

template <class T>
void launch_max_pool2d_offsets_backward(const T* gy, const uint8_t* off, T* gx, const PoolGeometry& g,
                                        unsigned long long* bad, cudaStream_t stream) {
  const int64_t total = g.planes * g.OH * g.OW;
  if (total == 0) return;
  max_pool2d_offsets_backward_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(gy, off, gx, g, bad, total);
  check_launch("max_pool2d_offsets_backward_kernel");
}

template <class T>
void launch_avg_pool2d(const T* x, T* y, const PoolGeometry& g, bool count_include_pad, cudaStream_t stream) {
  const int64_t total = g.planes * g.OH * g.OW;
  if (total == 0) return;
  avg_pool2d_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(x, y, g, count_include_pad, total);
  check_launch("avg_pool2d_kernel");
}

template <class T>
void launch_avg_pool2d_backward(const T* gy, T* gx, const PoolGeometry& g, bool count_include_pad,
                                cudaStream_t stream) {
  const int64_t total = g.planes * g.H * g.W;
  if (total == 0) return;
  avg_pool2d_backward_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(gy, gx, g, count_include_pad, total);
  check_launch("avg_pool2d_backward_kernel");
}

template void launch_max_pool2d<float>(const float*, float*, int64_t*, uint8_t*, const PoolGeometry&, cudaStream_t);
template void launch_max_pool2d<double>(const double*, double*, int64_t*, uint8_t*, const PoolGeometry&, cudaStream_t);
template void launch_max_pool2d<int64_t>(const int64_t*, int64_t*, int64_t*, uint8_t*, const PoolGeometry&,
                                         cudaStream_t);
template void launch_max_pool2d_offsets_backward<float>(const float*, const uint8_t*, float*, const PoolGeometry&,
                                                        unsigned long long*, cudaStream_t);
template void launch_max_pool2d_offsets_backward<double>(const double*, const uint8_t*, double*, const PoolGeometry&,
                                                         unsigned long long*, cudaStream_t);
template void launch_max_pool2d_backward<float>(const float*, const int64_t*, float*, int64_t, int64_t, int64_t,
                                                unsigned long long*, cudaStream_t);
template void launch_max_pool2d_backward<double>(const double*, const int64_t*, double*, int64_t, int64_t, int64_t,
                                                 unsigned long long*, cudaStream_t);
template void launch_avg_pool2d<float>(const float*, float*, const PoolGeometry&, bool, cudaStream_t);
template void launch_avg_pool2d<double>(const double*, double*, const PoolGeometry&, bool, cudaStream_t);
template void launch_avg_pool2d_backward<float>(const float*, float*, const PoolGeometry&, bool, cudaStream_t);
template void launch_avg_pool2d_backward<double>(const double*, double*, const PoolGeometry&, bool, cudaStream_t);

}  // namespace graft::cuda
