// CUDA kernels for 2-D convolution (NCHW, or unbatched CHW) and its two backward kernels, as
// im2col + cuBLAS GEMM (no cuDNN). Argument checks and messages mirror ops/conv.cpp.
//
//   conv2d:                 out[n, g]  [Og, P] = W_g [Og, K] @ col[n, g] [K, P]            (+ bias)
//   conv2d_backward_input:  col[n, g]  [K, P]  = W_g^T [K, Og] @ gy[n, g] [Og, P], gx = col2im(col)
//   conv2d_backward_weight: gW_g       [Og, K] = sum_n gy[n, g] [Og, P] @ col[n, g]^T [P, K]
// with P = OH*OW, Cg = C/groups, Og = O/groups, K = Cg*kh*kw, col = im2col(x) laid out as in
// kernels/im2col.h, so group g's columns are rows [g*K, (g+1)*K) of an image's column matrix.
// Columns are built for a chunk of images at a time (bounded memory); the forward and
// backward-input GEMMs of a chunk are one strided-batched call per group (the weight is shared
// across images: stride 0). A 1x1 kernel with stride 1 and no padding reads the input itself as
// its columns (and backward-input writes gx directly), skipping im2col/col2im.
// Bias: out is first filled with bias[o] per channel, then the GEMM adds with beta = 1.
#include <algorithm>

#include "cuda/cuda_kernels.h"
#include "cuda/cublas_gemm.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/im2col.h"
#include "cuda/kernels/matmul_int.h"
#include "ops/conv_pool_params.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

// ---- im2col + GEMM ----

// Sizes shared by the three kernels.
struct ConvDims {
  cuda::ConvGeometry geo;
  int64_t P, K, Og, rows;  // rows = C*kh*kw: an image's column matrix is [rows, P]
  bool direct;             // 1x1, stride 1, no padding: an image's columns are the image itself
};

ConvDims conv_dims(const ConvParams& p) {
  ConvDims d;
  d.geo = cuda::ConvGeometry{p.C, p.H, p.W, p.kh, p.kw, p.OH, p.OW, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw};
  d.P = p.OH * p.OW;
  d.K = p.C / p.groups * p.kh * p.kw;
  d.Og = p.O / p.groups;
  d.rows = p.C * p.kh * p.kw;
  d.direct = p.kh == 1 && p.kw == 1 && p.sh == 1 && p.sw == 1 && p.ph == 0 && p.pw == 0;
  return d;
}

// Images per chunk so that a chunk's columns stay within ~256 MiB (at least one image).
constexpr int64_t kColumnBudgetBytes = int64_t{256} << 20;
int64_t images_per_chunk(const ConvParams& p, const ConvDims& d, size_t elem) {
  int64_t per_image = std::max<int64_t>(1, d.rows * d.P * static_cast<int64_t>(elem));
  return std::clamp<int64_t>(kColumnBudgetBytes / per_image, 1, std::max<int64_t>(p.N, 1));
}

// x [N, C, H, W], w [O, Cg, kh, kw] (contiguous) -> out [N, O, OH, OW]. bias: [O], any stride.
template <class T>
void conv_forward(const ConvParams& p, const T* x, const T* w, const Tensor& bias, T* out, Device dev,
                  cudaStream_t stream) {
  ConvDims d = conv_dims(p);
  if (bias.defined())
    // out [N, O, P] = bias[O] broadcast over images and positions
    cuda::launch_fill_bias<T>(out, static_cast<const T*>(bias.data_ptr()), bias.stride(0), p.N, p.O, d.P, stream);
  if (d.K == 0) {  // no input channels: an empty sum
    if (!bias.defined()) GRAFT_CUDA_CHECK(cudaMemsetAsync(out, 0, sizeof(T) * p.N * p.O * d.P, stream));
    return;
  }
  const T beta = bias.defined() ? T(1) : T(0);
  int64_t nb = d.direct ? p.N : images_per_chunk(p, d, sizeof(T));
  Tensor col_buf;
  if (!d.direct) col_buf = new_tensor({nb, d.rows, d.P}, dtype_v<T>, dev);
  for (int64_t n0 = 0; n0 < p.N; n0 += nb) {
    int64_t cnt = std::min(nb, p.N - n0);
    const T* col = x + n0 * p.C * p.H * p.W;
    if (!d.direct) {
      // x[n0 : n0+cnt] [cnt, C, H, W] -> col_buf [cnt, rows, P]
      cuda::launch_im2col<T>(col, static_cast<T*>(col_buf.data_ptr()), cnt, d.geo, stream);
      col = static_cast<const T*>(col_buf.data_ptr());
    }
    for (int64_t g = 0; g < p.groups; ++g) {
      // Row-major out[n, g] [Og, P] = W_g [Og, K] @ col[n, g] [K, P], per image n of the chunk.
      // Column-major: out^T [P, Og] = col^T [P, K] @ W_g^T [K, Og]: (M, N, K) = (P, Og, K);
      // col (row-major, ld P) as op N, W_g (row-major, ld K) as op N, ldc = P.
      // Batch strides: columns rows*P, weight 0, output O*P.
      cuda::gemm_strided_batched<T>(CUBLAS_OP_N, CUBLAS_OP_N, d.P, d.Og, d.K, T(1), col + g * d.K * d.P, d.P,
                                    d.rows * d.P, w + g * d.Og * d.K, d.K, 0, beta,
                                    out + n0 * p.O * d.P + g * d.Og * d.P, d.P, p.O * d.P, cnt);
    }
  }
}

