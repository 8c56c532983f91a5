// CUDA kernels for 2-D max and average pooling and their backward kernels (device code in
// kernels/pool.cu). Argument checks, output sizes (ceil_mode), padding, divisor and index
// semantics mirror ops/pool.cpp.
#include <algorithm>
#include <type_traits>

#include "cuda/cuda_context.h"
#include "cuda/kernels/pool.h"
#include "ops/conv_pool_params.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

// The window arithmetic (ops/conv_pool_params.h) as the plain struct the .cu kernels take.
cuda::PoolGeometry geometry(const PoolParams& p) {
  return {p.planes(), p.H, p.W, p.OH, p.OW, p.kh, p.kw, p.sh, p.sw, p.ph, p.pw, p.dh, p.dw};
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
                                 ind ? ind->data_ptr<int64_t>() : nullptr, geometry(p), stream);
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
    cuda::launch_avg_pool2d<T>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), geometry(p),
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
                                        geometry(p), count_include_pad, stream);
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
