#pragma once
// nn::generate: autoregressive sampling from a GPT, one token at a time.
//
// The context rule, the same with and without the KV cache (nn/gpt.h, invariant 2):
// 1. The model sees a window of the most recent tokens at positions 0, 1, ...: at first the
//    prompt's last min(len, block_size) tokens.
// 2. Each new token is appended to the window. When that makes it longer than block_size, the
//    window restarts from its last block_size / 2 tokens (at least 1), which the cached path
//    re-encodes into a cleared cache. A sliding window would shift every learned absolute position
//    at every token, so no cache could be reused; restarting from half a window keeps both paths
//    exact and re-encodes once per block_size / 2 tokens.
// 3. A token is drawn from softmax(logits / temperature) over the top_k largest logits (all when
//    top_k is 0 or at least the vocabulary), with graft::multinomial on the default CPU generator,
//    one draw per token: the same seed gives the same tokens with and without the cache.
//    temperature 0 is greedy decoding (the first largest logit), as Hugging Face's do_sample=False.
// 4. It runs under InferenceMode in eval mode, and puts the module's training flag back after.
#include <cstdint>
#include <functional>
#include <vector>

#include "nn/gpt.h"

namespace graft::nn {

struct SamplingOptions {
  int64_t max_new_tokens = 200;
  double temperature = 1.0;  // 0: greedy
  int64_t top_k = 0;         // 0: every token
  bool kv_cache = true;
};

// The max_new_tokens tokens drawn after `prompt` (token ids in [0, vocab_size), not empty);
// on_token, when given, sees each one as soon as it is drawn (a streaming printer).
std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const SamplingOptions& options = {},
                              const std::function<void(int64_t)>& on_token = {});

}  // namespace graft::nn
