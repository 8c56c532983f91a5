// Checks and geometry shared by the CPU and CUDA layer_norm kernels (layer_norm_plan.h).
#include "ops/layer_norm_plan.h"

#include <algorithm>

#include "ops/kernel_utils.h"

namespace graft::kernels {

NormLayout plan_layer_norm(const Tensor& x, const Shape& ns, const Tensor& weight, const Tensor& bias, const char* op) {
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
    // A 16-bit input may come with float32 parameters (a float32 module under autocast), as PyTorch allows.
    GRAFT_CHECK(t->dtype() == x.dtype() || (is_reduced_floating(x.dtype()) && t->dtype() == kFloat32), op, ": ",
                name, " ", describe(*t), " must have the dtype of input ", describe(x),
                is_reduced_floating(x.dtype()) ? " (or float32)" : "");
  }
  return l;
}

NormLayout plan_layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Shape& ns, const Tensor& mean,
                                    const Tensor& rstd, const Tensor& weight, const Tensor& bias, const char* op) {
  NormLayout l = plan_layer_norm(x, ns, weight, bias, op);
  check_defined(grad_out, op, "grad_output");
  check_defined(mean, op, "mean");
  check_defined(rstd, op, "rstd");
  GRAFT_CHECK(grad_out.sizes() == x.sizes(), op, ": grad_output ", describe(grad_out), " does not match input ",
              describe(x));
  GRAFT_CHECK(mean.numel() == l.M && rstd.numel() == l.M, op, ": expected mean and rstd with ", l.M,
              " elements (the leading dims ", shape_str(l.leading), "), got ", describe(mean), " and ", describe(rstd));
  return l;
}

}  // namespace graft::kernels