// gy [N, O, OH, OW], w (contiguous) -> gx [N, C, H, W]
template <class T>
void conv_backward_input(const ConvParams& p, const T* gy, const T* w, T* gx, Device dev, cudaStream_t stream) {
  ConvDims d = conv_dims(p);
  int64_t nb = d.direct ? p.N : images_per_chunk(p, d, sizeof(T));
  Tensor col_buf;
  if (!d.direct) col_buf = new_tensor({nb, d.rows, d.P}, dtype_v<T>, dev);
  for (int64_t n0 = 0; n0 < p.N; n0 += nb) {
    int64_t cnt = std::min(nb, p.N - n0);
    T* col = d.direct ? gx + n0 * p.C * p.H * p.W : static_cast<T*>(col_buf.data_ptr());
    for (int64_t g = 0; g < p.groups; ++g) {
      // Row-major col[n, g] [K, P] = W_g^T [K, Og] @ gy[n, g] [Og, P], per image n of the chunk.
      // Column-major: col^T [P, K] = gy^T [P, Og] @ W_g [Og, K]: (M, N, K) = (P, K, Og);
      // gy (row-major, ld P) as op N; W_g^T is column-major with ld K, so op T; ldc = P.
      // Batch strides: grad_out O*P, weight 0, columns rows*P.
      cuda::gemm_strided_batched<T>(CUBLAS_OP_N, CUBLAS_OP_T, d.P, d.K, d.Og, T(1),
                                    gy + n0 * p.O * d.P + g * d.Og * d.P, d.P, p.O * d.P, w + g * d.Og * d.K, d.K, 0,
                                    T(0), col + g * d.K * d.P, d.P, d.rows * d.P, cnt);
    }
    // col_buf [cnt, rows, P] -> gx[n0 : n0+cnt] [cnt, C, H, W]
    if (!d.direct) cuda::launch_col2im<T>(col, gx + n0 * p.C * p.H * p.W, cnt, d.geo, stream);
  }
}

// gy [N, O, OH, OW], x [N, C, H, W] (contiguous) -> gw [O, Cg, kh, kw]
template <class T>
void conv_backward_weight(const ConvParams& p, const T* gy, const T* x, T* gw, Device dev, cudaStream_t stream) {
  ConvDims d = conv_dims(p);
  int64_t nb = d.direct ? p.N : images_per_chunk(p, d, sizeof(T));
  Tensor col_buf;
  if (!d.direct) col_buf = new_tensor({nb, d.rows, d.P}, dtype_v<T>, dev);
  for (int64_t n0 = 0; n0 < p.N; n0 += nb) {
    int64_t cnt = std::min(nb, p.N - n0);
    const T* cols = x + n0 * p.C * p.H * p.W;
    if (!d.direct) {
      // x[n0 : n0+cnt] [cnt, C, H, W] -> col_buf [cnt, rows, P]
      cuda::launch_im2col<T>(cols, static_cast<T*>(col_buf.data_ptr()), cnt, d.geo, stream);
      cols = static_cast<const T*>(col_buf.data_ptr());
    }
    // Every image adds into the same gw, so images are separate GEMMs; the first one overwrites.
    for (int64_t i = 0; i < cnt; ++i) {
      const T beta = n0 + i == 0 ? T(0) : T(1);
      const T* col = cols + i * d.rows * d.P;
      const T* gyn = gy + (n0 + i) * p.O * d.P;
      for (int64_t g = 0; g < p.groups; ++g) {
        // Row-major gw_g [Og, K] (+)= gy[n, g] [Og, P] @ col[n, g]^T [P, K].
        // Column-major: gw_g^T [K, Og] = col [K, P] @ gy^T [P, Og]: (M, N, K) = (K, Og, P);
        // col (row-major [K, P], ld P) is wanted untransposed, so op T; gy (row-major, ld P) as
        // op N; ldc = K.
        cuda::gemm_strided_batched<T>(CUBLAS_OP_T, CUBLAS_OP_N, d.K, d.Og, d.P, T(1), col + g * d.K * d.P, d.P, 0,
                                      gyn + g * d.Og * d.P, d.P, 0, beta, gw + g * d.Og * d.K, d.K, 0, 1);
      }
    }
  }
}

