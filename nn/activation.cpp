#include "nn/activation.h"

#include "autograd/functional.h"

namespace graft::nn {

Tensor ReLU::forward(const Tensor& input) { return graft::relu(input); }
Tensor ReLU::forward_owned(Tensor&& input) {
  Tensor x = std::move(input);
  if (!is_sole_owner(x)) return graft::relu(x);
  graft::relu_(x);
  return x;
}
Tensor GELU::forward(const Tensor& input) { return graft::gelu(input, approximate); }
Tensor Tanh::forward(const Tensor& input) { return graft::tanh(input); }
Tensor Sigmoid::forward(const Tensor& input) { return graft::sigmoid(input); }

}  // namespace graft::nn
