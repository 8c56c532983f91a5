// im2col / col2im kernels (see im2col.h for the layouts).
#include "cuda/cuda_context.h"
#include "cuda/kernels/im2col.h"

namespace graft::cuda {
namespace {

// One thread per column element: col [images, C*kh*kw, OH*OW].
template <class T>
__global__ void im2col_kernel(const T* __restrict__ x, T* __restrict__ col, ConvGeometry g, int64_t total) {
  const int64_t P = g.OH * g.OW, rows = g.C * g.kh * g.kw;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t p = idx % P, r = (idx / P) % rows, n = idx / (P * rows);
    const int64_t kj = r % g.kw, ki = (r / g.kw) % g.kh, c = r / (g.kh * g.kw);
    const int64_t oh = p / g.OW, ow = p % g.OW;
    const int64_t h = oh * g.sh - g.ph + ki * g.dh, w = ow * g.sw - g.pw + kj * g.dw;
    col[idx] = (h >= 0 && h < g.H && w >= 0 && w < g.W) ? x[((n * g.C + c) * g.H + h) * g.W + w] : T(0);
  }
}

// One thread per input element x [images, C, H, W]: the taps (ki, kj) whose output position
// (oh, ow) reads (h, w) are those with h + ph - ki*dh a non-negative multiple of sh below OH*sh
// (likewise for w). Taps are summed in (ki, kj) order.
template <class T>
__global__ void col2im_kernel(const T* __restrict__ col, T* __restrict__ x, ConvGeometry g, int64_t total) {
  const int64_t P = g.OH * g.OW, rows = g.C * g.kh * g.kw;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(blockDim.x) * gridDim.x) {
    const int64_t w = idx % g.W, h = (idx / g.W) % g.H, c = (idx / (g.W * g.H)) % g.C, n = idx / (g.W * g.H * g.C);
    const T* cn = col + n * rows * P;
    T acc = 0;
    for (int64_t ki = 0; ki < g.kh; ++ki) {
      const int64_t th = h + g.ph - ki * g.dh;
      if (th < 0 || th % g.sh != 0) continue;
      const int64_t oh = th / g.sh;
      if (oh >= g.OH) continue;
      for (int64_t kj = 0; kj < g.kw; ++kj) {
        const int64_t tw = w + g.pw - kj * g.dw;
        if (tw < 0 || tw % g.sw != 0) continue;
        const int64_t ow = tw / g.sw;
        if (ow >= g.OW) continue;
        acc += cn[((c * g.kh + ki) * g.kw + kj) * P + oh * g.OW + ow];
      }
    }
    x[idx] = acc;
  }
}

}  // namespace

template <class T>
void launch_im2col(const T* x, T* col, int64_t images, const ConvGeometry& g, cudaStream_t stream) {
  const int64_t total = images * g.C * g.kh * g.kw * g.OH * g.OW;
  if (total == 0) return;
  im2col_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(x, col, g, total);
  check_launch("im2col_kernel");
}

template <class T>
void launch_col2im(const T* col, T* x, int64_t images, const ConvGeometry& g, cudaStream_t stream) {
  const int64_t total = images * g.C * g.H * g.W;
  if (total == 0) return;
  col2im_kernel<T><<<blocks_for(total), kThreadsPerBlock, 0, stream>>>(col, x, g, total);
  check_launch("col2im_kernel");
}

template void launch_im2col<float>(const float*, float*, int64_t, const ConvGeometry&, cudaStream_t);
template void launch_im2col<double>(const double*, double*, int64_t, const ConvGeometry&, cudaStream_t);
template void launch_col2im<float>(const float*, float*, int64_t, const ConvGeometry&, cudaStream_t);
template void launch_col2im<double>(const double*, double*, int64_t, const ConvGeometry&, cudaStream_t);

}  // namespace graft::cuda
