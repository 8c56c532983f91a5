#pragma once
// nn::save / nn::load: a module's state dict in the safetensors format (nn/safetensors.h), so a
// file written by graft loads in Python's safetensors and PyTorch, and the reverse.
#include <map>
#include <string>

#include "nn/module.h"

namespace graft::nn {

// `metadata` joins the file's __metadata__ (with "format": "pt"): what a model needs besides its
// tensors to be rebuilt (a language model's vocabulary and shape).
void save(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata = {});
// Strict by default: missing, unexpected and mis-shaped keys are errors naming the keys.
void load(Module& module, const std::string& path, bool strict = true);

}  // namespace graft::nn
