#pragma once
// nn::Flatten: flattens dims start_dim..end_dim (default: all but the batch dim).
#include <cstdint>

#include "nn/module.h"

namespace graft::nn {

class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1) : start_dim(start_dim), end_dim(end_dim) {}
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "Flatten"; }
  // Rows stay rows while dimension 0 is not flattened.
  bool splits_by_rows(const Tensor& input) const override;
  int64_t start_dim, end_dim;
};

}  // namespace graft::nn
