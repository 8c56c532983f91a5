#pragma once
// 2-D max and average pooling kernels for the CUDA backend (glue: cuda/pool_cuda.cpp).
// Semantics are those of ops/pool.cpp (PyTorch's): window scan order, NaN propagation, the
// index of an all -inf window, the avg divisor with and without count_include_pad.
// Tensors are contiguous [planes, H, W] inputs and [planes, OH, OW] outputs (planes = N*C).
// Plain launch functions over raw device pointers; they launch on `stream` and check the launch.
#include <cuda_runtime.h>

#include <cstdint>

namespace graft::cuda {

struct PoolGeometry {
  int64_t planes, H, W, OH, OW;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
};

// y (and ind, when not null: the flat h*W + w position of the max in its input plane; off, when
// not null: its offset i * kw + j in its window, kh * kw <= 256) from x. T is float, double or
// int64_t.
template <class T>
void launch_max_pool2d(const T* x, T* y, int64_t* ind, uint8_t* off, const PoolGeometry& g, cudaStream_t stream);

// gx [planes, per_in] must be zeroed by the caller; adds gy[pl, o] at gx[pl, ind[pl, o]] with
// atomics (windows overlap and the indices are data). An index outside [0, per_in) is skipped
// and reported: bad[0] becomes 1 and bad[1] holds one such index. T is float or double.
template <class T>
void launch_max_pool2d_backward(const T* gy, const int64_t* ind, T* gx, int64_t planes, int64_t per_out,
                                int64_t per_in, unsigned long long* bad, cudaStream_t stream);

// The same scatter from window offsets (g.OH, g.OW: grad_out's spatial size): gy[pl, o] goes to
// o's window origin plus (i * dh, j * dw) for offset i * kw + j. An offset outside the window or
// the plane is skipped and reported in bad as above. T is float or double.
template <class T>
void launch_max_pool2d_offsets_backward(const T* gy, const uint8_t* off, T* gx, const PoolGeometry& g,
                                        unsigned long long* bad, cudaStream_t stream);

// T is float or double (dilation is 1 for average pooling).
template <class T>
void launch_avg_pool2d(const T* x, T* y, const PoolGeometry& g, bool count_include_pad, cudaStream_t stream);

// One thread per input element gathers grad_out / divisor over the windows that cover it, in
// the same order as the CPU kernel adds them; writes every element of gx.
template <class T>
void launch_avg_pool2d_backward(const T* gy, T* gx, const PoolGeometry& g, bool count_include_pad,
                                cudaStream_t stream);

}  // namespace graft::cuda
