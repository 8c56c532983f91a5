// graft::scaled_dot_product_attention (declared in functional.h): the fused kernel with its rule,
// and the composition (matmul, softmax, matmul) it is checked against.
//
//   s = scale * q k^T + mask            [..., L, S]
//   p = softmax(s) over S (0 for a row no key may attend to, as PyTorch's _safe_softmax)
//   out = dropout(p) v                  [..., L, Ev]
// Derivatives (D = rowsum(dp * p)):
//   dv = p^T g;  dp = g v^T;  ds = p * (dp - D);  dq = scale * ds k;  dk = scale * ds^T q
#include <cmath>
#include <limits>

#include "autograd/autocast_policies.h"
#include "autograd/derivatives.h"
#include "runtime/dispatcher.h"

namespace graft {
using namespace autograd;
using namespace autograd::rules;

namespace {

thread_local SdpaBackend t_backend = SdpaBackend::Auto;

Tensor transpose_last(const Tensor& t) { return graft::transpose(t, -2, -1); }

// Bool [L, S], true where key j may be seen by query i (j <= i: top-left aligned, as PyTorch).
Tensor causal_mask(int64_t L, int64_t S, Device device) {
  Tensor i = ops::arange(0, static_cast<double>(L), 1, kInt64, device).view({L, 1});
  Tensor j = ops::arange(0, static_cast<double>(S), 1, kInt64, device).view({1, S});
  return ops::le(j, i);
}

// p = softmax(scale * q k^T + mask) with rows that see no key set to 0, differentiable in q and k
// (and in an additive mask).
Tensor attention_weights(const Tensor& q, const Tensor& k, const Tensor& mask, bool causal, double scale) {
  Tensor s = graft::mul(graft::matmul(q, transpose_last(k)), scale);
  bool may_mask_rows = false;
  if (causal) s = graft::masked_fill(s, ops::logical_not(causal_mask(q.size(-2), k.size(-2), q.device())),
                                     -std::numeric_limits<double>::infinity());
  if (mask.defined()) {
    may_mask_rows = true;
    if (mask.dtype() == kBool)
      s = graft::masked_fill(s, ops::logical_not(mask), -std::numeric_limits<double>::infinity());
    else
      s = graft::add(s, mask);
  }
  if (!may_mask_rows) return graft::softmax(s, -1);
  Tensor dead;  // [..., L, 1]: rows whose every score is -inf
  {
    NoGradGuard ng;
    dead = ops::eq(ops::amax(s, {-1}, true), -std::numeric_limits<double>::infinity());
  }
  // Finite scores in dead rows keep softmax (and its gradient) free of NaN; the rows are zeroed after.
  Tensor p = graft::softmax(graft::masked_fill(s, dead, 0.0), -1);
  return graft::masked_fill(p, dead, 0.0);
}

double default_scale(const Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

bool has_flash_kernel(const Device& d) {
  static const Op& op = op_handle("_sdpa_flash");
  return op.kernels[static_cast<size_t>(d.type)] != nullptr;
}

}  // namespace

// _sdpa_flash's rule (codegen/ops/attention.yaml): the fused backward kernel, or under create_graph
// the gradients as differentiable ops, so a second backward differentiates them again.
variable_list rules::sdpa_flash_backward_rule(const Tensor& g, const Tensor& q, const Tensor& k, const Tensor& v,
                                              const Tensor& out, const Tensor& lse, const Tensor& mask, bool causal,
                                              double scale, const std::array<bool, 3>& needs) {
  variable_list r;
  if (building_graph()) {
    Tensor p = attention_weights(q, k, mask, causal, scale);
    Tensor dv = graft::matmul(transpose_last(p), g);
    Tensor dp = graft::matmul(g, transpose_last(v));
    Tensor ds = graft::mul(p, graft::sub(dp, graft::sum(graft::mul(dp, p), {-1}, true)));
    Tensor dq = graft::mul(graft::matmul(ds, k), scale);
    Tensor dk = graft::mul(graft::matmul(transpose_last(ds), q), scale);
    r = {dq, dk, dv};
  } else {
    r = ops::_sdpa_flash_backward(g, q, k, v, out, lse, mask, causal, scale);
  }
  const Tensor* in[3] = {&q, &k, &v};
  for (size_t i = 0; i < 3; ++i)
    r[i] = needs[i] ? (r[i].sizes() == in[i]->sizes() ? r[i] : graft::sum_to(r[i], in[i]->sizes())) : Tensor();
  return r;
}

SdpaBackend sdpa_backend() { return t_backend; }
SdpaBackendGuard::SdpaBackendGuard(SdpaBackend backend) : prev_(t_backend) { t_backend = backend; }
SdpaBackendGuard::~SdpaBackendGuard() { t_backend = prev_; }

Tensor scaled_dot_product_attention_math(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                         double dropout_p, bool is_causal, std::optional<double> scale) {
  const char* op = "scaled_dot_product_attention";
  GRAFT_CHECK(dropout_p >= 0 && dropout_p <= 1, op, ": dropout_p must be in [0, 1], got ", dropout_p);
  GRAFT_CHECK(q.defined() && k.defined() && v.defined() && q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
              ": query, key and value need at least 2 dims ([..., L, E]), got query ", describe(q), ", key ",
              describe(k), ", value ", describe(v));
  GRAFT_CHECK(!(is_causal && attn_mask.defined()), op, ": an explicit attn_mask must not be set when is_causal=true");
  if (attn_mask.defined())
    GRAFT_CHECK(attn_mask.dtype() == kBool || attn_mask.dtype() == q.dtype(), op,
                ": attn_mask must be bool or query's dtype ", q.dtype(), ", got ", describe(attn_mask));
  Tensor p = attention_weights(q, k, attn_mask, is_causal, default_scale(q, scale));
  if (dropout_p > 0) {
    Tensor keep;
    {
      NoGradGuard ng;
      keep = ops::empty_like(p);
      if (dropout_p == 1) {
        ops::zero_(keep);
      } else {
        ops::bernoulli_(keep, 1 - dropout_p);
        ops::div_(keep, 1 - dropout_p);
      }
    }
    p = graft::mul(p, keep);
  }
  return graft::matmul(p, v);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                    double dropout_p, bool is_causal, std::optional<double> scale) {
  if (autocast::detail::active()) [[unlikely]] {
    autocast::detail::OpCast cast_("scaled_dot_product_attention", autocast::policies::scaled_dot_product_attention,
                                   {&q, &k, &v, &attn_mask});
    if (cast_) return graft::scaled_dot_product_attention(cast_(q), cast_(k), cast_(v), cast_(attn_mask), dropout_p,
                                                          is_causal, scale);
  }
  const char* op = "scaled_dot_product_attention";
  GRAFT_CHECK(!(is_causal && attn_mask.defined()), op, ": an explicit attn_mask must not be set when is_causal=true");
  SdpaBackend b = t_backend;
  // What the fused kernel cannot do: dropout, a gradient for the mask, dtypes without a kernel.
  const char* why_not = nullptr;
  if (dropout_p > 0)
    why_not = "dropout_p > 0";
  else if (attn_mask.defined() && attn_mask.requires_grad() && is_recording_enabled())
    why_not = "an attn_mask that requires grad";
  else if (q.defined() && !has_flash_kernel(q.device()))
    why_not = "no fused kernel on this device";
  if (b == SdpaBackend::Math || (b == SdpaBackend::Auto && why_not))
    return scaled_dot_product_attention_math(q, k, v, attn_mask, dropout_p, is_causal, scale);
  GRAFT_CHECK(!why_not, op, ": the flash backend was requested but cannot run: ", why_not);
  GRAFT_CHECK(q.defined() && q.dim() >= 1, op, ": query is undefined or 0-d");
  return graft::_sdpa_flash(q, k, v, attn_mask, is_causal, default_scale(q, scale))[0];
}

}  // namespace graft
