// layer_norm and layer_norm_backward on CUDA: same checks, messages and outputs as
// ops/layer_norm.cpp ({y, mean, rstd} and {dx, dw, db}, dw/db undefined without weight/bias);
// kernels in cuda/kernels/layer_norm.cu.
#include <algorithm>

#include "cuda/cuda_context.h"
#include "cuda/kernels/layer_norm.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::check_floating;
using kernels::new_tensor;
namespace rh = reduce_helpers;

struct NormLayout {
  int64_t M = 1, N = 1;
  Shape leading;
};

NormLayout check_layer_norm_args(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias,
                                 const char* op) {
  check_defined(x, op, "input");
  check_floating(x, op);
  int64_t k = static_cast<int64_t>(ns.size());
  GRAFT_CHECK(k >= 1, op, ": normalized_shape must have at least one dim, got ", shape_str(ns));
  bool match = x.dim() >= k && std::equal(ns.begin(), ns.end(), x.sizes().end() - k);
  GRAFT_CHECK(match, op, ": normalized_shape ", shape_str(ns), " does not match the trailing dims of input of shape ",
              shape_str(x.sizes()));
  NormLayout l;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (i < x.dim() - k) {
      l.M *= x.size(i);
      l.leading.push_back(x.size(i));
    } else {
      l.N *= x.size(i);
    }
  }
  for (const auto* t : {&weight, &bias}) {
    if (!t->defined()) continue;
    const char* name = t == &weight ? "weight" : "bias";
    GRAFT_CHECK(t->sizes() == ns, op, ": expected ", name, " of shape ", shape_str(ns), " (normalized_shape), got ",
                describe(*t));
    GRAFT_CHECK(t->dtype() == x.dtype(), op, ": ", name, " ", describe(*t), " must have the dtype of input ",
                describe(x));
  }
  return l;
}

const void* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
void* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }

// x: [M, N] -> y [M, N], mean [M], rstd [M] (mean/rstd shaped as the leading dims).
std::vector<Tensor> layer_norm_cuda(const Tensor& x, const Shape& normalized_shape, Tensor weight, Tensor bias,
                                    double eps) {
  NormLayout l = check_layer_norm_args(x, normalized_shape, weight, bias, "layer_norm");
  DeviceGuard guard(x.device().index);
  Tensor xc = rh::contiguous_as(x);
  Tensor wc = weight.defined() ? rh::contiguous_as(weight) : Tensor();
  Tensor bc = bias.defined() ? rh::contiguous_as(bias) : Tensor();
  Tensor y = new_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mean = new_tensor(l.leading, x.dtype(), x.device());
  Tensor rstd = new_tensor(l.leading, x.dtype(), x.device());
  launch_layer_norm_forward(xc.data_ptr(), ptr_or_null(wc), ptr_or_null(bc), y.data_ptr(), mean.data_ptr(),
                            rstd.data_ptr(), x.dtype(), l.M, l.N, eps, current_stream());
  return {y, mean, rstd};
}

// dy, x: [M, N]; mean, rstd: [M] -> dx [M, N], dw [N] (if weight), db [N] (if bias).
std::vector<Tensor> layer_norm_backward_cuda(const Tensor& grad_out, const Tensor& x, const Shape& normalized_shape,
                                             const Tensor& mean, const Tensor& rstd, Tensor weight, Tensor bias) {
  const char* op = "layer_norm_backward";
  NormLayout l = check_layer_norm_args(x, normalized_shape, weight, bias, op);
  check_defined(grad_out, op, "grad_output");
  check_defined(mean, op, "mean");
  check_defined(rstd, op, "rstd");
  GRAFT_CHECK(grad_out.sizes() == x.sizes(), op, ": grad_output ", describe(grad_out), " does not match input ",
              describe(x));
  GRAFT_CHECK(mean.numel() == l.M && rstd.numel() == l.M, op, ": expected mean and rstd with ", l.M,
              " elements (the leading dims ", shape_str(l.leading), "), got ", describe(mean), " and ", describe(rstd));
  DType dt = x.dtype();
  DeviceGuard guard(x.device().index);
  Tensor dyc = rh::contiguous_as(grad_out, dt), xc = rh::contiguous_as(x);
  Tensor mc = rh::contiguous_as(mean, dt), rc = rh::contiguous_as(rstd, dt);
  Tensor wc = weight.defined() ? rh::contiguous_as(weight) : Tensor();
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

}  // namespace

GRAFT_KERNEL("layer_norm", CUDA, layer_norm_cuda);
GRAFT_KERNEL("layer_norm_backward", CUDA, layer_norm_backward_cuda);

}  // namespace graft::cuda
