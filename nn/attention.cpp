#include "nn/attention.h"

#include <cmath>
#include <limits>

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "nn/functional.h"
#include "nn/init.h"
#include "ops/ops.h"

namespace graft::nn {

namespace {

const char* kOp = "MultiheadAttention";

// A PyTorch-convention mask (bool: true = not allowed; float: added) as an additive mask of `dt`.
Tensor additive(const Tensor& mask, DType dt) {
  if (mask.dtype() != kBool) return mask.to(dt);
  NoGradGuard ng;
  return ops::masked_fill(ops::zeros(mask.sizes(), dt, mask.device()), mask, -std::numeric_limits<double>::infinity());
}

}  // namespace

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o)
    : embed_dim(e), num_heads(h), head_dim(h > 0 ? e / h : 0), options(o) {
  GRAFT_CHECK(e > 0 && h > 0, kOp, ": embed_dim and num_heads must be positive, got embed_dim=", e,
              ", num_heads=", h);
  GRAFT_CHECK(e % h == 0, kOp, ": embed_dim (", e, ") must be divisible by num_heads (", h, ")");
  GRAFT_CHECK(o.dropout >= 0 && o.dropout <= 1, kOp, ": dropout must be in [0, 1], got ", o.dropout);
  in_proj_weight = register_parameter("in_proj_weight", graft::empty({3 * e, e}));
  if (o.bias) in_proj_bias = register_parameter("in_proj_bias", graft::empty({3 * e}));
  out_proj = register_module("out_proj", std::make_shared<Linear>(e, e, o.bias));
  reset_parameters();
}

void MultiheadAttention::reset_parameters() {
  init::xavier_uniform_(in_proj_weight);
  if (in_proj_bias.defined()) init::zeros_(in_proj_bias);
  out_proj->reset_parameters();
  if (out_proj->bias.defined()) init::zeros_(out_proj->bias);
}

Tensor MultiheadAttention::forward(const Tensor& x) {
  MhaForwardOptions o;
  o.need_weights = false;
  return forward(x, x, x, o).first;
}

std::pair<Tensor, Tensor> MultiheadAttention::forward(const Tensor& query, const Tensor& key, const Tensor& value,
                                                      const MhaForwardOptions& o) {
  GRAFT_CHECK(query.defined() && key.defined() && value.defined(), kOp, ": query, key and value must be defined");
  GRAFT_CHECK(query.dim() == key.dim() && key.dim() == value.dim() && (query.dim() == 2 || query.dim() == 3), kOp,
              ": expected query, key and value all 3-D (batched) or all 2-D (unbatched), got query ",
              describe(query), ", key ", describe(key), ", value ", describe(value));
  const bool batched = query.dim() == 3;
  GRAFT_CHECK(query.size(-1) == embed_dim && key.size(-1) == embed_dim && value.size(-1) == embed_dim, kOp,
              ": query, key and value must have embed_dim ", embed_dim, " features, got query ", describe(query),
              ", key ", describe(key), ", value ", describe(value));
  // To [N, L, E].
  auto to_nle = [&](const Tensor& t) {
    if (!batched) return t.unsqueeze(0);
    return options.batch_first ? t : t.transpose(0, 1);
  };
  Tensor q = to_nle(query), k = to_nle(key), v = to_nle(value);
  const int64_t N = q.size(0), L = q.size(1), S = k.size(1), H = num_heads, D = head_dim;
  GRAFT_CHECK(k.size(0) == N && v.size(0) == N && v.size(1) == S, kOp,
              ": key and value must have query's batch size and the same length, got query ", describe(query),
              ", key ", describe(key), ", value ", describe(value));

  // Projections: one matmul when it is self-attention, else one per input with the weight's rows.
  Tensor qp, kp, vp;
  if (query.is_same(key) && key.is_same(value)) {
    // [N, L, 3E] split in three views; split's backward is one cat (narrow's would be three
    // zero-filled buffers and copies).
    std::vector<Tensor> qkv = graft::split(graft::linear(q, in_proj_weight, in_proj_bias), embed_dim, -1);
    qp = qkv[0];
    kp = qkv[1];
    vp = qkv[2];
  } else {
    auto rows = [&](const Tensor& t, int64_t i) { return t.defined() ? t.narrow(0, i * embed_dim, embed_dim) : Tensor(); };
    qp = graft::linear(q, rows(in_proj_weight, 0), rows(in_proj_bias, 0));
    kp = graft::linear(k, rows(in_proj_weight, 1), rows(in_proj_bias, 1));
    vp = graft::linear(v, rows(in_proj_weight, 2), rows(in_proj_bias, 2));
  }
  // [N, T, E] -> [N, H, T, D]: a view; the attention kernel reads the strided rows in place.
  auto heads = [&](const Tensor& t, int64_t T) { return t.view({N, T, H, D}).transpose(1, 2); };
  Tensor qh = heads(qp, L), kh = heads(kp, S), vh = heads(vp, S);

  // One additive mask broadcast to [N, H or 1, L, S].
  DType dt = q.dtype();
  Tensor mask;
  bool causal = false;
  if (o.is_causal)
    GRAFT_CHECK(o.attn_mask.defined(), kOp,
                ": is_causal is a hint that attn_mask is the causal mask; attn_mask must be given with it");
  if (o.attn_mask.defined()) {
    const Tensor& m = o.attn_mask;
    bool ok2 = m.dim() == 2 && m.size(0) == L && m.size(1) == S;
    bool ok3 = m.dim() == 3 && m.size(0) == N * H && m.size(1) == L && m.size(2) == S;
    GRAFT_CHECK(ok2 || ok3, kOp, ": attn_mask must be [L, S] = [", L, ", ", S, "] or [N * num_heads, L, S] = [",
                N * H, ", ", L, ", ", S, "], got ", describe(m));
    if (o.is_causal && !o.key_padding_mask.defined() && !o.need_weights) {
      causal = true;  // the fused kernel's own causal masking replaces the mask
    } else {
      mask = additive(m, dt);
      if (ok3) mask = mask.view({N, H, L, S});
    }
  }
  if (o.key_padding_mask.defined()) {
    const Tensor& m = o.key_padding_mask;
    GRAFT_CHECK((batched && m.dim() == 2 && m.size(0) == N && m.size(1) == S) || (!batched && m.dim() == 1 && m.size(0) == S),
                kOp, ": key_padding_mask must be [N, S] = [", N, ", ", S, "] (or [S] unbatched), got ", describe(m));
    Tensor kpm = additive(m, dt).view({N, 1, 1, S});
    mask = mask.defined() ? mask + kpm : kpm;
  }
  const double p = is_training() ? options.dropout : 0.0;

  Tensor out, weights;  // out [N, H, L, D]
  if (!o.need_weights) {
    out = scaled_dot_product_attention(qh, kh, vh, mask, p, causal);
  } else {
    Tensor s = graft::matmul(qh, kh.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(D)));
    if (mask.defined()) s = s + mask;
    Tensor w = graft::softmax(s, -1);  // [N, H, L, S]
    out = graft::matmul(functional::dropout(w, p, true), vh);
    weights = o.average_attn_weights ? w.mean({1}) : w;
    if (!batched) weights = weights.squeeze(0);
  }
  Tensor y = (*out_proj)(out.transpose(1, 2).reshape({N, L, embed_dim}));  // [N, L, E]
  if (!batched)
    y = y.squeeze(0);
  else if (!options.batch_first)
    y = y.transpose(0, 1);
  return {y, weights};
}

}  // namespace graft::nn
