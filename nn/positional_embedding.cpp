#include "nn/positional_embedding.h"

#include "autograd/functional.h"
#include "nn/init.h"

namespace graft::nn {

PositionalEmbedding::PositionalEmbedding(int64_t n, int64_t d, double s) : max_positions(n), embedding_dim(d), init_std(s) {
  GRAFT_CHECK(n > 0 && d > 0, "PositionalEmbedding: max_positions and embedding_dim must be positive, got ", n, ", ", d);
  weight = register_parameter("weight", graft::empty({n, d}));
  reset_parameters();
}

void PositionalEmbedding::reset_parameters() { init::normal_(weight, 0.0, init_std); }

Tensor PositionalEmbedding::forward(const Tensor& x) {
  GRAFT_CHECK(x.dim() >= 2 && x.size(-1) == embedding_dim && x.size(-2) <= max_positions,
              "PositionalEmbedding: expected [..., L, ", embedding_dim, "] with L <= ", max_positions, ", got ",
              describe(x));
  int64_t L = x.size(-2);
  return x + (L == max_positions ? weight : weight.narrow(0, 0, L));
}

}  // namespace graft::nn
