#include "models/gpt.h"

#include <charconv>

#include "nn/safetensors.h"
#include "runtime/error.h"

namespace graft::models {

nn::GPTConfig gpt_config(int64_t vocab_size, double dropout) {
  return {.vocab_size = vocab_size, .block_size = 64, .n_layer = 4, .n_head = 4, .n_embd = 128, .dropout = dropout};
}

std::shared_ptr<nn::GPT> gpt(int64_t vocab_size, double dropout) {
  return std::make_shared<nn::GPT>(gpt_config(vocab_size, dropout));
}

std::map<std::string, std::string> gpt_metadata(const nn::GPTConfig& c, const std::string& vocabulary) {
  return {{"graft.model", "gpt"},
          {"graft.gpt.vocab_size", std::to_string(c.vocab_size)},
          {"graft.gpt.block_size", std::to_string(c.block_size)},
          {"graft.gpt.n_layer", std::to_string(c.n_layer)},
          {"graft.gpt.n_head", std::to_string(c.n_head)},
          {"graft.gpt.n_embd", std::to_string(c.n_embd)},
          {"graft.vocabulary", vocabulary}};
}

SavedGpt load_gpt(const std::string& path) {
  std::map<std::string, std::string> meta;
  std::map<std::string, Tensor> tensors = nn::load_safetensors(path, meta);
  auto it = meta.find("graft.model");
  GRAFT_CHECK(it != meta.end() && it->second == "gpt", "'", path, "' is not a GPT saved by graft train --model gpt (",
              it == meta.end() ? std::string("its metadata names no model; its tensors: ") +
                                     (tensors.empty() ? std::string("none") : tensors.begin()->first + ", ...")
                               : "it holds a " + it->second + " model",
              ")");
  auto number = [&](const std::string& key) {
    auto f = meta.find("graft.gpt." + key);
    int64_t v = 0;
    GRAFT_CHECK(f != meta.end(), "'", path, "': its metadata lacks graft.gpt.", key);
    const auto r = std::from_chars(f->second.data(), f->second.data() + f->second.size(), v);
    GRAFT_CHECK(r.ec == std::errc() && r.ptr == f->second.data() + f->second.size() && v > 0, "'", path,
                "': graft.gpt.", key, " is '", f->second, "', not a positive whole number");
    return v;
  };
  nn::GPTConfig c;
  c.vocab_size = number("vocab_size");
  c.block_size = number("block_size");
  c.n_layer = number("n_layer");
  c.n_head = number("n_head");
  c.n_embd = number("n_embd");
  auto v = meta.find("graft.vocabulary");
  GRAFT_CHECK(v != meta.end(), "'", path, "': its metadata lacks graft.vocabulary");
  SavedGpt out{std::make_shared<nn::GPT>(c), v->second};
  nn::StateDict dict;
  for (auto& [name, t] : tensors) dict.insert(name, t);
  out.model->load_state_dict(dict, /*strict=*/true);
  out.model->eval();
  return out;
}

}  // namespace graft::models
