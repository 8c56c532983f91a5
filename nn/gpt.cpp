#include "nn/gpt.h"

#include <cmath>

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace graft::nn {
namespace {

void check_config(const GPTConfig& c) {
  GRAFT_CHECK(c.vocab_size >= 1 && c.block_size >= 1 && c.n_layer >= 1 && c.n_head >= 1 && c.n_embd >= 1,
              "GPT: vocab_size, block_size, n_layer, n_head and n_embd must be positive, got ", c.vocab_size, ", ",
              c.block_size, ", ", c.n_layer, ", ", c.n_head, ", ", c.n_embd);
  GRAFT_CHECK(c.n_embd % c.n_head == 0, "GPT: n_embd (", c.n_embd, ") must be a multiple of n_head (", c.n_head,
              ")");
  GRAFT_CHECK(c.dropout >= 0 && c.dropout < 1, "GPT: dropout must be in [0, 1), got ", c.dropout);
}

}  // namespace

// ---- attention -----------------------------------------------------------------------------------

CausalSelfAttention::CausalSelfAttention(const GPTConfig& c)
    : n_head(c.n_head), n_embd(c.n_embd), dropout(c.dropout) {
  c_attn = register_module("c_attn", std::make_shared<Linear>(c.n_embd, 3 * c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<Linear>(c.n_embd, c.n_embd));
}

std::vector<Tensor> CausalSelfAttention::project(const Tensor& x) {
  const int64_t B = x.size(0), t = x.size(1), hd = n_embd / n_head;
  // [B, t, 3C] -> three [B, t, C] views -> [B, H, t, hd] views (the fused kernel reads strides).
  // split, not three selects: its backward is one cat, where each select's would be a zero-filled
  // [B, t, 3C] gradient summed into the others.
  std::vector<Tensor> qkv = (*c_attn)(x).split(n_embd, 2);
  for (auto& part : qkv) part = part.view({B, t, n_head, hd}).transpose(1, 2);
  return qkv;
}

Tensor CausalSelfAttention::merge(const Tensor& y) {
  const int64_t B = y.size(0), t = y.size(2);
  Tensor out = (*c_proj)(y.transpose(1, 2).reshape({B, t, n_embd}));
  return functional::dropout(out, dropout, is_training());
}

Tensor CausalSelfAttention::forward(const Tensor& x) {
  GRAFT_CHECK(x.dim() == 3 && x.size(2) == n_embd, "CausalSelfAttention: expected input [B, t, ", n_embd, "], got ",
              shape_str(x.sizes()));
  auto qkv = project(x);
  Tensor y = graft::scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], {}, is_training() ? dropout : 0.0,
                                                 /*is_causal=*/true);
  return merge(y);
}

Tensor CausalSelfAttention::forward_cached(const Tensor& x, KVLayerCache& cache, int64_t start) {
  const int64_t t = x.size(1), end = start + t;
  auto qkv = project(x);
  cache.k.slice(2, start, end).copy_(qkv[1]);
  cache.v.slice(2, start, end).copy_(qkv[2]);
  Tensor k = cache.k.slice(2, 0, end), v = cache.v.slice(2, 0, end);
  Tensor y;
  if (start == 0) {
    y = graft::scaled_dot_product_attention(qkv[0], k, v, {}, 0.0, /*is_causal=*/true);
  } else if (t == 1) {
    // The newest position sees every cached one: no mask.
    y = graft::scaled_dot_product_attention(qkv[0], k, v);
  } else {
    // Query i (absolute position start + i) sees keys [0, start + i]: the causal mask aligned to
    // the bottom right, which is_causal (top-left, as PyTorch) is not when t < end.
    Tensor rows = ops::arange(static_cast<double>(start), static_cast<double>(end), 1, kInt64, x.device());
    Tensor cols = ops::arange(0, static_cast<double>(end), 1, kInt64, x.device());
    Tensor allowed = graft::le(cols.unsqueeze(0), rows.unsqueeze(1));  // [t, end], true = attend
    y = graft::scaled_dot_product_attention(qkv[0], k, v, allowed);
  }
  return merge(y);
}

// ---- MLP and block -------------------------------------------------------------------------------

GPTMlp::GPTMlp(const GPTConfig& c) : dropout(c.dropout) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(c.n_embd, 4 * c.n_embd));
  c_proj = register_module("c_proj", std::make_shared<Linear>(4 * c.n_embd, c.n_embd));
}

Tensor GPTMlp::forward(const Tensor& x) {
  return functional::dropout((*c_proj)(graft::gelu((*c_fc)(x))), dropout, is_training());
}

GPTBlock::GPTBlock(const GPTConfig& c) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{c.n_embd}));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(c));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{c.n_embd}));
  mlp = register_module("mlp", std::make_shared<GPTMlp>(c));
}

Tensor GPTBlock::forward(const Tensor& x) {
  Tensor h = x + attn->forward((*ln_1)(x));
  return h + (*mlp)((*ln_2)(h));
}

