#pragma once
// graft train's ViT for Fashion-MNIST: patch 7 (16 patches of 28x28x1), dim 64, depth 6, 4 heads,
// MLP 128, CLS token, pre-norm, no dropout, 10 classes. Spelled out here rather than taken from
// nn::VisionTransformerOptions' defaults, so the recipe's model stays the same if those change.
#include <memory>

#include "nn/vision_transformer.h"

namespace graft::models {

nn::VisionTransformerOptions vit_options();
// dropout > 0 (graft train --dropout): after the embedding, attention and MLP, as the options say.
std::shared_ptr<nn::VisionTransformer> vit(double dropout = 0.0);

}  // namespace graft::models
