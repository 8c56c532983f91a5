#pragma once
// nn::TransformerEncoderLayer and nn::TransformerEncoder: torch.nn's, with its child names, so a
// PyTorch state dict loads by name:
//   self_attn (MultiheadAttention), linear1 (d_model -> dim_feedforward), linear2 (back),
//   norm1, norm2 (LayerNorm); the encoder's blocks are layers.0, layers.1, ... and an optional norm.
// Initialisation as PyTorch: each child's own default; the encoder's blocks start as copies of the
// layer it is given (PyTorch deep-copies it), so all blocks start equal.
//
//   post-norm (norm_first = false):  x = norm1(x + sa(x));  x = norm2(x + ff(x))
//   pre-norm  (norm_first = true):   x = x + sa(norm1(x));  x = x + ff(norm2(x))
//   sa(x) = dropout1(self_attn(x, x, x)),  ff(x) = dropout2(linear2(dropout(act(linear1(x)))))
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nn/attention.h"
#include "nn/dropout.h"
#include "nn/linear.h"
#include "nn/normalization.h"

namespace graft::nn {

struct TransformerEncoderLayerOptions {
  int64_t dim_feedforward = 2048;
  double dropout = 0.1;
  std::string activation = "relu";  // "relu" or "gelu"
  double layer_norm_eps = 1e-5;
  bool batch_first = false;  // PyTorch's default: [L, N, E]
  bool norm_first = false;
  bool bias = true;
};

class TransformerEncoderLayer : public Module {
 public:
  TransformerEncoderLayer(int64_t d_model, int64_t nhead, TransformerEncoderLayerOptions options = {});
  Tensor forward(const Tensor& src) override;
  // src_mask: MultiheadAttention's attn_mask; src_key_padding_mask: its key_padding_mask.
  Tensor forward(const Tensor& src, const Tensor& src_mask, const Tensor& src_key_padding_mask,
                 bool is_causal = false);
  std::string name() const override { return "TransformerEncoderLayer"; }
  // Batch-first [N, L, E] without dropout (or in eval mode): each sample's tokens attend only to
  // each other (forward(src) has no masks), so slices of the batch give the batch's rows.
  bool splits_by_rows(const Tensor& input) const override;

  int64_t d_model, nhead;
  TransformerEncoderLayerOptions options;
  std::shared_ptr<MultiheadAttention> self_attn;
  std::shared_ptr<Linear> linear1, linear2;
  std::shared_ptr<LayerNorm> norm1, norm2;
  std::shared_ptr<Dropout> dropout, dropout1, dropout2;

 private:
  Tensor self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& padding, bool is_causal);
  Tensor feed_forward_block(const Tensor& x);
};

class TransformerEncoder : public Module {
 public:
  // num_layers copies of `layer` (its parameter values included), then `norm` if given.
  TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers, std::shared_ptr<LayerNorm> norm = nullptr);
  Tensor forward(const Tensor& src) override;
  Tensor forward(const Tensor& src, const Tensor& mask, const Tensor& src_key_padding_mask, bool is_causal = false);
  std::string name() const override { return "TransformerEncoder"; }

  std::vector<std::shared_ptr<TransformerEncoderLayer>> layers;  // registered as layers.0, layers.1, ...
  std::shared_ptr<LayerNorm> norm;
};

}  // namespace graft::nn
