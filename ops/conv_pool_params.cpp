#include "ops/conv_pool_params.h"

#include <algorithm>
#include <tuple>

#include "ops/kernel_utils.h"

namespace graft::kernels {

// A 2-D parameter given as one int (both dims) or a pair.
std::pair<int64_t, int64_t> pair_arg(const Shape& v, const char* op, const char* name) {
  GRAFT_CHECK(v.size() == 1 || v.size() == 2, op, ": ", name, " must be one int or a pair of ints, got ",
              shape_str(v));
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

// Validates every argument against the input and weight shapes; the output size follows.
ConvParams conv_params(const char* op, const Shape& in, const Shape& wt, const Shape& stride, const Shape& padding,
                       const Shape& dilation, int64_t groups) {
  GRAFT_CHECK(in.size() == 3 || in.size() == 4, op, ": expected a 3-D (unbatched) or 4-D (batched) input, got ",
              shape_str(in));
  GRAFT_CHECK(wt.size() == 4, op, ": expected a 4-D weight [out_channels, in_channels/groups, kH, kW], got ",
              shape_str(wt));
  for (int64_t v : in) GRAFT_CHECK(v >= 0, op, ": negative dimension in input shape ", shape_str(in));
  ConvParams p{};
  p.batched = in.size() == 4;
  size_t o = p.batched ? 1 : 0;
  p.N = p.batched ? in[0] : 1;
  p.C = in[o];
  p.H = in[o + 1];
  p.W = in[o + 2];
  p.O = wt[0];
  p.kh = wt[2];
  p.kw = wt[3];
  std::tie(p.sh, p.sw) = pair_arg(stride, op, "stride");
  std::tie(p.ph, p.pw) = pair_arg(padding, op, "padding");
  std::tie(p.dh, p.dw) = pair_arg(dilation, op, "dilation");
  p.groups = groups;
  GRAFT_CHECK(p.sh > 0 && p.sw > 0, op, ": stride must be positive, got ", shape_str(stride));
  GRAFT_CHECK(p.ph >= 0 && p.pw >= 0, op, ": padding must be non-negative, got ", shape_str(padding));
  GRAFT_CHECK(p.dh > 0 && p.dw > 0, op, ": dilation must be positive, got ", shape_str(dilation));
  GRAFT_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
  GRAFT_CHECK(p.kh > 0 && p.kw > 0 && p.O > 0, op, ": weight ", shape_str(wt), " has an empty dimension");
  GRAFT_CHECK(p.C % groups == 0, op, ": input channels ", p.C, " (input ", shape_str(in),
              ") are not divisible by groups=", groups);
  GRAFT_CHECK(p.O % groups == 0, op, ": out channels ", p.O, " (weight ", shape_str(wt),
              ") are not divisible by groups=", groups);
  GRAFT_CHECK(wt[1] * groups == p.C, op, ": given groups=", groups, ", weight of size ", shape_str(wt),
              ", expected input ", shape_str(in), " to have ", wt[1] * groups, " channels, but got ", p.C,
              " channels instead");
  int64_t eff_h = p.dh * (p.kh - 1) + 1, eff_w = p.dw * (p.kw - 1) + 1;
  GRAFT_CHECK(p.H + 2 * p.ph >= eff_h && p.W + 2 * p.pw >= eff_w, op, ": padded input size per channel (",
              p.H + 2 * p.ph, " x ", p.W + 2 * p.pw, ") of input ", shape_str(in), " is smaller than the kernel (",
              eff_h, " x ", eff_w, " with dilation ", shape_str(dilation), ", weight ", shape_str(wt), ")");
  p.OH = (p.H + 2 * p.ph - eff_h) / p.sh + 1;
  p.OW = (p.W + 2 * p.pw - eff_w) / p.sw + 1;
  return p;
}

void check_conv_tensor(const Tensor& t, const char* op, const char* arg) {
  check_defined(t, op, arg);
  GRAFT_CHECK(is_floating(t.dtype()), op, ": expected a float32 or float64 ", arg, ", got ", describe(t));
}

void check_grad_out(const Tensor& grad_out, const ConvParams& p, const char* op) {
  GRAFT_CHECK(grad_out.sizes() == p.output_sizes(), op, ": expected grad_out of shape ", shape_str(p.output_sizes()),
              " (the output of input ", shape_str(p.input_sizes()), " and weight ", shape_str(p.weight_sizes()),
              "), got ", shape_str(grad_out.sizes()));
}

int64_t pool_output_size(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil_mode) {
  int64_t num = in + 2 * pad - dil * (k - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  // Floor division (num may be negative for a kernel larger than the padded input).
  int64_t q = num >= 0 ? num / stride : -((-num + stride - 1) / stride);
  int64_t out = q + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

PoolParams pool_params(const char* op, const Shape& in, const Shape& kernel, const Shape& stride,
                       const Shape& padding, const Shape& dilation, bool ceil_mode) {
  GRAFT_CHECK(in.size() == 3 || in.size() == 4, op, ": expected a 3-D (unbatched) or 4-D (batched) input, got ",
              shape_str(in));
  PoolParams p{};
  p.batched = in.size() == 4;
  size_t o = p.batched ? 1 : 0;
  p.N = p.batched ? in[0] : 1;
  p.C = in[o];
  p.H = in[o + 1];
  p.W = in[o + 2];
  GRAFT_CHECK(p.C > 0 && p.H > 0 && p.W > 0, op, ": expected an input with non-zero channels, height and width, got ",
              shape_str(in));
  std::tie(p.kh, p.kw) = pair_arg(kernel, op, "kernel_size");
  if (stride.empty()) {
    p.sh = p.kh;
    p.sw = p.kw;
  } else {
    std::tie(p.sh, p.sw) = pair_arg(stride, op, "stride");
  }
  std::tie(p.ph, p.pw) = pair_arg(padding, op, "padding");
  std::tie(p.dh, p.dw) = pair_arg(dilation, op, "dilation");
  GRAFT_CHECK(p.kh > 0 && p.kw > 0, op, ": kernel_size must be positive, got ", shape_str(kernel));
  GRAFT_CHECK(p.sh > 0 && p.sw > 0, op, ": stride must be positive, got ", shape_str(stride));
  GRAFT_CHECK(p.dh > 0 && p.dw > 0, op, ": dilation must be positive, got ", shape_str(dilation));
  GRAFT_CHECK(p.ph >= 0 && p.pw >= 0 && p.ph <= p.kh / 2 && p.pw <= p.kw / 2, op,
              ": pad should be at most half of kernel size, but got padding ", shape_str(padding),
              " and kernel_size ", shape_str(kernel));
  p.OH = pool_output_size(p.H, p.kh, p.ph, p.sh, p.dh, ceil_mode);
  p.OW = pool_output_size(p.W, p.kw, p.pw, p.sw, p.dw, ceil_mode);
  GRAFT_CHECK(p.OH > 0 && p.OW > 0, op, ": output size is too small: input ", shape_str(in), " with kernel_size ",
              shape_str(kernel), ", padding ", shape_str(padding), " and dilation ", shape_str(dilation),
              " gives an output of ", p.OH, " x ", p.OW);
  return p;
}

PoolParams plan_max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                           const Shape& dilation, bool ceil_mode) {
  const char* op = "max_pool2d";
  check_defined(input, op, "input");
  GRAFT_CHECK(input.dtype() != kBool, op, ": not implemented for bool tensors (", describe(input), ")");
  return pool_params(op, input.sizes(), kernel, stride, padding, dilation, ceil_mode);
}

bool max_pool_offsets_fit(const Shape& kernel) {
  if (kernel.size() != 1 && kernel.size() != 2) return false;
  const int64_t kh = kernel[0], kw = kernel.back();
  return kh > 0 && kw > 0 && kh <= kMaxPoolOffsetTaps && kh * kw <= kMaxPoolOffsetTaps;
}

Tensor run_max_pool2d(MaxPoolFill fill, const Tensor& input, const Shape& kernel, const Shape& stride,
                      const Shape& padding, const Shape& dilation, bool ceil_mode, Tensor* ind,
                      DType index_dtype) {
  PoolParams p = plan_max_pool2d(input, kernel, stride, padding, dilation, ceil_mode);
  GRAFT_CHECK(index_dtype == kInt64 || (index_dtype == kUInt8 && p.kh * p.kw <= kMaxPoolOffsetTaps),
              "_max_pool2d_with_offsets: a ", p.kh, " x ", p.kw, " window has ", p.kh * p.kw,
              " positions, more than a uint8 offset names (", kMaxPoolOffsetTaps,
              "); max_pool2d_with_indices takes any window");
  // Channels-last in, channels-last out (the CPU fill has NHWC loops; other devices get NCHW).
  bool nhwc = input.is_cpu() && is_channels_last(input);
  auto make = [&](DType dtype) {
    return nhwc ? new_channels_last(p.output_sizes(), dtype, input.device())
                : new_tensor(p.output_sizes(), dtype, input.device());
  };
  Tensor out = make(input.dtype());
  if (ind) *ind = make(index_dtype);
  if (out.numel() > 0) fill(p, nhwc ? contiguous_in_format(input, MemoryFormat::ChannelsLast) : contiguous_as(input), out, ind);
  return out;
}

namespace {
// The checks both scatters share: everything but the index dtype. `what` names the index tensor.
MaxPoolBackwardPlan plan_max_pool_scatter(const char* op, const Tensor& grad_out, const Tensor& indices,
                                          const char* what, DType index_dtype, const Shape& input_size,
                                          bool channels_last) {
  check_defined(grad_out, op, "grad_out");
  check_defined(indices, op, what);
  check_floating(grad_out, op);
  if (index_dtype == kInt64)
    check_index_dtype(indices, op);
  else
    GRAFT_CHECK(indices.dtype() == index_dtype, op, ": expected ", dtype_name(index_dtype), " window ", what,
                ", got ", describe(indices));
  const size_t nd = input_size.size();
  GRAFT_CHECK(nd == 3 || nd == 4, op, ": expected a 3-D or 4-D input size, got ", shape_str(input_size));
  for (int64_t s : input_size) GRAFT_CHECK(s >= 0, op, ": input size ", shape_str(input_size), " has a negative dim");
  GRAFT_CHECK(!channels_last || nd == 4, op, ": a channels-last gradient needs a 4-D input size, got ",
              shape_str(input_size));
  GRAFT_CHECK(grad_out.device() == indices.device(), op, ": grad_out is on ", grad_out.device(),
              " but ", what, " are on ", indices.device());
  GRAFT_CHECK(grad_out.sizes() == indices.sizes(), op, ": grad_out ", shape_str(grad_out.sizes()),
              " and ", what, " ", shape_str(indices.sizes()), " must have the same shape");
  GRAFT_CHECK(static_cast<size_t>(grad_out.dim()) == nd &&
                  std::equal(input_size.begin(), input_size.end() - 2, grad_out.sizes().begin()),
              op, ": grad_out ", shape_str(grad_out.sizes()), " does not match input ", shape_str(input_size),
              " in its leading (batch and channel) dims");
  MaxPoolBackwardPlan p;
  p.input_size = input_size;
  p.H = input_size[nd - 2];
  p.W = input_size[nd - 1];
  p.planes = shape_numel(Shape(input_size.begin(), input_size.end() - 2));
  p.per_out = grad_out.size(static_cast<int64_t>(nd) - 2) * grad_out.size(static_cast<int64_t>(nd) - 1);
  p.per_in = p.H * p.W;
  return p;
}
}  // namespace

MaxPoolBackwardPlan plan_max_pool2d_backward(const Tensor& grad_out, const Tensor& indices, const Shape& input_size,
                                             bool channels_last) {
  return plan_max_pool_scatter("max_pool2d_backward", grad_out, indices, "indices", kInt64, input_size,
                               channels_last);
}

void max_pool_bad_index_error(int64_t index, const MaxPoolBackwardPlan& p) {
  GRAFT_ERROR("max_pool2d_backward: index ", index, " is out of range for an input plane of ", p.H, " x ", p.W,
              " (input ", shape_str(p.input_size), ")");
}

MaxPoolOffsetsBackwardPlan plan_max_pool2d_offsets_backward(const Tensor& grad_out, const Tensor& offsets,
                                                            const Shape& input_size, const Shape& kernel,
                                                            const Shape& stride, const Shape& padding,
                                                            const Shape& dilation, bool channels_last) {
  const char* op = "_max_pool2d_offsets_backward";
  MaxPoolOffsetsBackwardPlan p;
  p.mp = plan_max_pool_scatter(op, grad_out, offsets, "offsets", kUInt8, input_size, channels_last);
  p.window = pool_params(op, input_size, kernel, stride, padding, dilation, false);
  PoolParams ceil = pool_params(op, input_size, kernel, stride, padding, dilation, true);
  const int64_t nd = grad_out.dim(), oh = grad_out.size(nd - 2), ow = grad_out.size(nd - 1);
  GRAFT_CHECK((oh == p.window.OH && ow == p.window.OW) || (oh == ceil.OH && ow == ceil.OW), op, ": grad_out ",
              shape_str(grad_out.sizes()), " is not the pooled size of input ", shape_str(input_size),
              " for kernel_size ", shape_str(kernel), ", stride ", shape_str(stride), ", padding ",
              shape_str(padding), " and dilation ", shape_str(dilation));
  GRAFT_CHECK(p.window.kh * p.window.kw <= kMaxPoolOffsetTaps, op, ": a ", p.window.kh, " x ", p.window.kw,
              " window has more positions than a uint8 offset names (", kMaxPoolOffsetTaps, ")");
  p.window.OH = oh;
  p.window.OW = ow;
  return p;
}

void max_pool_bad_offset_error(int64_t offset, const MaxPoolOffsetsBackwardPlan& p) {
  GRAFT_ERROR("_max_pool2d_offsets_backward: offset ", offset, " is outside its ", p.window.kh, " x ", p.window.kw,
              " window or the input plane of ", p.mp.H, " x ", p.mp.W, " (input ", shape_str(p.mp.input_size), ")");
}

namespace {
void check_avg_input(const Tensor& t, const char* op, const char* arg) {
  check_defined(t, op, arg);
  GRAFT_CHECK(is_floating(t.dtype()), op, ": expected a float32 or float64 ", arg, ", got ", describe(t));
}
}  // namespace

PoolParams plan_avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                           bool ceil_mode) {
  const char* op = "avg_pool2d";
  check_avg_input(input, op, "input");
  return pool_params(op, input.sizes(), kernel, stride, padding, {1, 1}, ceil_mode);
}

PoolParams plan_avg_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Shape& kernel,
                                    const Shape& stride, const Shape& padding, bool ceil_mode) {
  const char* op = "avg_pool2d_backward";
  check_avg_input(grad_out, op, "grad_out");
  check_defined(input, op, "input");
  PoolParams p = pool_params(op, input.sizes(), kernel, stride, padding, {1, 1}, ceil_mode);
  GRAFT_CHECK(grad_out.sizes() == p.output_sizes(), op, ": expected grad_out of shape ", shape_str(p.output_sizes()),
              " (the output for input ", shape_str(input.sizes()), "), got ", shape_str(grad_out.sizes()));
  return p;
}

ConvParams plan_conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias, const Shape& stride,
                       const Shape& padding, const Shape& dilation, int64_t groups) {
  check_conv_tensor(input, "conv2d", "input");
  check_conv_tensor(weight, "conv2d", "weight");
  GRAFT_CHECK(input.dtype() == weight.dtype(), "conv2d: input ", describe(input), " and weight ", describe(weight),
              " must have the same dtype");
  ConvParams p = conv_params("conv2d", input.sizes(), weight.sizes(), stride, padding, dilation, groups);
  if (bias.defined()) {
    GRAFT_CHECK(bias.dtype() == input.dtype(), "conv2d: expected bias of dtype ", input.dtype(), ", got ",
                describe(bias));
    GRAFT_CHECK(bias.dim() == 1 && bias.size(0) == p.O, "conv2d: expected bias of shape [", p.O, "] (weight ",
                shape_str(weight.sizes()), "), got ", shape_str(bias.sizes()));
  }
  return p;
}

