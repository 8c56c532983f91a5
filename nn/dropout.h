#pragma once
// nn::Dropout: in training zeroes each element with probability p (a bernoulli mask) and scales the
// survivors by 1/(1-p); in eval mode it is the identity.
#include "nn/module.h"

namespace graft::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Dropout"; }
  double p;
};

}  // namespace graft::nn
