// CUDA kernels for 2-D max and average pooling and their backward kernels (device code in
// kernels/pool.cu). Argument checks and output sizes come from the shared plans
// (ops/conv_pool_params.h); padding, divisor and index semantics are those of ops/pool.cpp.
#include <algorithm>
#include <optional>
#include <type_traits>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_parts.h"
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

}  // namespace

}  // namespace kernels

namespace cuda {
using namespace kernels;

// The CUDA part of the shared max-pool kernels (declared in cuda/cuda_parts.h; max_pool2d and
// max_pool2d_with_indices are generated over it):
// x [planes, H, W] -> out, ind [planes, OH, OW]; indices (int64) or window offsets (uint8) only
// when `ind` is given.
void max_pool_fill_cuda(const PoolParams& p, const Tensor& x, const Tensor& out, const Tensor* ind) {
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = current_stream();
  dispatch_dtype(x.dtype(), "max_pool2d", [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool>)
      launch_max_pool2d<T>(static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()),
                           ind && ind->dtype() == kInt64 ? ind->data_ptr<int64_t>() : nullptr,
                           ind && ind->dtype() == kUInt8 ? static_cast<uint8_t*>(ind->data_ptr()) : nullptr,
                           kernels::geometry(p), stream);
  });
}

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

namespace {
// The scatter both max-pool backwards run: a zeroed gradient of `input_size`, then
// launch(T, contiguous grad_out, gi, bad) for grad_out's dtype, then the device's bad flag read
// back (bad[0]: a saved value was out of range; bad[1]: one such value), which synchronises the
// stream once per call. Returns the bad value, if any.
template <class Launch>
std::optional<int64_t> scatter_backward(const char* op, const Tensor& grad_out, const Shape& input_size, Tensor& gi,
                                        Launch&& launch) {
  cuda::DeviceGuard guard(grad_out.device().index);
  gi = new_tensor(input_size, grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0 && grad_out.numel() == 0) return std::nullopt;
  cudaStream_t stream = cuda::current_stream();
  if (gi.numel() > 0) GRAFT_CUDA_CHECK(cudaMemsetAsync(gi.data_ptr(), 0, gi.nbytes(), stream));
  if (grad_out.numel() == 0) return std::nullopt;
  Tensor go = kernels::contiguous_as(grad_out);
  Tensor bad = new_tensor({2}, kInt64, grad_out.device());
  GRAFT_CUDA_CHECK(cudaMemsetAsync(bad.data_ptr(), 0, bad.nbytes(), stream));
  auto* bad_p = static_cast<unsigned long long*>(bad.data_ptr());
  dispatch_floating(grad_out.dtype(), op, [&]<class T>() {
    launch.template operator()<T>(static_cast<const T*>(go.data_ptr()), static_cast<T*>(gi.data_ptr()), bad_p, stream);
  });
  unsigned long long host_bad[2] = {0, 0};
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(host_bad, bad_p, sizeof(host_bad), cudaMemcpyDeviceToHost, stream));
  GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (host_bad[0] != 0) return static_cast<int64_t>(host_bad[1]);
  return std::nullopt;
}
}  // namespace

// grad_input[plane][indices[o]] += grad_out[o]  (windows may overlap, so positions accumulate).
// The CPU kernel rejects an index outside the input plane; the same check here reads a device
// flag back.
// A channels-last input gets an NCHW gradient here (the values are the same; the engine checks
// shape, dtype and device only): the kernel scatters over NCHW planes.
Tensor max_pool2d_backward_cuda(const Tensor& grad_out, const Tensor& indices, const Shape& input_size,
                                bool channels_last) {
  MaxPoolBackwardPlan mp = plan_max_pool2d_backward(grad_out, indices, input_size, channels_last);
  Tensor gi;
  // grad_out, indices [planes, per_out] -> gi [planes, per_in]; under scatter_backward's device guard.
  auto bad = scatter_backward("max_pool2d_backward", grad_out, input_size, gi,
                              [&]<class T>(const T* go, T* g, unsigned long long* bad_p, cudaStream_t stream) {
                                Tensor ix = kernels::contiguous_as(indices);
                                cuda::launch_max_pool2d_backward<T>(go, ix.data_ptr<int64_t>(), g, mp.planes,
                                                                    mp.per_out, mp.per_in, bad_p, stream);
                              });
  if (bad) max_pool_bad_index_error(*bad, mp);
  return gi;
}

// The same scatter from window offsets (_max_pool2d_with_offsets); an NCHW gradient as above.
Tensor max_pool2d_offsets_backward_cuda(const Tensor& grad_out, const Tensor& offsets, const Shape& input_size,
                                        const Shape& kernel_size, const Shape& stride, const Shape& padding,
                                        const Shape& dilation, bool channels_last) {
  MaxPoolOffsetsBackwardPlan p = plan_max_pool2d_offsets_backward(grad_out, offsets, input_size, kernel_size, stride,
                                                                  padding, dilation, channels_last);
  Tensor gi;
  // grad_out, offsets [planes, OH, OW] -> gi [planes, H, W]; under scatter_backward's device guard.
  auto bad = scatter_backward("_max_pool2d_offsets_backward", grad_out, input_size, gi,
                              [&]<class T>(const T* go, T* g, unsigned long long* bad_p, cudaStream_t stream) {
                                Tensor off = kernels::contiguous_as(offsets);
                                cuda::launch_max_pool2d_offsets_backward<T>(
                                    go, static_cast<const uint8_t*>(off.data_ptr()), g, kernels::geometry(p.window),
                                    bad_p, stream);
                              });
  if (bad) max_pool_bad_offset_error(*bad, p);
  return gi;
}

Tensor avg_pool2d_cuda(const Tensor& input, const Shape& kernel, const Shape& stride, const Shape& padding,
                       bool ceil_mode, bool count_include_pad) {
  const char* op = "avg_pool2d";
  PoolParams p = plan_avg_pool2d(input, kernel, stride, padding, ceil_mode);
  cuda::DeviceGuard guard(input.device().index);
  Tensor out = new_tensor(p.output_sizes(), input.dtype(), input.device());
  if (out.numel() == 0) return out;
  cudaStream_t stream = cuda::current_stream();
  Tensor x = kernels::contiguous_as(input);
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
  PoolParams p = plan_avg_pool2d_backward(grad_out, input, kernel, stride, padding, ceil_mode);
  cuda::DeviceGuard guard(grad_out.device().index);
  Tensor gi = new_tensor(input.sizes(), grad_out.dtype(), grad_out.device());
  if (gi.numel() == 0) return gi;
  cudaStream_t stream = cuda::current_stream();
  Tensor go = kernels::contiguous_as(grad_out);
  dispatch_floating(grad_out.dtype(), op, [&]<class T>() {
    // grad_out [planes, OH, OW] -> gi [planes, H, W]
    cuda::launch_avg_pool2d_backward<T>(static_cast<const T*>(go.data_ptr()), static_cast<T*>(gi.data_ptr()),
                                        geometry(p), count_include_pad, stream);
  });
  return gi;
}

}  // namespace cuda

}  // namespace graft
