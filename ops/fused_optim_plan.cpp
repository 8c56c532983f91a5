#include "ops/fused_optim_plan.h"

#include <string_view>
#include <utility>
#include <vector>

#include "runtime/memory_format.h"

namespace graft::kernels {

namespace {
// tensors[0] is the parameter; the gradient matches it; the state (`state` names) is float32 for a
// bfloat16/float16 parameter and of the parameter's dtype otherwise.
void check_fused_update(const char* op, const std::vector<std::pair<const char*, const Tensor*>>& tensors,
                        const std::vector<const char*>& state) {
  const Tensor& p = *tensors[0].second;
  GRAFT_CHECK(p.defined(), op, ": param is undefined");
  const DType state_dtype = fused_state_dtype(p.dtype());
  for (const auto& [name, t] : tensors) {
    GRAFT_CHECK(t->defined(), op, ": ", name, " is undefined");
    bool is_state = false;
    for (const char* s : state) is_state = is_state || std::string_view(s) == name;
    const DType want = is_state ? state_dtype : p.dtype();
    GRAFT_CHECK(t->sizes() == p.sizes() && t->dtype() == want && t->device() == p.device(), op, ": ", name, " (",
                describe(*t), ") does not match the parameter (", describe(p), ")",
                is_state && want != p.dtype() ? " with float32 state" : "");
    GRAFT_CHECK(is_floating(t->dtype()), op, ": expected floating point tensors, got ", name, " ", describe(*t));
    // The kernels walk memory in order: every tensor dense in the parameter's layout (contiguous,
    // or channels-last as a CNN's convolution weights and, by the layout contract, their gradients).
    GRAFT_CHECK(is_dense_like(t->sizes(), t->strides(), p.strides()), op, ": ", name,
                " must be dense with the parameter's strides ", shape_str(p.strides()), ", got ", describe(*t),
                " with strides ", shape_str(t->strides()));
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
  check_fused_update("_fused_adam_", {{"param", &param}, {"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq}, {"grad", &grad}},
                     {"exp_avg", "exp_avg_sq"});
  return {lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2, decoupled};
}

ops::FusedSgdArgs plan_fused_sgd(const Tensor& param, const Tensor& momentum_buffer, const Tensor& grad, double lr,
                                 double momentum, double dampening, double weight_decay, bool nesterov, bool first) {
  if (momentum != 0)
    check_fused_update("_fused_sgd_", {{"param", &param}, {"momentum_buffer", &momentum_buffer}, {"grad", &grad}},
                       {"momentum_buffer"});
  else
    check_fused_update("_fused_sgd_", {{"param", &param}, {"grad", &grad}}, {});
  return {lr, momentum, dampening, weight_decay, nesterov, first};
}

}  // namespace graft::kernels
