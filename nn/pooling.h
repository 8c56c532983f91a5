#pragma once
// nn::MaxPool2d and nn::AvgPool2d (NCHW). stride 0 (the default) means stride = kernel_size.
#include "nn/module.h"
#include "nn/size2.h"

namespace graft::nn {

class MaxPool2d : public Module {
 public:
  MaxPool2d(Size2 kernel_size, Size2 stride = 0, Size2 padding = 0, Size2 dilation = 1, bool ceil_mode = false);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "MaxPool2d"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() == 4; }
  Size2 kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  AvgPool2d(Size2 kernel_size, Size2 stride = 0, Size2 padding = 0, bool ceil_mode = false,
            bool count_include_pad = true);
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "AvgPool2d"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() == 4; }
  Size2 kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
};

}  // namespace graft::nn
