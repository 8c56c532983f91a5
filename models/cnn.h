#pragma once
// graft train's CNN for 28x28 one-channel images, the layers in this order (each a stage):
// conv(1->32, 3x3, pad 1), ReLU, maxpool 2, conv(32->64, 3x3, pad 1), ReLU, maxpool 2, Flatten,
// Linear 3136-128, ReLU, Linear 128-10. tools/bench/libtorch_reference.cpp has the same shapes.
#include <memory>

#include "nn/sequential.h"

namespace graft::models {

std::shared_ptr<nn::Sequential> cnn();

}  // namespace graft::models
