#include "nn/activation.h"

#include "autograd/functional.h"

namespace graft::nn {

Tensor ReLU::forward(const Tensor& input) { return graft::relu(input); }
Tensor GELU::forward(const Tensor& input) { return graft::gelu(input, approximate); }
Tensor Tanh::forward(const Tensor& input) { return graft::tanh(input); }
Tensor Sigmoid::forward(const Tensor& input) { return graft::sigmoid(input); }

}  // namespace graft::nn
