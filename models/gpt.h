#pragma once
// graft train's character-level GPT: nanoGPT's "baby GPT" (4 layers, 4 heads, width 128, context
// 64), tied head, GPT-2's initialisation. Spelled out here rather than taken from nn::GPTConfig's
// defaults, so the recipe's model stays the same if those change. The vocabulary comes from the
// corpus, so the model is made from its size.
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "nn/gpt.h"

namespace graft::models {

nn::GPTConfig gpt_config(int64_t vocab_size, double dropout = 0.0);
std::shared_ptr<nn::GPT> gpt(int64_t vocab_size, double dropout = 0.0);

// A saved GPT carries what rebuilds it in its safetensors metadata: "graft.model" = "gpt", the
// shape ("graft.gpt.block_size", ".n_layer", ".n_head", ".n_embd", ".vocab_size") and the
// vocabulary's characters in order as UTF-8 ("graft.vocabulary"; data::CharVocabulary::to_text).
std::map<std::string, std::string> gpt_metadata(const nn::GPTConfig& config, const std::string& vocabulary);
struct SavedGpt {
  std::shared_ptr<nn::GPT> model;  // on the CPU, in eval mode
  std::string vocabulary;
};
// An error names the file and what is missing (a file of another model says which it is).
SavedGpt load_gpt(const std::string& path);

}  // namespace graft::models
