#pragma once
// nn::MultiheadAttention: torch.nn.MultiheadAttention with PyTorch's parameter layout, so a state
// dict saved by PyTorch loads by name:
//   in_proj_weight [3E, E] (rows: q, k, v projections), in_proj_bias [3E], out_proj (Linear E -> E)
// Initialisation as PyTorch: in_proj_weight xavier_uniform_ over the whole [3E, E] matrix,
// in_proj_bias and out_proj.bias 0, out_proj.weight Linear's default.
//
//   forward(query [N, L, E], key [N, S, E], value [N, S, E]) -> {out [N, L, E], weights}
// with batch_first (else [L, N, E]) or unbatched [L, E] inputs. Masks follow PyTorch's MHA
// convention (opposite to scaled_dot_product_attention's bool mask): a true entry of a bool
// attn_mask ([L, S] or [N * num_heads, L, S]) or key_padding_mask ([N, S]) is NOT attended; a float
// mask is added. Without need_weights the heads run through scaled_dot_product_attention's fused
// kernel; with it the weights [N, L, S] (averaged over heads) or [N, H, L, S] are formed explicitly.
#include <cstdint>
#include <memory>
#include <utility>

#include "nn/linear.h"
#include "nn/module.h"

namespace graft::nn {

struct MultiheadAttentionOptions {
  double dropout = 0.0;  // on the attention weights, in training
  bool bias = true;
  bool batch_first = false;  // PyTorch's default
};

struct MhaForwardOptions {
  Tensor key_padding_mask;            // [N, S] bool (true = ignore) or float (added)
  bool need_weights = true;           // PyTorch's default
  Tensor attn_mask;                   // [L, S] or [N * H, L, S], bool (true = not allowed) or float
  bool average_attn_weights = true;
  bool is_causal = false;             // a hint that attn_mask is the causal mask (PyTorch requires the mask)
};

class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  // Self-attention without masks, returning only the output (so the module fits a Sequential).
  Tensor forward(const Tensor& x) override;
  // {attn_output, attn_weights}; weights are undefined unless need_weights.
  std::pair<Tensor, Tensor> forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                    const MhaForwardOptions& options = {});
  std::string name() const override { return "MultiheadAttention"; }
  void reset_parameters();

  int64_t embed_dim, num_heads, head_dim;
  MultiheadAttentionOptions options;
  Tensor in_proj_weight, in_proj_bias;
  std::shared_ptr<Linear> out_proj;
};

}  // namespace graft::nn
