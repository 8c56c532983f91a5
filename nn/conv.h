#pragma once
// nn::Conv2d (NCHW). weight [out, in/groups, kh, kw], bias [out]; default init as PyTorch:
// U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with fan_in = in/groups * kh * kw.
#include <cstdint>

#include "nn/module.h"
#include "nn/size2.h"

namespace graft::nn {

class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, Size2 kernel_size, Size2 stride = 1, Size2 padding = 0,
         Size2 dilation = 1, int64_t groups = 1, bool bias = true);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Conv2d"; }
  // A batched input only: the rows of an unbatched one are channels.
  bool splits_by_rows(const Tensor& input) const override { return input.dim() == 4; }
  void reset_parameters();

  int64_t in_channels, out_channels;
  Size2 kernel_size, stride, padding, dilation;
  int64_t groups;
  Tensor weight, bias;
};

}  // namespace graft::nn
