#pragma once
// Elementwise activation modules: nn::ReLU, nn::GELU, nn::Tanh, nn::Sigmoid.
#include <string>

#include "nn/module.h"

namespace graft::nn {

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  // relu_ on an input nothing else sees (is_sole_owner), as PyTorch's ReLU(inplace=True) but
  // chosen per call: a CNN's conv output then becomes the ReLU's output without a second buffer.
  Tensor forward_owned(Tensor&& input) override;
  bool works_in_place() const override { return true; }
  std::string name() const override { return "ReLU"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() >= 1; }
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate(std::move(approximate)) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "GELU"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() >= 1; }
  std::string approximate;  // "none" | "tanh"
};

class Tanh : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  // tanh_ where nothing else sees the input, as ReLU (both save their result either way).
  Tensor forward_owned(Tensor&& input) override;
  bool works_in_place() const override { return true; }
  std::string name() const override { return "Tanh"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() >= 1; }
};

class Sigmoid : public Module {
 public:
  Tensor forward(const Tensor& input) override;
  // sigmoid_ where nothing else sees the input, as ReLU (both save their result either way).
  Tensor forward_owned(Tensor&& input) override;
  bool works_in_place() const override { return true; }
  std::string name() const override { return "Sigmoid"; }
  bool splits_by_rows(const Tensor& input) const override { return input.dim() >= 1; }
};

}  // namespace graft::nn