Tensor GPTBlock::forward_cached(const Tensor& x, KVLayerCache& cache, int64_t start) {
  Tensor h = x + attn->forward_cached((*ln_1)(x), cache, start);
  return h + (*mlp)((*ln_2)(h));
}

// ---- the model -----------------------------------------------------------------------------------

GPT::GPT(GPTConfig c) : config(c) {
  check_config(c);
  wte = register_module("wte", std::make_shared<Embedding>(c.vocab_size, c.n_embd));
  wpe = register_module("wpe", std::make_shared<Embedding>(c.block_size, c.n_embd));
  // ModuleList's naming ("h.0.ln_1...") through a container that is never run as a whole.
  auto list = register_module("h", std::make_shared<Sequential>());
  for (int64_t i = 0; i < c.n_layer; ++i) h.push_back(list->push_back(std::make_shared<GPTBlock>(c)));
  ln_f = register_module("ln_f", std::make_shared<LayerNorm>(Shape{c.n_embd}));
  reset_parameters();
}

void GPT::reset_parameters() {
  NoGradGuard no_grad;
  const double residual_std = 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer));
  // Each tensor is drawn once, in named_parameters() order, so one seed gives one model.
  for (auto& [name, p] : named_parameters()) {
    const bool is_norm = name.find("ln_") != std::string::npos;
    const bool is_bias = name.size() >= 5 && name.compare(name.size() - 5, 5, ".bias") == 0;
    if (is_norm) p.fill_(is_bias ? 0.0 : 1.0);
    else if (is_bias) p.zero_();
    else if (name.find("c_proj.weight") != std::string::npos) init::normal_(p, 0.0, residual_std);
    else init::normal_(p, 0.0, 0.02);
  }
}

Tensor GPT::embed(const Tensor& idx, int64_t start) {
  GRAFT_CHECK(idx.dim() == 2 && idx.dtype() == kInt64, "GPT: expected token ids idx [B, t] of dtype int64, got ",
              shape_str(idx.sizes()), " ", idx.dtype());
  const int64_t t = idx.size(1);
  GRAFT_CHECK(t >= 1 && start + t <= config.block_size, "GPT: positions [", start, ", ", start + t,
              ") do not fit the context of ", config.block_size, " tokens (block_size)");
  Tensor pos = ops::arange(static_cast<double>(start), static_cast<double>(start + t), 1, kInt64, idx.device());
  return functional::dropout((*wte)(idx) + (*wpe)(pos), config.dropout, is_training());
}

Tensor GPT::head(const Tensor& x) { return graft::linear((*ln_f)(x), wte->weight); }

Tensor GPT::forward(const Tensor& idx) {
  Tensor x = embed(idx);
  for (auto& b : h) x = (*b)(x);
  return head(x);
}

GPTKVCache GPT::make_cache(int64_t batch) const {
  GRAFT_CHECK(batch >= 1, "GPT::make_cache: batch must be positive, got ", batch);
  GPTKVCache cache;
  const Tensor& w = wte->weight;
  const Shape shape{batch, config.n_head, config.block_size, config.n_embd / config.n_head};
  for (int64_t i = 0; i < config.n_layer; ++i)
    cache.layers.push_back(KVLayerCache{ops::empty(shape, w.dtype(), w.device()), ops::empty(shape, w.dtype(), w.device())});
  return cache;
}

Tensor GPT::forward_cached(const Tensor& idx, GPTKVCache& cache) {
  GRAFT_CHECK(!is_grad_enabled() || is_inference_mode_enabled(),
              "GPT::forward_cached: run it under InferenceMode or NoGradGuard (the cache keeps no autograd history)");
  GRAFT_CHECK(static_cast<int64_t>(cache.layers.size()) == config.n_layer,
              "GPT::forward_cached: the cache has ", cache.layers.size(), " layers, the model ", config.n_layer,
              " (make it with make_cache)");
  GRAFT_CHECK(idx.dim() == 2 && idx.size(0) == cache.batch(), "GPT::forward_cached: idx ", shape_str(idx.sizes()),
              " does not match the cache's batch of ", cache.batch());
  const int64_t start = cache.length_;
  Tensor x = embed(idx, start);  // checks start + t <= block_size (invariant 2)
  for (size_t i = 0; i < h.size(); ++i) x = h[i]->forward_cached(x, cache.layers[i], start);
  cache.length_ = start + idx.size(1);
  return head(x);
}

std::shared_ptr<Sequential> GPT::stages() {
  auto self = std::static_pointer_cast<GPT>(weak_from_this().lock());
  GRAFT_CHECK(self, "GPT::stages: the model must be owned by a std::shared_ptr (make_shared), since the stages keep "
              "it alive");
  auto seq = std::make_shared<Sequential>();
  seq->push_back(std::make_shared<Functional>([self](const Tensor& idx) { return self->embed(idx); }));
  for (auto& b : h) seq->push_back(b);
  seq->push_back(std::make_shared<Functional>([self](const Tensor& x) { return self->head(x); }));
  return seq;
}

}  // namespace graft::nn
