#pragma once
// graft train's MLP for 28x28 one-channel images: Flatten, Linear 784-256, ReLU, Linear 256-10.
#include <memory>

#include "nn/sequential.h"

namespace graft::models {

std::shared_ptr<nn::Sequential> mlp();

}  // namespace graft::models
