#pragma once
// nn::save / nn::load: a module's state dict in the safetensors format (nn/safetensors.h), so a
// file written by graft loads in Python's safetensors and PyTorch, and the reverse.
#include <string>

#include "nn/module.h"

namespace graft::nn {

void save(const Module& module, const std::string& path);
// Strict by default: missing, unexpected and mis-shaped keys are errors naming the keys.
void load(Module& module, const std::string& path, bool strict = true);

}  // namespace graft::nn
