#pragma once
// nn::Linear: y = x W^T + b. weight [out, in], bias [out]; both U(-1/sqrt(in), 1/sqrt(in)) (PyTorch's default).
#include <cstdint>

#include "nn/module.h"

namespace graft::nn {

class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Linear"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() >= 2; }
  void reset_parameters();

  int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when bias=false
};

}  // namespace graft::nn
