#include "nn/serialize.h"

#include <map>

#include "nn/safetensors.h"

namespace graft::nn {

void save(const Module& module, const std::string& path) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : module.state_dict()) tensors[name] = t;
  save_safetensors(tensors, path, {{"format", "pt"}});
}

void load(Module& module, const std::string& path, bool strict) {
  StateDict dict;
  for (auto& [name, t] : load_safetensors(path)) dict.insert(name, t);
  module.load_state_dict(dict, strict);
}

}  // namespace graft::nn
