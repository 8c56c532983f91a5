// CUDA kernels for 2-D max and average pooling and their backward kernels (device code in
// kernels/pool.cu). Argument checks, output sizes (ceil_mode), padding, divisor and index
// semantics mirror ops/pool.cpp.
#include <algorithm>
#include <type_traits>

#include "cuda/cuda_context.h"
#include "cuda/kernels/pool.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

struct PoolParams {
  int64_t N, C, H, W;
  int64_t kh, kw, sh, sw, ph, pw, dh, dw;
  int64_t OH, OW;
  bool batched;
  int64_t planes() const { return N * C; }
  Shape output_sizes() const { return batched ? Shape{N, C, OH, OW} : Shape{C, OH, OW}; }
  cuda::PoolGeometry geometry() const { return {planes(), H, W, OH, OW, kh, kw, sh, sw, ph, pw, dh, dw}; }
};

std::pair<int64_t, int64_t> pair_arg(const Shape& v, const char* op, const char* name) {
  GRAFT_CHECK(v.size() == 1 || v.size() == 2, op, ": ", name, " must be one int or a pair of ints, got ",
              shape_str(v));
  return {v[0], v.size() == 2 ? v[1] : v[0]};
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

// ---- max ----

// Indices are only written when `ind` is given (max_pool2d alone does not need them).
Tensor max_pool2d_impl(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                       const Shape& dilation, bool ceil_mode, Tensor* ind) {
  const char* op = "max_pool2d";
  check_defined(input, op, "input");
  GRAFT_CHECK(input.dtype() != kBool, op, ": not implemented for bool tensors (", describe(input), ")");
  PoolParams p = pool_params(op, input.sizes(), kernel, stride, padding, dilation, ceil_mode);
  cuda::DeviceGuard guard(input.device().index);
  Tensor out = new_tensor(p.output_sizes(), input.dtype(), input.device());
  if (ind) *ind = new_tensor(p.output_sizes(), kInt64, input.device());
  if (out.numel() == 0) return out;
  cudaStream_t stream = cuda::current_stream();
  Tensor x = ops::contiguous(input);
  dispatch_dtype(input.dtype(), op, [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>)
      // x [planes, H, W] -> out, ind [planes, OH, OW]
      cuda::launch_max_pool2d<T>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()),
                                 ind ? ind->data_ptr<int64_t>() : nullptr, p.geometry(), stream);
  });
  return out;
}

std::tuple<Tensor, Tensor> max_pool2d_with_indices_cuda(const Tensor& input, const Shape& kernel, const Shape& stride,
                                                        const Shape& padding, const Shape& dilation, bool ceil_mode) {
  Tensor ind;
  Tensor out = max_pool2d_impl(input, kernel, stride, padding, dilation, ceil_mode, &ind);
  return {out, ind};
}

Tensor max_pool2d_cuda(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                       const Shape& dilation, bool ceil_mode) {
  return max_pool2d_impl(input, kernel, stride, padding, dilation, ceil_mode, nullptr);
}

