#pragma once
// nn::PositionalEmbedding: a learned position table added to a sequence (BERT's and ViT's):
//   x [N, L, D] (or [L, D]) -> x + weight[:L],   weight [max_positions, D], N(0, 0.02) by default
// (torchvision's ViT init). L may be shorter than max_positions, never longer.
#include <cstdint>

#include "nn/module.h"

namespace graft::nn {

class PositionalEmbedding : public Module {
 public:
  PositionalEmbedding(int64_t max_positions, int64_t embedding_dim, double init_std = 0.02);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "PositionalEmbedding"; }
  void reset_parameters();

  int64_t max_positions, embedding_dim;
  double init_std;
  Tensor weight;
};

}  // namespace graft::nn
