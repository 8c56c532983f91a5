#include "ops/fused_optim_plan.h"

#include <utility>
#include <vector>

namespace graft::kernels {

namespace {
void check_fused_update(const char* op, const std::vector<std::pair<const char*, const Tensor*>>& tensors) {
  const Tensor& p = *tensors[0].second;
  for (const auto& [name, t] : tensors) {
    GRAFT_CHECK(t->defined(), op, ": ", name, " is undefined");
    GRAFT_CHECK(t->sizes() == p.sizes() && t->dtype() == p.dtype() && t->device() == p.device(), op, ": ", name, " (",
                describe(*t), ") does not match the parameter (", describe(p), ")");
    GRAFT_CHECK(is_floating(t->dtype()), op, ": expected floating point tensors, got ", name, " ", describe(*t));
    GRAFT_CHECK(t->is_contiguous(), op, ": ", name, " must be contiguous, got ", describe(*t), " with strides ",
                shape_str(t->strides()));
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    for (size_t j = i + 1; j < tensors.size(); ++j)
      GRAFT_CHECK(p.numel() == 0 || tensors[i].second->data_ptr() != tensors[j].second->data_ptr(), op, ": ",
                  tensors[i].first, " and ", tensors[j].first, " share memory");
}

}  // namespace

ops::FusedAdamArgs plan_fused_adam(const Tensor& param, const Tensor& exp_avg, const Tensor& exp_avg_sq,
                                   const Tensor& grad, double lr, double beta1, double beta2, double weight_decay,
                                   double eps, double bias_correction1, double bias_correction2, bool decoupled) {
  check_fused_update("_fused_adam_", {{"param", &param}, {"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq}, {"grad", &grad}});
  return {lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2, decoupled};
}

ops::FusedSgdArgs plan_fused_sgd(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                                 double momentum, double dampening, double weight_decay, bool nesterov, bool first) {
  if (momentum != 0)
    check_fused_update("_fused_sgd_", {{"param", &param}, {"momentum_buffer", &momentum_buffer}, {"grad", &grad}});
  else
    check_fused_update("_fused_sgd_", {{"param", &param}, {"grad", &grad}});
  return {lr, momentum, dampening, weight_decay, nesterov, first};
}

}  // namespace graft::kernels