// grad_input[plane][indices[o]] += grad_out[o]  (windows may overlap, so positions accumulate).
// The CPU kernel rejects an index outside the input plane; the same check here reads a device
// flag back, which synchronises the stream once per call.
Tensor max_pool2d_backward_cuda(const Tensor& grad_out, const Tensor& input, const Tensor& indices) {
  const char* op = "max_pool2d_backward";
  check_defined(grad_out, op, "grad_out");
  check_defined(input, op, "input");
  check_defined(indices, op, "indices");
  check_floating(grad_out, op);
  check_index_dtype(indices, op);
  GRAFT_CHECK(input.dim() == 3 || input.dim() == 4, op, ": expected a 3-D or 4-D input, got ",
              shape_str(input.sizes()));
  GRAFT_CHECK(grad_out.sizes() == indices.sizes(), op, ": grad_out ", shape_str(grad_out.sizes()),
              " and indices ", shape_str(indices.sizes()), " must have the same shape");
  GRAFT_CHECK(grad_out.dim() == input.dim() && std::equal(input.sizes().begin(), input.sizes().end() - 2,
                                                          grad_out.sizes().begin()),
              op, ": grad_out ", shape_str(grad_out.sizes()), " does not match input ", shape_str(input.sizes()),
              " in its leading (batch and channel) dims");
  int64_t nd = input.dim(), H = input.size(nd - 2), W = input.size(nd - 1);
  int64_t planes = shape_numel(Shape(input.sizes().begin(), input.sizes().end() - 2));
  int64_t per_out = grad_out.size(nd - 2) * grad_out.size(nd - 1), per_in = H * W;
  cuda::DeviceGuard guard(grad_out.device().index);
  Tensor gi = new_tensor(input.sizes(), grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0 && grad_out.numel() == 0) return gi;
  cudaStream_t stream = cuda::current_stream();
  if (gi.numel() > 0) GRAFT_CUDA_CHECK(cudaMemsetAsync(gi.data_ptr(), 0, gi.nbytes(), stream));
  if (grad_out.numel() == 0) return gi;
  Tensor go = ops::contiguous(grad_out), ix = ops::contiguous(indices);
  // bad[0]: an index was out of range; bad[1]: one such index.
  Tensor bad = new_tensor({2}, kInt64, grad_out.device());
  GRAFT_CUDA_CHECK(cudaMemsetAsync(bad.data_ptr(), 0, bad.nbytes(), stream));
  auto* bad_p = static_cast<unsigned long long*>(bad.data_ptr());
  dispatch_floating(grad_out.dtype(), op, [&]<class T>() {
    // grad_out, indices [planes, per_out] -> gi [planes, per_in]
    cuda::launch_max_pool2d_backward<T>(static_cast<const T*>(go.data_ptr()), ix.data_ptr<int64_t>(),
                                        static_cast<T*>(gi.data_ptr()), planes, per_out, per_in, bad_p, stream);
  });
  unsigned long long host_bad[2] = {0, 0};
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(host_bad, bad_p, sizeof(host_bad), cudaMemcpyDeviceToHost, stream));
  GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  GRAFT_CHECK(host_bad[0] == 0, op, ": index ", static_cast<int64_t>(host_bad[1]), " is out of range for an input plane of ",
              H, " x ", W, " (input ", shape_str(input.sizes()), ")");
  return gi;
}

// ---- average ----

void check_avg_input(const Tensor& t, const char* op, const char* arg) {
  check_defined(t, op, arg);
  GRAFT_CHECK(is_floating(t.dtype()), op, ": expected a float32 or float64 ", arg, ", got ", describe(t));
}

Tensor avg_pool2d_cuda(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                       bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool2d";
  check_avg_input(input, op, "input");
  PoolParams p = pool_params(op, input.sizes(), kernel, stride, padding, {1, 1}, ceil_mode);
  cuda::DeviceGuard guard(input.device().index);
  Tensor out = new_tensor(p.output_sizes(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  cudaStream_t stream = cuda::current_stream();
  Tensor x = ops::contiguous(input);
  dispatch_floating(input.dtype(), op, [&]<class T>() {
    // x [planes, H, W] -> out [planes, OH, OW]
    cuda::launch_avg_pool2d<T>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), p.geometry(),
                               count_include_pad, stream);
  });
  return out;
}

// grad_input[h, w] = sum of grad_out[o] / divisor(o) over the windows o that cover (h, w)
Tensor avg_pool2d_backward_cuda(const Tensor& grad_out, const Tensor& input, const Shape& kernel, const Shape& stride,
                                const Shape& padding, bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool2d_backward";
  check_avg_input(grad_out, op, "grad_out");
  check_defined(input, op, "input");
  PoolParams p = pool_params(op, input.sizes(), kernel, stride, padding, {1, 1}, ceil_mode);
  GRAFT_CHECK(grad_out.sizes() == p.output_sizes(), op, ": expected grad_out of shape ", shape_str(p.output_sizes()),
              " (the output for input ", shape_str(input.sizes()), "), got ", shape_str(grad_out.sizes()));
  cuda::DeviceGuard guard(grad_out.device().index);
  Tensor gi = new_tensor(input.sizes(), grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  cudaStream_t stream = cuda::current_stream();
  Tensor go = ops::contiguous(grad_out);
  dispatch_floating(grad_out.dtype(), op, [&]<class T>() {
    // grad_out [planes, OH, OW] -> gi [planes, H, W]
    cuda::launch_avg_pool2d_backward<T>(static_cast<const T*>(go.data_ptr()), static_cast<T*>(gi.data_ptr()),
                                        p.geometry(), count_include_pad, stream);
  });
  return gi;
}

}  // namespace

GRAFT_KERNEL("max_pool2d_with_indices", CUDA, max_pool2d_with_indices_cuda);
GRAFT_KERNEL("max_pool2d", CUDA, max_pool2d_cuda);
GRAFT_KERNEL("max_pool2d_backward", CUDA, max_pool2d_backward_cuda);
GRAFT_KERNEL("avg_pool2d", CUDA, avg_pool2d_cuda);
GRAFT_KERNEL("avg_pool2d_backward", CUDA, avg_pool2d_backward_cuda);

}  // namespace kernels
}  // namespace graft
