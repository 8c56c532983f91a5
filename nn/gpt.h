#pragma once
// nn::GPT: a decoder-only transformer language model (GPT-2's block, nanoGPT's layout).
//   idx [B, t] int64 (t <= block_size) -> wte(idx) + wpe(0..t-1) -> dropout
//   -> n_layer pre-norm blocks:  x += drop(attn.c_proj(causal_sdpa(attn.c_attn(ln_1(x)))))
//                                x += drop(mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))))
//   -> ln_f -> logits [B, t, vocab_size] = x @ wte.weight^T   (the head is tied to the embedding)
// Parameter names: wte.weight [V, C], wpe.weight [T, C], h.{i}.ln_1.{weight,bias},
// h.{i}.attn.c_attn.{weight [3C, C], bias} (rows: q, k, v), h.{i}.attn.c_proj, h.{i}.ln_2,
// h.{i}.mlp.c_fc [4C, C], h.{i}.mlp.c_proj [C, 4C], ln_f: the names of tools/bench/pytorch_gpt.py's
// model, so a state dict moves between them by name. The tied head has no name of its own.
// Initialisation as GPT-2 (nanoGPT): Linear and Embedding weights N(0, 0.02), the two residual
// projections (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)) so the residual stream's
// variance does not grow with depth, biases 0, LayerNorm 1 and 0.
//
// Invariants of the KV cache (GPTKVCache, forward_cached):
// 1. A cache holds, per layer, the keys and values of positions [0, length) of one sequence batch,
//    in buffers [B, H, block_size, C/H] allocated once; forward_cached(idx [B, t]) writes positions
//    [length, length + t) and attends the new queries to [0, length + t) with the causal rule, so
//    its logits are those forward() gives for the whole sequence at those positions.
// 2. Positions are absolute (wpe), so a cache never slides: when length + t would pass block_size
//    the caller resets it (clear()) and refills it from the tokens it wants to keep. nn::generate
//    (nn/gpt_sampling.h) does that, and its cacheless path follows the same window rule, so both
//    see the same context at every token.
// 3. The cache is written under InferenceMode or no_grad only: it holds no autograd history.
#include <cstdint>
#include <memory>
#include <vector>

#include "nn/embedding.h"
#include "nn/linear.h"
#include "nn/normalization.h"
#include "nn/sequential.h"

namespace graft::nn {

struct GPTConfig {
  int64_t vocab_size = 96;
  int64_t block_size = 64;  // the longest context (the position table's rows)
  int64_t n_layer = 4, n_head = 4, n_embd = 128;
  double dropout = 0.0;  // after the embeddings, on the attention weights, after each residual branch
};

// One layer's cached keys and values (invariant 1).
struct KVLayerCache {
  Tensor k, v;  // [B, H, block_size, C/H]
};

class GPTKVCache {
 public:
  int64_t length() const { return length_; }
  int64_t batch() const { return layers.empty() ? 0 : layers[0].k.size(0); }
  void clear() { length_ = 0; }

  std::vector<KVLayerCache> layers;

 private:
  friend class GPT;
  int64_t length_ = 0;
};

class CausalSelfAttention : public Module {
 public:
  explicit CausalSelfAttention(const GPTConfig& config);
  // x [B, t, C] -> [B, t, C], every position attending to itself and those before it.
  Tensor forward(const Tensor& x) override;
  // Invariant 1: appends this chunk's keys and values at positions [start, start + t).
  Tensor forward_cached(const Tensor& x, KVLayerCache& cache, int64_t start);
  std::string name() const override { return "CausalSelfAttention"; }

  int64_t n_head, n_embd;
  double dropout;
  std::shared_ptr<Linear> c_attn, c_proj;

 private:
  // x [B, t, C] -> q, k, v each [B, H, t, C/H] (views of one projection).
  std::vector<Tensor> project(const Tensor& x);
  // y [B, H, t, C/H] -> [B, t, C] through c_proj and the residual dropout.
  Tensor merge(const Tensor& y);
};

class GPTMlp : public Module {
 public:
  explicit GPTMlp(const GPTConfig& config);
  Tensor forward(const Tensor& x) override;  // [B, t, C] -> [B, t, C]
  std::string name() const override { return "GPTMlp"; }

  double dropout;
  std::shared_ptr<Linear> c_fc, c_proj;
};

class GPTBlock : public Module {
 public:
  explicit GPTBlock(const GPTConfig& config);
  Tensor forward(const Tensor& x) override;
  Tensor forward_cached(const Tensor& x, KVLayerCache& cache, int64_t start);
  std::string name() const override { return "GPTBlock"; }

  std::shared_ptr<LayerNorm> ln_1, ln_2;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<GPTMlp> mlp;
};

class GPT : public Module {
 public:
  explicit GPT(GPTConfig config = {});
  // idx [B, t] int64 -> logits [B, t, vocab_size].
  Tensor forward(const Tensor& idx) override;
  // Invariant 1: idx [B, t] continues the cached sequence; logits [B, t, vocab_size] for the new
  // positions. An error when the cache would pass block_size (invariant 2) or its batch differs.
  Tensor forward_cached(const Tensor& idx, GPTKVCache& cache);
  // A cache for batch `batch` on the model's device, in its parameters' dtype, empty.
  GPTKVCache make_cache(int64_t batch) const;
  std::string name() const override { return "GPT"; }
  void reset_parameters();
  // The same computation as a Sequential [embed, block 0, ..., block n-1, head] sharing this
  // module's tensors, for per-block checkpointing.
  std::shared_ptr<Sequential> stages();

  // idx [B, t] -> wte(idx) + wpe(start .. start+t-1) through the embedding dropout: [B, t, C].
  Tensor embed(const Tensor& idx, int64_t start = 0);
  // [B, t, C] -> logits [B, t, V] (ln_f and the tied head).
  Tensor head(const Tensor& x);

  GPTConfig config;
  std::shared_ptr<Embedding> wte, wpe;
  std::vector<std::shared_ptr<GPTBlock>> h;
  std::shared_ptr<LayerNorm> ln_f;
};

}  // namespace graft::nn
