// Checks and geometry shared by the CPU and CUDA fused attention kernels (sdpa_plan.h).
#include "ops/sdpa_plan.h"

#include <algorithm>

#include "ops/kernel_utils.h"

namespace graft::kernels {
namespace {

Shape batch_of(const Tensor& t) { return Shape(t.sizes().begin(), t.sizes().end() - 2); }

}  // namespace

// Missing or size-1 dims read the same matrix.
std::vector<int64_t> sdpa_batch_offsets(const Tensor& t, const Shape& batch) {
  size_t nb = batch.size(), own = static_cast<size_t>(t.dim()) - 2;
  Shape strides(nb, 0);
  for (size_t d = 0; d < own; ++d) {
    size_t bd = nb - own + d;
    strides[bd] = t.size(static_cast<int64_t>(d)) == 1 ? 0 : t.stride(static_cast<int64_t>(d));
  }
  std::vector<int64_t> off;
  off.reserve(static_cast<size_t>(shape_numel(batch)));
  for_each_offset(batch, strides, [&](int64_t o) { off.push_back(o); });
  return off;
}

Shape sdpa_out_strides(const Tensor& q, const Shape& out_sizes) {
  const int64_t nd = static_cast<int64_t>(out_sizes.size());
  Shape contiguous = contiguous_strides(out_sizes);
  if (q.dim() != nd) return contiguous;
  for (int64_t d = 0; d + 1 < nd; ++d)
    if (q.size(d) != out_sizes[static_cast<size_t>(d)] || q.stride(d) <= 0) return contiguous;
  // Dims other than the last, outermost first by q's strides (ties keep the logical order).
  std::vector<int64_t> order;
  for (int64_t d = 0; d + 1 < nd; ++d) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return q.stride(a) > q.stride(b); });
  Shape strides(static_cast<size_t>(nd));
  int64_t running = out_sizes.back();
  strides.back() = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[static_cast<size_t>(*it)] = running;
    running *= out_sizes[static_cast<size_t>(*it)];
  }
  return strides;
}

Shape SdpaGeometry::out_sizes() const {
  Shape s = batch;
  s.push_back(L);
  s.push_back(Ev);
  return s;
}
Shape SdpaGeometry::lse_sizes() const {
  Shape s = batch;
  s.push_back(L);
  return s;
}

SdpaGeometry plan_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const char* op) {
  check_defined(q, op, "query");
  check_defined(k, op, "key");
  check_defined(v, op, "value");
  GRAFT_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2, op,
              ": query, key and value need at least 2 dims ([..., L, E]), got query ", describe(q), ", key ",
              describe(k), ", value ", describe(v));
  check_floating(q, op);
  GRAFT_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(), op,
              ": query, key and value must have the same dtype, got query ", describe(q), ", key ", describe(k),
              ", value ", describe(v));
  GRAFT_CHECK(k.device() == q.device() && v.device() == q.device(), op,
              ": query, key and value must be on one device, got query ", describe(q), ", key ", describe(k),
              ", value ", describe(v));
  GRAFT_CHECK(k.size(-1) == q.size(-1), op, ": key's last dim (E) must equal query's, got query ", describe(q),
              " and key ", describe(k));
  GRAFT_CHECK(v.size(-2) == k.size(-2), op, ": value must have as many rows (S) as key, got key ", describe(k),
              " and value ", describe(v));
  SdpaGeometry g;
  g.batch = broadcast_shapes(broadcast_shapes(batch_of(q), batch_of(k), op), batch_of(v), op);
  g.B = shape_numel(g.batch);
  g.L = q.size(-2);
  g.S = k.size(-2);
  g.E = q.size(-1);
  g.Ev = v.size(-1);
  for (const Tensor* t : {&q, &k, &v})
    GRAFT_CHECK(!sdpa_operand_needs_copy(*t), op, ": internal: operand ", describe(*t), " has non-unit row stride");
  g.q_off = sdpa_batch_offsets(q, g.batch);
  g.k_off = sdpa_batch_offsets(k, g.batch);
  g.v_off = sdpa_batch_offsets(v, g.batch);
  g.q_rs = q.stride(-2);
  g.k_rs = k.stride(-2);
  g.v_rs = v.stride(-2);
  if (mask.defined()) {
    GRAFT_CHECK(mask.device() == q.device(), op, ": attn_mask ", describe(mask), " must be on query's device ",
                q.device());
    GRAFT_CHECK(mask.dtype() == kBool || mask.dtype() == q.dtype(), op, ": attn_mask must be bool or query's dtype ",
                q.dtype(), ", got ", describe(mask));
    g.mask = mask.dtype() == kBool ? SdpaMask::Bool : SdpaMask::Additive;
    Shape full = g.batch;
    full.push_back(g.L);
    full.push_back(g.S);
    bool ok = mask.dim() >= 2 && mask.dim() <= static_cast<int64_t>(full.size());
    for (int64_t d = 1; ok && d <= mask.dim(); ++d) {
      int64_t ms = mask.size(-d), fs = full[full.size() - static_cast<size_t>(d)];
      ok = ms == fs || ms == 1;
    }
    GRAFT_CHECK(ok, op, ": attn_mask ", describe(mask), " does not broadcast to the attention shape ",
                shape_str(full), " (batch..., L, S)");
    g.m_off = sdpa_batch_offsets(mask, g.batch);
    g.m_rs = mask.size(-2) == 1 ? 0 : mask.stride(-2);
    g.m_cs = mask.size(-1) == 1 ? 0 : mask.stride(-1);
  }
  return g;
}

SdpaGeometry plan_sdpa_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& out, const Tensor& lse, const Tensor& mask, const char* op) {
  SdpaGeometry g = plan_sdpa(q, k, v, mask, op);
  check_defined(grad_out, op, "grad_out");
  GRAFT_CHECK(grad_out.sizes() == g.out_sizes() && out.sizes() == g.out_sizes(), op, ": grad_out ",
              describe(grad_out), " and out ", describe(out), " must have the output's shape ",
              shape_str(g.out_sizes()));
  GRAFT_CHECK(lse.sizes() == g.lse_sizes(), op, ": lse ", describe(lse), " must have shape ", shape_str(g.lse_sizes()));
  for (const Tensor* t : {&grad_out, &out})
    GRAFT_CHECK(t->dtype() == q.dtype() && t->device() == q.device(), op, ": ", describe(*t),
                " must have query's dtype and device (", describe(q), ")");
  // A 16-bit forward that ran through the float fallback (CUDA) hands back a 16-bit lse.
  GRAFT_CHECK((lse.dtype() == sdpa_lse_dtype(q.dtype()) || lse.dtype() == q.dtype()) && lse.device() == q.device(), op,
              ": lse ", describe(lse), " must be ", sdpa_lse_dtype(q.dtype()), " on query's device (", describe(q), ")");
  return g;
}

}  // namespace graft::kernels
