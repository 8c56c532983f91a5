#include "nn/linear.h"

#include <cmath>

#include "autograd/functional.h"
#include "nn/init.h"

namespace graft::nn {

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  GRAFT_CHECK(in >= 0 && out >= 0, "Linear: sizes must be non-negative, got in_features=", in,
              ", out_features=", out);
  weight = register_parameter("weight", graft::empty({out, in}));
  if (with_bias) bias = register_parameter("bias", graft::empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  // kaiming_uniform_(a=sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  if (in_features > 0) {
    init::kaiming_uniform_(weight, std::sqrt(5.0));
  } else {
    init::zeros_(weight);
  }
  if (bias.defined()) {
    double bound = in_features > 0 ? 1.0 / std::sqrt(static_cast<double>(in_features)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

Tensor Linear::forward(const Tensor& input) { return graft::linear(input, weight, bias); }

}  // namespace graft::nn
