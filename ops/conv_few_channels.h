#pragma once
// Direct convolution kernels for inputs with few channels (a network's first layer: Fashion-MNIST's
// one channel, RGB's three), forward and weight gradient, with channels-last outputs and gradients.
//
//   forward:        out[n, oh, ow, o] = bias[o] + sum_{c, i, j} w[o, c, i, j] x[n, c, ih, iw]
//   weight grad:    gw[o, c, i, j]    = sum_{n, oh, ow} g[n, oh, ow, o] x[n, c, ih, iw]
//   bias grad:      gb[o]             = sum_{n, oh, ow} g[n, oh, ow, o]   (optional, same pass)
//                   with ih = oh * sh - ph + i * dh, iw = ow * sw - pw + j * dw (taps outside the
//                   input read 0)
//
// oneDNN 2.6's bf16 kernels run such convolutions slower than its float32 ones: each output pixel
// has only C*kh*kw multiply-adds per output channel (9 for a 3x3 kernel on one channel), too few
// for its blocked kernels. These loops keep four output pixels' channels in 16-lane float vectors
// and broadcast each tap's input value (x is widened to float once) against a row of the weights.
// The CNN's first layer ([64, 1, 28, 28] -> 32 channels, 3x3, channels-last) on a Sapphire Rapids
// Xeon, 2 cores, oneDNN -> here: bf16 forward 0.52 -> 0.27 ms, weight gradient 0.38 -> 0.25 ms.
// In float32 they measured no faster than oneDNN (forward 0.44 against 0.45 ms, weight gradient
// 0.27 against 0.23 ms: the output's bytes bound the forward), so float32 stays on oneDNN.
//
// Invariants:
// 1. Every output element is one float sum in a fixed order (bias, then taps in (c, i, j) order),
//    rounded once to bfloat16; the weight gradient sums fixed chunks of output rows, each in row
//    order, then the chunks in order: the same bits on any thread count.
// 2. Only bfloat16, groups 1, at most kFewChannelsMax input channels, kFewChannelsMaxOut output
//    channels and kFewChannelsMaxTaps taps (C * kh * kw); the caller checks few_channels_conv().
#include "ops/conv_pool_params.h"
#include "runtime/tensor.h"

namespace graft::kernels {

inline constexpr int64_t kFewChannelsMax = 4, kFewChannelsMaxOut = 64, kFewChannelsMaxTaps = 49;

// Whether these kernels take a convolution of `p` in `dtype` (invariant 2).
bool few_channels_conv(const ConvParams& p, DType dtype);
// out: a dense channels-last bf16 [N, O, OH, OW] tensor; x, w, bias (undefined or [O]) bf16, any strides.
void few_channels_conv_forward(const ConvParams& p, const Tensor& x, const Tensor& w, const Tensor& bias,
                               const Tensor& out);
// grad_out: dense channels-last bf16 [N, O, OH, OW]; returns gw [O, C, kh, kw] (contiguous, bf16),
// and sets *grad_bias (when given) to the bias gradient [O], summed in the same pass and order.
Tensor few_channels_conv_weight_grad(const ConvParams& p, const Tensor& grad_out, const Tensor& x,
                                     Tensor* grad_bias = nullptr);

}  // namespace graft::kernels