ConvParams plan_conv2d_backward_input(const Tensor& grad_out, const Shape& input_sizes, const Tensor& weight,
                                      const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups) {
  const char* op = "conv2d_backward_input";
  check_conv_tensor(grad_out, op, "grad_out");
  check_conv_tensor(weight, op, "weight");
  GRAFT_CHECK(grad_out.dtype() == weight.dtype(), op, ": grad_out ", describe(grad_out), " and weight ",
              describe(weight), " must have the same dtype");
  ConvParams p = conv_params(op, input_sizes, weight.sizes(), stride, padding, dilation, groups);
  check_grad_out(grad_out, p, op);
  return p;
}

ConvParams plan_conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, const Shape& weight_sizes,
                                       const Shape& stride, const Shape& padding, const Shape& dilation,
                                       int64_t groups) {
  const char* op = "conv2d_backward_weight";
  check_conv_tensor(grad_out, op, "grad_out");
  check_conv_tensor(input, op, "input");
  GRAFT_CHECK(grad_out.dtype() == input.dtype(), op, ": grad_out ", describe(grad_out), " and input ",
              describe(input), " must have the same dtype");
  ConvParams p = conv_params(op, input.sizes(), weight_sizes, stride, padding, dilation, groups);
  check_grad_out(grad_out, p, op);
  return p;
}

}  // namespace graft::kernels
