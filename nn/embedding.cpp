#include "nn/embedding.h"

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "nn/init.h"

namespace graft::nn {

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> pad)
    : num_embeddings(num), embedding_dim(dim), padding_idx(pad) {
  if (padding_idx) {
    GRAFT_CHECK(*padding_idx < num && *padding_idx >= -num, "Embedding: padding_idx (", *padding_idx,
                ") must be within num_embeddings (", num, ")");
    if (*padding_idx < 0) *padding_idx += num;
  }
  weight = register_parameter("weight", graft::empty({num, dim}));
  reset_parameters();
}

void Embedding::reset_parameters() {
  init::normal_(weight);
  if (padding_idx) {
    NoGradGuard ng;
    weight.select(0, *padding_idx).fill_(0);
  }
}

Tensor Embedding::forward(const Tensor& indices) {
  return graft::embedding(weight, indices, padding_idx ? *padding_idx : -1);
}

}  // namespace graft::nn
