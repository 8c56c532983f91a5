#pragma once
// nn::PatchEmbedding: an image cut into non-overlapping patch_size x patch_size patches, each
// projected to embed_dim features (ViT's patch embedding, as timm's PatchEmbed):
//   [N, C, H, W] -> proj (Conv2d C -> embed_dim, kernel = stride = patch_size) -> [N, D, H/p, W/p]
//                -> [N, (H/p) * (W/p), D]   (patches in row-major order)
// Child "proj" (Conv2d, its default init). H and W must be multiples of patch_size.
#include <cstdint>
#include <memory>

#include "nn/conv.h"

namespace graft::nn {

class PatchEmbedding : public Module {
 public:
  PatchEmbedding(int64_t in_channels, int64_t embed_dim, int64_t patch_size);
  Tensor forward(const Tensor& images) override;
  std::string name() const override { return "PatchEmbedding"; }
  int64_t num_patches(int64_t height, int64_t width) const { return (height / patch_size) * (width / patch_size); }

  int64_t in_channels, embed_dim, patch_size;
  std::shared_ptr<Conv2d> proj;
};

}  // namespace graft::nn
