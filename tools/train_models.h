#pragma once
// The models `graft train` and `graft eval` know, built from nn modules.
#include <memory>
#include <string>

#include "nn/sequential.h"

namespace graft::tools {

// "mlp": Flatten, Linear 784-256, ReLU, Linear 256-10.
// "cnn": conv(1->32,3,pad 1)-ReLU-maxpool2, conv(32->64,3,pad 1)-ReLU-maxpool2, fc 3136->128-ReLU-fc 10.
std::shared_ptr<nn::Sequential> make_model(const std::string& name);

}  // namespace graft::tools