// ---- kernels ----

}  // namespace

}  // namespace kernels

namespace cuda {
using namespace kernels;

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor conv2d_cuda(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
                   const Shape& padding, const Shape& dilation, int64_t groups) {
  ConvParams p = plan_conv2d(input, weight, bias, stride, padding, dilation, groups);
  Tensor out = new_tensor(p.output_sizes(), input.dtype(), input.device());
  if (p.N == 0) return out;
  cuda::DeviceGuard guard(input.device().index);
  cudaStream_t stream = cuda::current_stream();
  Tensor x = kernels::contiguous_as(input), w = kernels::contiguous_as(weight);
  dispatch_floating(input.dtype(), "conv2d", [&]<class T>() {
    conv_forward<T>(p, static_cast<const T*>(x.data_ptr()), static_cast<const T*>(w.data_ptr()), bias,
                    static_cast<T*>(out.data_ptr()), out.device(), stream);
  });
  return out;
}

Tensor conv2d_backward_input_cuda(const Tensor& grad_out, const Shape& input_sizes, const Tensor& weight,
                                  const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  const char* op = "conv2d_backward_input";
  ConvParams p = plan_conv2d_backward_input(grad_out, input_sizes, weight, stride, padding, dilation, groups);
  Tensor gx = new_tensor(p.input_sizes(), grad_out.dtype(), grad_out.device());
  if (gx.numel() == 0) return gx;
  cuda::DeviceGuard guard(grad_out.device().index);
  cudaStream_t stream = cuda::current_stream();
  Tensor gy = kernels::contiguous_as(grad_out), w = kernels::contiguous_as(weight);
  dispatch_floating(gy.dtype(), op, [&]<class T>() {
    conv_backward_input<T>(p, static_cast<const T*>(gy.data_ptr()), static_cast<const T*>(w.data_ptr()),
                           static_cast<T*>(gx.data_ptr()), gx.device(), stream);
  });
  return gx;
}

Tensor conv2d_backward_weight_cuda(const Tensor& grad_out, const Tensor& input, const Shape& weight_sizes,
                                   const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  const char* op = "conv2d_backward_weight";
  ConvParams p = plan_conv2d_backward_weight(grad_out, input, weight_sizes, stride, padding, dilation, groups);
  Tensor gw = new_tensor(p.weight_sizes(), input.dtype(), input.device());
  cuda::DeviceGuard guard(input.device().index);
  cudaStream_t stream = cuda::current_stream();
  if (p.N == 0 || p.C == 0) {
    if (gw.numel() > 0) GRAFT_CUDA_CHECK(cudaMemsetAsync(gw.data_ptr(), 0, gw.nbytes(), stream));
    return gw;
  }
  Tensor gy = kernels::contiguous_as(grad_out), x = kernels::contiguous_as(input);
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    conv_backward_weight<T>(p, static_cast<const T*>(gy.data_ptr()), static_cast<const T*>(x.data_ptr()),
                            static_cast<T*>(gw.data_ptr()), gw.device(), stream);
  });
  return gw;
}

// The bias gradient by a sum over grad_out here (the GEMM-based weight gradient has no pass to fold
// it into).
std::vector<Tensor> conv2d_backward_weight_bias_cuda(const Tensor& grad_out, const Tensor& input,
                                                     const Shape& weight_sizes, const Shape& stride, const Shape& padding,
                                                     const Shape& dilation, int64_t groups) {
  Tensor gw = conv2d_backward_weight_cuda(grad_out, input, weight_sizes, stride, padding, dilation, groups);
  Tensor gb = sum_cuda(grad_out, grad_out.dim() == 4 ? Shape{0, 2, 3} : Shape{1, 2}, false, std::nullopt);
  return {gw, gb};
}

}  // namespace cuda

}  // namespace graft
