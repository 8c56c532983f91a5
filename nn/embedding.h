#pragma once
// nn::Embedding: a lookup table [num_embeddings, embedding_dim], N(0, 1) by default. The row at
// padding_idx (negative values count from the end) is zero and gets no gradient.
#include <cstdint>
#include <optional>

#include "nn/module.h"

namespace graft::nn {

class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim, std::optional<int64_t> padding_idx = std::nullopt);
  Tensor forward(const Tensor& indices) override;
  std::string name() const override { return "Embedding"; }
  void reset_parameters();

  int64_t num_embeddings, embedding_dim;
  std::optional<int64_t> padding_idx;  // normalised to [0, num_embeddings)
  Tensor weight;
};

}  // namespace graft::nn
