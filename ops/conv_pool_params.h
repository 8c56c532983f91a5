#pragma once
// Argument checking and output-size arithmetic of conv2d, max/avg pooling and their backward ops,
// shared by the CPU kernels (ops/conv.cpp, ops/pool.cpp) and the CUDA ones (cuda/conv_cuda.cpp,
// cuda/pool_cuda.cpp), so both devices accept the same arguments and word their errors the same way.
#include <tuple>
#include <utility>

#include "ops/kernel_utils.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace graft::kernels {

struct ConvParams {
  int64_t N, C, H, W;      // input
  int64_t O, kh, kw;       // weight [O, C/groups, kh, kw]
  int64_t OH, OW;          // output
  int64_t sh, sw, ph, pw, dh, dw, groups;
  bool batched;            // false: 3-D tensors without N (N == 1)
  Shape input_sizes() const { return batched ? Shape{N, C, H, W} : Shape{C, H, W}; }
  Shape output_sizes() const { return batched ? Shape{N, O, OH, OW} : Shape{O, OH, OW}; }
  Shape weight_sizes() const { return {O, C / groups, kh, kw}; }
};

// A 2-D parameter given as one int (both dims) or a pair.
std::pair<int64_t, int64_t> pair_arg(const Shape& v, const char* op, const char* name);
// Validates every argument against the input and weight shapes; the output size follows.
ConvParams conv_params(const char* op, const Shape& in, const Shape& wt, const Shape& stride, const Shape& padding,
                       const Shape& dilation, int64_t groups);
void check_conv_tensor(const Tensor& t, const char* op, const char* arg);
void check_grad_out(const Tensor& grad_out, const ConvParams& p, const char* op);
// The whole argument check of each conv op (the devices then only compute).
ConvParams plan_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
                       const Shape& padding, const Shape& dilation, int64_t groups);
ConvParams plan_conv2d_backward_input(const Tensor& grad_out, const Shape& input_sizes, const Tensor& weight,
                                      const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);
ConvParams plan_conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, const Shape& weight_sizes,
                                       const Shape& stride, const Shape& padding, const Shape& dilation,
                                       int64_t groups);

struct PoolParams {
  int64_t N, C, H, W;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
  bool batched;
  int64_t planes() const { return N * C; }
  Shape output_sizes() const { return batched ? Shape{N, C, OH, OW} : Shape{C, OH, OW}; }
};

// PyTorch's pooling output size (floor, or ceil where the last window still starts inside the
// input or its left padding).
int64_t pool_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode);
// Validates the window arguments against the input shape; an empty stride means the kernel size.
PoolParams pool_params(const char* op, const Shape& in, const Shape& kernel, const Shape& stride,
                       const Shape& padding, const Shape& dilation, bool ceil_mode);

// The whole argument check of each pooling op (the devices then only compute).
PoolParams plan_max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                           const Shape& dilation, bool ceil_mode);
// max_pool2d, max_pool2d_with_indices and _max_pool2d_with_offsets on every device: the plan, the
// outputs and the contiguous input are shared; a device supplies only Fill, which computes
// out [planes, OH, OW] from a contiguous x [planes, H, W], and ind, when non-null, by its dtype:
//   int64: the winner's flat h * W + w position in its input plane (PyTorch's indices);
//   uint8: the winner's offset in its window, i * kw + j in window scan order (kh * kw <= 256).
// Both name the same element: an all -inf window's first valid position. Fill is not called for
// an empty output.
using MaxPoolFill = void (*)(const PoolParams& p, const Tensor& x, const Tensor& out, const Tensor* ind);
Tensor run_max_pool2d(MaxPoolFill fill, const Tensor& input, const Shape& kernel, const Shape& stride,
                      const Shape& padding, const Shape& dilation, bool ceil_mode, Tensor* ind,
                      DType index_dtype = kInt64);
// The most window positions a uint8 offset names.
inline constexpr int64_t kMaxPoolOffsetTaps = 256;
// Whether _max_pool2d_with_offsets takes this kernel size (one int or a pair; false where the
// size is malformed, so the caller's int64 path gives the usual error).
bool max_pool_offsets_fit(const Shape& kernel);
template <MaxPoolFill Fill>
std::vector<Tensor> max_pool2d_with_indices_kernel(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                   const Shape& padding, const Shape& dilation, bool ceil_mode) {
  Tensor ind;
  Tensor out = run_max_pool2d(Fill, input, kernel, stride, padding, dilation, ceil_mode, &ind);
  return {out, ind};
}
template <MaxPoolFill Fill>
std::vector<Tensor> max_pool2d_with_offsets_kernel(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                   const Shape& padding, const Shape& dilation, bool ceil_mode) {
  Tensor off;
  Tensor out = run_max_pool2d(Fill, input, kernel, stride, padding, dilation, ceil_mode, &off, kUInt8);
  return {out, off};
}
template <MaxPoolFill Fill>
Tensor max_pool2d_kernel(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                         const Shape& dilation, bool ceil_mode) {
  return run_max_pool2d(Fill, input, kernel, stride, padding, dilation, ceil_mode, nullptr);
}

// max_pool2d_backward scatters grad_out [planes, per_out] into grad_input [planes, per_in = H * W]
// at the saved indices. It takes the input's sizes, not the input: the forward's autograd node then
// holds only the indices.
struct MaxPoolBackwardPlan {
  int64_t planes = 0, per_out = 0, per_in = 0, H = 0, W = 0;
  Shape input_size;
};
MaxPoolBackwardPlan plan_max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_size,
                                             bool channels_last);
// An index a device found outside its input plane.
[[noreturn]] void max_pool_bad_index_error(int64_t index, const MaxPoolBackwardPlan& p);
// _max_pool2d_offsets_backward: the same scatter from window offsets, so it also needs the
// window. The window arguments are checked as the forward's, and grad_out's spatial size must be
// the forward's output size for them (floor or ceil mode).
struct MaxPoolOffsetsBackwardPlan {
  MaxPoolBackwardPlan mp;
  PoolParams window;
};
MaxPoolOffsetsBackwardPlan plan_max_pool2d_offsets_backward(const Tensor& grad_out, const Tensor& offsets,
                                                            const Shape& input_size, const Shape& kernel,
                                                            const Shape& stride, const Shape& padding,
                                                            const Shape& dilation, bool channels_last);
// An offset a device found outside its window or the window's position outside the input plane.
[[noreturn]] void max_pool_bad_offset_error(int64_t offset, const MaxPoolOffsetsBackwardPlan& p);
// Whether a conv/pool kernel works channels-last on `t` (only 4-D tensors ever suggest it), and a
// fresh NHWC activation of `sizes`: the layout rule conv.cpp, pool.cpp and run_max_pool2d share.
inline bool is_channels_last(const Tensor& t) { return t.suggest_memory_format() == MemoryFormat::ChannelsLast; }
inline Tensor new_channels_last(const Shape& sizes, DType dtype, Device device) {
  return new_strided(sizes, channels_last_strides(sizes), dtype, device);
}

// The float32/bfloat16 CPU convolution's cache of reordered weights (ops/conv.cpp), for tests and benchmarks.
struct WeightCacheStats {
  int64_t hits = 0, misses = 0, entries = 0;
};
WeightCacheStats conv_weight_cache_stats();
void clear_conv_weight_cache();

PoolParams plan_avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                           bool ceil_mode);
PoolParams plan_avg_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Shape& kernel,
                                    const Shape& stride, const Shape& padding, bool ceil_mode);

}  // namespace graft::kernels
