#include "nn/transformer.h"

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "nn/sequential.h"

namespace graft::nn {

TransformerEncoderLayer::TransformerEncoderLayer(int64_t d, int64_t h, TransformerEncoderLayerOptions o)
    : d_model(d), nhead(h), options(o) {
  GRAFT_CHECK(o.activation == "relu" || o.activation == "gelu", "TransformerEncoderLayer: activation must be "
              "'relu' or 'gelu', got '", o.activation, "'");
  GRAFT_CHECK(o.dim_feedforward > 0, "TransformerEncoderLayer: dim_feedforward must be positive, got ",
              o.dim_feedforward);
  MultiheadAttentionOptions mo;
  mo.dropout = o.dropout;
  mo.bias = o.bias;
  mo.batch_first = o.batch_first;
  self_attn = register_module("self_attn", std::make_shared<MultiheadAttention>(d, h, mo));
  linear1 = register_module("linear1", std::make_shared<Linear>(d, o.dim_feedforward, o.bias));
  dropout = register_module("dropout", std::make_shared<Dropout>(o.dropout));
  linear2 = register_module("linear2", std::make_shared<Linear>(o.dim_feedforward, d, o.bias));
  norm1 = register_module("norm1", std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps));
  norm2 = register_module("norm2", std::make_shared<LayerNorm>(Shape{d}, o.layer_norm_eps));
  dropout1 = register_module("dropout1", std::make_shared<Dropout>(o.dropout));
  dropout2 = register_module("dropout2", std::make_shared<Dropout>(o.dropout));
}

Tensor TransformerEncoderLayer::self_attention_block(const Tensor& x, const Tensor& mask, const Tensor& padding,
                                                     bool is_causal) {
  MhaForwardOptions o;
  o.need_weights = false;
  o.attn_mask = mask;
  o.key_padding_mask = padding;
  o.is_causal = is_causal;
  return (*dropout1)(self_attn->forward(x, x, x, o).first);
}

Tensor TransformerEncoderLayer::feed_forward_block(const Tensor& x) {
  Tensor h = (*linear1)(x);
  h = options.activation == "gelu" ? graft::gelu(h) : graft::relu(h);
  return (*dropout2)((*linear2)((*dropout)(h)));
}

Tensor TransformerEncoderLayer::forward(const Tensor& src) { return forward(src, {}, {}); }

bool TransformerEncoderLayer::splits_by_rows(const Tensor& input) const {
  return options.batch_first && input.dim() == 3 && (options.dropout == 0.0 || !is_training());
}

Tensor TransformerEncoderLayer::forward(const Tensor& src, const Tensor& src_mask, const Tensor& padding,
                                        bool is_causal) {
  Tensor x = src;
  if (options.norm_first) {
    x = x + self_attention_block((*norm1)(x), src_mask, padding, is_causal);
    return x + feed_forward_block((*norm2)(x));
  }
  x = (*norm1)(x + self_attention_block(x, src_mask, padding, is_causal));
  return (*norm2)(x + feed_forward_block(x));
}

TransformerEncoder::TransformerEncoder(const TransformerEncoderLayer& layer, int64_t num_layers,
                                       std::shared_ptr<LayerNorm> n) {
  GRAFT_CHECK(num_layers >= 1, "TransformerEncoder: num_layers must be at least 1, got ", num_layers);
  // ModuleList's naming ("layers.0.self_attn...") through a container that is never run as a whole.
  auto list = register_module("layers", std::make_shared<Sequential>());
  StateDict values = layer.state_dict();
  for (int64_t i = 0; i < num_layers; ++i) {
    auto l = std::make_shared<TransformerEncoderLayer>(layer.d_model, layer.nhead, layer.options);
    l->load_state_dict(values);
    l->train(layer.is_training());
    layers.push_back(list->push_back(l));
  }
  if (n) norm = register_module("norm", n);
}

Tensor TransformerEncoder::forward(const Tensor& src) { return forward(src, {}, {}); }

Tensor TransformerEncoder::forward(const Tensor& src, const Tensor& mask, const Tensor& padding, bool is_causal) {
  Tensor x = src;
  bool plain = !mask.defined() && !padding.defined() && !is_causal;
  for (auto& l : layers) x = plain ? (*l)(x) : l->forward(x, mask, padding, is_causal);  // (*l) fires its hooks
  return norm ? (*norm)(x) : x;
}

}  // namespace graft::nn
