#include "nn/functional.h"

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::nn::functional {

Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction,
                     int64_t ignore_index, double label_smoothing) {
  return graft::cross_entropy(input, target, weight, reduction, ignore_index, label_smoothing);
}

Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight, const std::string& reduction,
                int64_t ignore_index) {
  return graft::nll_loss(input, target, weight, reduction, ignore_index);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  return graft::mse_loss(input, target, reduction);
}

Tensor dropout(const Tensor& input, double p, bool training) {
  GRAFT_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return input;
  Tensor mask;
  {
    NoGradGuard ng;
    mask = ops::empty_like(input);
    if (p == 1) {
      ops::zero_(mask);
    } else {
      ops::bernoulli_(mask, 1 - p);
      ops::div_(mask, 1 - p);
    }
  }
  return graft::mul(input, mask);
}

Tensor relu(const Tensor& input) { return graft::relu(input); }
Tensor gelu(const Tensor& input, const std::string& approximate) { return graft::gelu(input, approximate); }
Tensor tanh(const Tensor& input) { return graft::tanh(input); }
Tensor sigmoid(const Tensor& input) { return graft::sigmoid(input); }
Tensor softmax(const Tensor& input, int64_t dim) { return graft::softmax(input, dim); }
Tensor log_softmax(const Tensor& input, int64_t dim) { return graft::log_softmax(input, dim); }
Tensor linear(const Tensor& input, const Tensor& weight, const Tensor& bias) {
  return graft::linear(input, weight, bias);
}

}  // namespace graft::nn::functional
