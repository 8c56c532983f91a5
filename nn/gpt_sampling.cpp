#include "nn/gpt_sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::nn {
namespace {

Tensor as_ids(const std::vector<int64_t>& tokens, Device device) {
  Tensor ids = ops::empty({1, static_cast<int64_t>(tokens.size())}, kInt64, kCPU);
  std::copy(tokens.begin(), tokens.end(), ids.data_ptr<int64_t>());
  return device.is_cpu() ? ids : ids.to(device);
}

// Rule 3: the next token from the last position's logits [V].
int64_t pick(const Tensor& last_logits, const SamplingOptions& o) {
  Tensor logits = last_logits.to(kFloat32);
  if (o.temperature == 0) return graft::argmax(logits).item<int64_t>();
  logits = logits / o.temperature;
  const int64_t V = logits.size(0);
  if (o.top_k > 0 && o.top_k < V) {
    Tensor kth = graft::topk(logits, o.top_k)[0].select(0, o.top_k - 1);
    logits = graft::masked_fill(logits, graft::lt(logits, kth), -std::numeric_limits<double>::infinity());
  }
  return graft::multinomial(graft::softmax(logits, 0), 1).item<int64_t>();
}

}  // namespace

std::vector<int64_t> generate(GPT& model, const std::vector<int64_t>& prompt, const SamplingOptions& o,
                              const std::function<void(int64_t)>& on_token) {
  const int64_t T = model.config.block_size, V = model.config.vocab_size;
  GRAFT_CHECK(!prompt.empty(), "generate: the prompt is empty (give at least one token)");
  GRAFT_CHECK(o.max_new_tokens >= 0, "generate: max_new_tokens must be at least 0, got ", o.max_new_tokens);
  GRAFT_CHECK(o.temperature >= 0 && std::isfinite(o.temperature),
              "generate: temperature must be a finite number of at least 0 (0 is greedy), got ", o.temperature);
  GRAFT_CHECK(o.top_k >= 0, "generate: top_k must be at least 0 (0 keeps every token), got ", o.top_k);
  for (int64_t id : prompt)
    GRAFT_CHECK(id >= 0 && id < V, "generate: prompt token ", id, " is outside the vocabulary [0, ", V, ")");

  const bool was_training = model.is_training();
  model.eval();
  InferenceMode inference;
  const Device device = model.wte->weight.device();
  // Rule 1.
  std::vector<int64_t> window(prompt.end() - std::min<int64_t>(T, static_cast<int64_t>(prompt.size())), prompt.end());
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(o.max_new_tokens));
  GPTKVCache cache;
  Tensor logits;  // [1, t, V]: the last row predicts the next token
  if (o.kv_cache && o.max_new_tokens > 0) {
    cache = model.make_cache(1);
    logits = model.forward_cached(as_ids(window, device), cache);
  }
  for (int64_t i = 0; i < o.max_new_tokens; ++i) {
    if (!o.kv_cache) logits = model.forward(as_ids(window, device));
    const int64_t tok = pick(logits.select(0, 0).select(0, logits.size(1) - 1), o);
    out.push_back(tok);
    if (on_token) on_token(tok);
    window.push_back(tok);
    const bool restart = static_cast<int64_t>(window.size()) > T;  // rule 2
    if (restart) window.erase(window.begin(), window.end() - std::max<int64_t>(1, T / 2));
    if (!o.kv_cache || i + 1 == o.max_new_tokens) continue;
    if (restart) {
      cache.clear();
      logits = model.forward_cached(as_ids(window, device), cache);
    } else {
      logits = model.forward_cached(as_ids({tok}, device), cache);
    }
  }
  model.train(was_training);
  return out;
}

}  // namespace graft::nn
