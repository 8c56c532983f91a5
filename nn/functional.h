#pragma once
// nn::functional: the stateless forms of the layers and losses (torch::nn::functional). Thin
// wrappers over the differentiable ops in autograd/functional.h.
#include <string>

#include "autograd/functional.h"
#include "runtime/tensor.h"

namespace graft::nn::functional {

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// Training: zeroes each element with probability p and scales the rest by 1/(1-p). Else identity.
Tensor dropout(const Tensor& input, double p = 0.5, bool training = true);
Tensor relu(const Tensor& input);
Tensor gelu(const Tensor& input, const std::string& approximate = "none");
Tensor tanh(const Tensor& input);
Tensor sigmoid(const Tensor& input);
Tensor softmax(const Tensor& input, int64_t dim);
Tensor log_softmax(const Tensor& input, int64_t dim);
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias = {});

}  // namespace graft::nn::functional
