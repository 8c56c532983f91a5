#include "runtime/tensor.h"

namespace graft {

int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

std::string describe(const Tensor& t) {
  if (!t.defined()) return "undefined tensor";
  return detail::str_cat(shape_str(t.sizes()), ' ', t.dtype(), ' ', t.device());
}

}  // namespace graft
