#include "nn/flatten.h"

#include "autograd/functional.h"

namespace graft::nn {

Tensor Flatten::forward(const Tensor& input) { return graft::flatten(input, start_dim, end_dim); }

bool Flatten::splits_by_rows(const Tensor& input) const {
  const int64_t d = input.dim();
  if (d < 2) return false;
  const int64_t start = start_dim < 0 ? start_dim + d : start_dim;
  const int64_t end = end_dim < 0 ? end_dim + d : end_dim;
  return start >= 1 || end == 0;  // [0, 0] flattens nothing
}

}  // namespace graft::nn
