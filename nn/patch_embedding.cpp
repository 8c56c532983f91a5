#include "nn/patch_embedding.h"

#include "autograd/functional.h"

namespace graft::nn {

PatchEmbedding::PatchEmbedding(int64_t c, int64_t d, int64_t p) : in_channels(c), embed_dim(d), patch_size(p) {
  GRAFT_CHECK(c > 0 && d > 0 && p > 0, "PatchEmbedding: in_channels, embed_dim and patch_size must be positive, got ",
              c, ", ", d, ", ", p);
  proj = register_module("proj", std::make_shared<Conv2d>(c, d, Size2(p), Size2(p)));
}

Tensor PatchEmbedding::forward(const Tensor& x) {
  GRAFT_CHECK(x.dim() == 4 && x.size(1) == in_channels, "PatchEmbedding: expected images [N, ", in_channels,
              ", H, W], got ", describe(x));
  GRAFT_CHECK(x.size(2) % patch_size == 0 && x.size(3) % patch_size == 0, "PatchEmbedding: image size ",
              x.size(2), " x ", x.size(3), " is not a multiple of patch_size ", patch_size, " (input ", describe(x), ")");
  return (*proj)(x).flatten(2).transpose(1, 2);  // [N, D, h, w] -> [N, h * w, D]
}

}  // namespace graft::nn
