// layer_norm and layer_norm_backward on CUDA: checks and geometry from ops/layer_norm_plan.h, as on
// the CPU ({y, mean, rstd} and {dx, dw, db}, dw/db undefined without weight/bias);
// kernels in cuda/kernels/layer_norm.cu.
#include <algorithm>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/layer_norm.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "ops/layer_norm_plan.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::NormLayout;
using kernels::new_tensor;
namespace rh = reduce_helpers;

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

// x: [M, N] -> y [M, N], mean [M], rstd [M] (mean/rstd shaped as the leading dims).
std::vector<Tensor> native_layer_norm_cuda(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                                    double eps) {
  NormLayout l = kernels::plan_layer_norm(x, normalized_shape, weight, bias, "layer_norm");
  DeviceGuard guard(x.device().index);
  Tensor xc = kernels::contiguous_as(x);
  Tensor wc = weight.defined() ? kernels::contiguous_as(weight) : Tensor();
  Tensor bc = bias.defined() ? kernels::contiguous_as(bias) : Tensor();
  Tensor y = new_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mean = new_tensor(l.leading, x.dtype(), x.device());
  Tensor rstd = new_tensor(l.leading, x.dtype(), x.device());
  launch_layer_norm_forward(xc.data_ptr(), ptr_or_null(wc), ptr_or_null(bc), y.data_ptr(), mean.data_ptr(),
                            rstd.data_ptr(), x.dtype(), l.M, l.N, eps, current_stream());
  return {y, mean, rstd};
}

// dy, x: [M, N]; mean, rstd: [M] -> dx [M, N], dw [N] (if weight), db [N] (if bias).
std::vector<Tensor> native_layer_norm_backward_cuda(const Tensor& grad_out, const Tensor& x, const Shape& normalized_shape,
                                             const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bias) {
  const char* op = "layer_norm_backward";
  NormLayout l = kernels::plan_layer_norm_backward(grad_out, x, normalized_shape, mean, rstd, weight, bias, op);
  DType dt = x.dtype();
  DeviceGuard guard(x.device().index);
  Tensor dyc = kernels::contiguous_as(grad_out, dt), xc = kernels::contiguous_as(x);
  Tensor mc = kernels::contiguous_as(mean, dt), rc = kernels::contiguous_as(rstd, dt);
  Tensor wc = weight.defined() ? kernels::contiguous_as(weight) : Tensor();
  Tensor dx = new_tensor(x.sizes(), dt, x.device());
  Tensor dw = weight.defined() ? new_tensor(normalized_shape, dt, x.device()) : Tensor();
  Tensor db = bias.defined() ? new_tensor(normalized_shape, dt, x.device()) : Tensor();
  Tensor scratch = (dw.defined() || db.defined())
                       ? rh::scratch(layer_norm_backward_scratch_bytes(l.M, l.N), x.device())
                       : Tensor();
  launch_layer_norm_backward(dyc.data_ptr(), xc.data_ptr(), mc.data_ptr(), rc.data_ptr(), ptr_or_null(wc),
                             dx.data_ptr(), mut_ptr_or_null(dw), mut_ptr_or_null(db), dt, l.M, l.N,
                             mut_ptr_or_null(scratch), current_stream());
  return {dx, dw, db};
}

}  // namespace graft::cuda
