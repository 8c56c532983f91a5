#include "nn/activation.h"

#include "autograd/functional.h"

namespace graft::nn {

namespace {
// The in-place op on an input nothing else sees (is_sole_owner), else the out-of-place one: the
// same values and gradients either way.
Tensor in_place_if_owned(Tensor&& input, Tensor& (*in_place)(Tensor&), Tensor (*out_of_place)(const Tensor&)) {
  Tensor x = std::move(input);
  if (!is_sole_owner(x)) return out_of_place(x);
  in_place(x);
  return x;
}
}  // namespace

Tensor ReLU::forward(const Tensor& input) { return graft::relu(input); }
Tensor ReLU::forward_owned(Tensor&& input) { return in_place_if_owned(std::move(input), graft::relu_, graft::relu); }
Tensor GELU::forward(const Tensor& input) { return graft::gelu(input, approximate); }
Tensor Tanh::forward(const Tensor& input) { return graft::tanh(input); }
Tensor Tanh::forward_owned(Tensor&& input) { return in_place_if_owned(std::move(input), graft::tanh_, graft::tanh); }
Tensor Sigmoid::forward(const Tensor& input) { return graft::sigmoid(input); }
Tensor Sigmoid::forward_owned(Tensor&& input) {
  return in_place_if_owned(std::move(input), graft::sigmoid_, graft::sigmoid);
}

}  // namespace graft::nn
