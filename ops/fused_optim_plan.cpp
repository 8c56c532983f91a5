#include "ops/fused_optim_plan.h"

#include "ops/kernel_utils.h"

namespace graft::kernels {

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

}  // namespace graft::kernels
