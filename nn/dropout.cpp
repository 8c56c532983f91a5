#include "nn/dropout.h"

#include "nn/functional.h"

namespace graft::nn {

Dropout::Dropout(double p_) : p(p_) {
  GRAFT_CHECK(p >= 0 && p <= 1, "Dropout: probability has to be between 0 and 1, but got ", p);
}

Tensor Dropout::forward(const Tensor& input) { return functional::dropout(input, p, is_training()); }

}  // namespace graft::nn
