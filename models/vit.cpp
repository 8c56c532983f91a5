#include "models/vit.h"

namespace graft::models {

nn::VisionTransformerOptions vit_options() {
  return {.image_size = 28, .in_channels = 1, .patch_size = 7, .num_classes = 10,
          .dim = 64, .depth = 6, .heads = 4, .mlp_dim = 128, .dropout = 0.0};
}

std::shared_ptr<nn::VisionTransformer> vit(double dropout) {
  nn::VisionTransformerOptions o = vit_options();
  o.dropout = dropout;
  return std::make_shared<nn::VisionTransformer>(o);
}

}  // namespace graft::models
