#include "nn/vision_transformer.h"

#include "autograd/functional.h"
#include "nn/init.h"

namespace graft::nn {

VisionTransformer::VisionTransformer(VisionTransformerOptions o) : options(o) {
  GRAFT_CHECK(o.image_size > 0 && o.patch_size > 0 && o.image_size % o.patch_size == 0,
              "VisionTransformer: image_size (", o.image_size, ") must be a positive multiple of patch_size (",
              o.patch_size, ")");
  patch_embed = register_module("patch_embed", std::make_shared<PatchEmbedding>(o.in_channels, o.dim, o.patch_size));
  cls_token = register_parameter("cls_token", graft::empty({1, 1, o.dim}));
  init::normal_(cls_token, 0.0, 0.02);
  int64_t patches = patch_embed->num_patches(o.image_size, o.image_size);
  pos_embed = register_module("pos_embed", std::make_shared<PositionalEmbedding>(patches + 1, o.dim));
  TransformerEncoderLayerOptions lo;
  lo.dim_feedforward = o.mlp_dim;
  lo.dropout = o.dropout;
  lo.activation = "gelu";
  lo.batch_first = true;
  lo.norm_first = true;
  encoder = register_module("encoder", std::make_shared<TransformerEncoder>(TransformerEncoderLayer(o.dim, o.heads, lo), o.depth));
  norm = register_module("norm", std::make_shared<LayerNorm>(Shape{o.dim}));
  head = register_module("head", std::make_shared<Linear>(o.dim, o.num_classes));
}

Tensor VisionTransformer::embed(const Tensor& images) {
  Tensor p = (*patch_embed)(images);  // [N, P, D]
  Tensor cls = cls_token.expand({p.size(0), 1, options.dim});
  return (*pos_embed)(graft::cat({cls, p}, 1));
}

Tensor VisionTransformer::classify(const Tensor& tokens) { return (*head)((*norm)(tokens).select(1, 0)); }

Tensor VisionTransformer::forward(const Tensor& images) { return classify((*encoder)(embed(images))); }

std::shared_ptr<Sequential> VisionTransformer::stages() {
  auto self = std::static_pointer_cast<VisionTransformer>(weak_from_this().lock());
  GRAFT_CHECK(self, "VisionTransformer::stages: the model must be owned by a std::shared_ptr (make_shared), since "
              "the stages keep it alive");
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Functional>([self](const Tensor& x) { return self->embed(x); }));
  for (auto& l : encoder->layers) seq->push_back(l);
  seq->push_back(std::make_shared<Functional>([self](const Tensor& x) { return self->classify(x); }));
  return seq;
}

}  // namespace graft::nn
