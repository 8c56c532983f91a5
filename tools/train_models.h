#pragma once
// The models `graft train` and `graft eval` know, built from nn modules.
#include <memory>
#include <string>

#include "nn/sequential.h"

namespace graft::tools {

// `module` owns the parameters (move, save, load, train/eval through it); `stages` runs the same
// computation as a Sequential whose children are the units checkpointing works on (the layers of
// mlp and cnn, which are the module itself; the embedding, each transformer block and the
// classifier of vit).
struct TrainModel {
  std::shared_ptr<nn::Module> module;
  std::shared_ptr<nn::Sequential> stages;
};

// "mlp": Flatten, Linear 784-256, ReLU, Linear 256-10.
// "cnn": conv(1->32,3,pad 1)-ReLU-maxpool2, conv(32->64,3,pad 1)-ReLU-maxpool2, fc 3136->128-ReLU-fc 10.
// "vit": nn::VisionTransformer: patch 7 (16 patches), dim 64, depth 6, 4 heads, MLP 128, CLS token, pre-norm.
TrainModel make_model(const std::string& name);

}  // namespace graft::tools
