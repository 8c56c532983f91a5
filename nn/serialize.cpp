#include "nn/serialize.h"

#include <map>

#include "nn/safetensors.h"

namespace graft::nn {

void save(const Module& module, const std::string& path, const std::map<std::string, std::string>& metadata) {
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : module.state_dict()) tensors[name] = t;
  std::map<std::string, std::string> meta = metadata;
  meta["format"] = "pt";
  save_safetensors(tensors, path, meta);
}

void load(Module& module, const std::string& path, bool strict) {
  StateDict dict;
  for (auto& [name, t] : load_safetensors(path)) dict.insert(name, t);
  module.load_state_dict(dict, strict);
}

}  // namespace graft::nn
