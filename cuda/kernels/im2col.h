#pragma once
// im2col / col2im for the CUDA convolution (im2col + cuBLAS GEMM; see cuda/conv_cuda.cpp).
//
// Layouts, for `images` consecutive NCHW images:
//   x:   [images, C, H, W]
//   col: [images, C*kh*kw, OH*OW], row (c*kh + ki)*kw + kj, column oh*OW + ow, holding
//        x[c, oh*sh - ph + ki*dh, ow*sw - pw + kj*dw] (0 where that lies in the padding).
// The row order (c, ki, kj) is the weight's [O, C/groups, kh, kw] order, so group g's rows are
// the contiguous block [g*Cg*kh*kw, (g+1)*Cg*kh*kw).
// Plain launch functions over raw device pointers; they launch on `stream` and check the launch.
// T is float or double.
#include <cuda_runtime.h>

#include <cstdint>

namespace graft::cuda {

struct ConvGeometry {
  int64_t C, H, W;     // input channels and plane
  int64_t kh, kw;      // kernel
  int64_t OH, OW;      // output plane
  int64_t sh, sw, ph, pw, dh, dw;
};

// col = im2col(x): writes every element of col.
template <class T>
void launch_im2col(const T* x, T* col, int64_t images, const ConvGeometry& g, cudaStream_t stream);

// x = col2im(col): each input element is the sum of the column entries that read it. One thread
// per input element gathers them, so there are no atomics and every element of x is written.
template <class T>
void launch_col2im(const T* col, T* x, int64_t images, const ConvGeometry& g, cudaStream_t stream);

}  // namespace graft::cuda
