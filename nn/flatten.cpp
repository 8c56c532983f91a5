#include "nn/flatten.h"

#include "autograd/functional.h"

namespace graft::nn {

Tensor Flatten::forward(const Tensor& input) { return graft::flatten(input, start_dim, end_dim); }

}  // namespace graft::nn
