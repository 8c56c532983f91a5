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
  // keep: the 0/1 draw; the scale 1 / (1 - p) as the dtype rounds it. Saved as keep (not keep *
  // scale), the mask's backward needs only its sign: one bit under autograd::CompressSaved.
  Tensor keep;
  double scale = 1.0;
  {
    NoGradGuard ng;
    keep = ops::empty_like(input);
    if (p == 1) {
      ops::zero_(keep);
    } else {
      ops::bernoulli_(keep, 1 - p);
      Tensor s = ops::full({}, 1.0, input.dtype(), kCPU);  // on the host: no device sync for the number
      ops::div_(s, 1 - p);
      scale = s.item<double>();
    }
  }
  return graft::_masked_scale(input, keep, scale);
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
