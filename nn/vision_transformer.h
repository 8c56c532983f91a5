#pragma once
// nn::VisionTransformer: a small ViT classifier (Dosovitskiy et al.), pre-norm, with a CLS token.
//   images [N, C, H, W] -> patch_embed -> [N, P, D]; prepend cls_token -> [N, P + 1, D]
//   -> pos_embed -> encoder (depth pre-norm TransformerEncoderLayers, GELU, batch_first)
//   -> norm -> token 0 -> head -> logits [N, num_classes]
// Parameter names: patch_embed.proj.{weight,bias}, cls_token [1, 1, D], pos_embed.weight [P + 1, D],
// encoder.layers.{i}.{self_attn.in_proj_weight, ...}, norm.{weight,bias}, head.{weight,bias}: the
// names of the same model written with torch.nn (tests/nn/data/make_transformer_fixture.py), so its
// state dict loads by name. cls_token and pos_embed start N(0, 0.02); the blocks start as copies of
// one freshly initialised layer, as torch.nn.TransformerEncoder.
//
// stages() is the same computation as a Sequential of [embed, block 0, ..., block depth-1, classify]
// sharing this module's tensors, for per-block checkpointing (checkpoint_sequential/nested and
// AutoCheckpoint run a Sequential's children). Move, save and switch modes through the ViT itself:
// the stem and classifier stages hold no tensors of their own.
#include <cstdint>
#include <memory>

#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/patch_embedding.h"
#include "nn/positional_embedding.h"
#include "nn/sequential.h"
#include "nn/transformer.h"

namespace graft::nn {

struct VisionTransformerOptions {
  int64_t image_size = 28, in_channels = 1, patch_size = 7, num_classes = 10;
  int64_t dim = 64, depth = 6, heads = 4;
  int64_t mlp_dim = 128;  // the feed-forward width (dim * MLP ratio)
  double dropout = 0.0;
};

class VisionTransformer : public Module {
 public:
  explicit VisionTransformer(VisionTransformerOptions options = {});
  Tensor forward(const Tensor& images) override;
  std::string name() const override { return "VisionTransformer"; }
  // images -> the token sequence entering the first block [N, P + 1, D].
  Tensor embed(const Tensor& images);
  // the last block's output -> logits.
  Tensor classify(const Tensor& tokens);
  std::shared_ptr<Sequential> stages();

  VisionTransformerOptions options;
  std::shared_ptr<PatchEmbedding> patch_embed;
  Tensor cls_token;
  std::shared_ptr<PositionalEmbedding> pos_embed;
  std::shared_ptr<TransformerEncoder> encoder;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> head;
};

}  // namespace graft::nn
