// The public functions declared `composite` in codegen/ops/{linalg,conv_pool,softmax_loss}.yaml:
// each is written with differentiable graft:: ops (so its gradient, and every higher order,
// follows from theirs), taking the registered op's one-kernel path when no gradient is needed.
// Those with an `autocast:` policy open with the cast the generator writes for the others
// (autograd/autocast.h).
#include "autograd/autocast_policies.h"
#include "autograd/derivatives.h"
#include "ops/conv_pool_params.h"

namespace graft {
using namespace autograd;

// torch.matmul semantics, built from mm/bmm and views.
Tensor matmul(const Tensor& a, const Tensor& b) {
  if (autocast::detail::active()) [[unlikely]] {
    autocast::detail::OpCast cast_("matmul", autocast::policies::matmul, {&a, &b});
    if (cast_) return graft::matmul(cast_(a), cast_(b));
  }
  GRAFT_CHECK(a.defined() && b.defined(), "matmul: undefined tensor argument");
  GRAFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  bool needs_grad = is_recording_enabled() && (tensor_requires_grad(a) || tensor_requires_grad(b));
  if (!needs_grad) return ops::matmul(a, b);  // one kernel call, no intermediate views
  int64_t da = a.dim(), db = b.dim();
  if (da == 1 && db == 1) {
    GRAFT_CHECK(a.size(0) == b.size(0), "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                " cannot be multiplied (", a.size(0), " != ", b.size(0), ")");
    return graft::sum(a * b);
  }
  if (da == 2 && db == 2) return graft::mm(a, b);
  if (da == 1 && db == 2) return graft::squeeze(graft::mm(graft::unsqueeze(a, 0), b), 0);
  if (da == 2 && db == 1) return graft::squeeze(graft::mm(a, graft::unsqueeze(b, 1)), 1);
  if (db <= 2 && da >= 3) {
    // Fold a's batch dims into its rows: one mm instead of a batched product.
    Tensor b2 = db == 1 ? graft::unsqueeze(b, 1) : b;
    Shape out = a.sizes();
    out.back() = b2.size(1);
    GRAFT_CHECK(a.size(-1) == b2.size(0), "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                " cannot be multiplied (", a.size(-1), " != ", b2.size(0), ")");
    Tensor y = graft::reshape(graft::mm(graft::reshape(a, {-1, a.size(-1)}), b2), out);
    return db == 1 ? graft::squeeze(y, -1) : y;
  }
  // General batched case: broadcast the batch dims, then bmm.
  Tensor a3 = da == 1 ? graft::unsqueeze(a, 0) : a;
  Tensor b3 = db == 1 ? graft::unsqueeze(b, 1) : b;
  int64_t n = a3.size(-2), k = a3.size(-1), k2 = b3.size(-2), m = b3.size(-1);
  GRAFT_CHECK(k == k2, "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " cannot be multiplied (", k, " != ", k2, ")");
  Shape ba(a3.sizes().begin(), a3.sizes().end() - 2), bb(b3.sizes().begin(), b3.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  int64_t B = shape_numel(batch);
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {n, k});
  eb.insert(eb.end(), {k, m});
  Tensor y = bmm(graft::reshape(graft::expand(a3, ea), {B, n, k}), graft::reshape(graft::expand(b3, eb), {B, k, m}));
  Shape out = batch;
  if (da > 1) out.push_back(n);
  if (db > 1) out.push_back(m);
  return graft::reshape(y, out);
}

Tensor max_pool2d(const Tensor& in, const Shape& k, const Shape& s, const Shape& p, const Shape& d, bool c) {
  bool needs_grad = is_recording_enabled() && tensor_requires_grad(in);
  if (!needs_grad) return ops::max_pool2d(in, k, s, p, d, c);
  // The node saves one byte per output (the winner's window offset) where a window has at most
  // 256 positions, eight (an int64 index) otherwise.
  if (kernels::max_pool_offsets_fit(k)) return graft::_max_pool2d_with_offsets(in, k, s, p, d, c)[0];
  return graft::max_pool2d_with_indices(in, k, s, p, d, c)[0];
}

// cross_entropy = nll_loss(log_softmax(x)), plus PyTorch's label smoothing term; composed from
// differentiable ops so every order of derivative is exact.
Tensor cross_entropy(const Tensor& x, const Tensor& t, const Tensor& w, Option<LossReduction> reduction, int64_t ii,
                     double ls) {
  if (autocast::detail::active()) [[unlikely]] {
    autocast::detail::OpCast cast_("cross_entropy", autocast::policies::cross_entropy, {&x, &t, &w});
    if (cast_) return graft::cross_entropy(cast_(x), cast_(t), cast_(w), reduction, ii, ls);
  }
  const LossReduction r = reduction.value("cross_entropy");
  GRAFT_CHECK(ls >= 0 && ls <= 1, "cross_entropy: label_smoothing must be between 0.0 and 1.0, got ", ls);
  GRAFT_CHECK(x.dim() >= 1, "cross_entropy: expected input with at least 1 dimension, got ", describe(x));
  int64_t cdim = x.dim() == 1 ? 0 : 1;
  Tensor lp = graft::log_softmax(x, cdim);
  Tensor nll = graft::nll_loss(lp, t, w, r, ii);
  if (ls == 0) return nll;
  int64_t classes = x.size(cdim);
  Tensor wlp = lp;
  if (w.defined()) {
    Shape wshape(static_cast<size_t>(x.dim()), 1);
    wshape[cdim] = classes;
    wlp = lp * graft::reshape(w, wshape);
  }
  Tensor smooth = -graft::sum(wlp, {cdim});  // per sample
  Tensor ignored = ops::eq(t, ii);
  smooth = graft::masked_fill(smooth, ignored, 0);
  Tensor reduced;
  if (r == LossReduction::None) {
    reduced = smooth;
  } else if (r == LossReduction::Sum) {
    reduced = graft::sum(smooth);
  } else {
    Tensor keep = ops::logical_not(ignored);
    Tensor denom;
    if (w.defined()) {
      Tensor safe_t = ops::masked_fill(t, ignored, 0);
      denom = ops::sum(ops::mul(ops::embedding(ops::reshape(w, {-1, 1}), safe_t).squeeze(-1),
                                ops::to_dtype(keep, w.dtype())));
    } else {
      denom = ops::sum(ops::to_dtype(keep, x.dtype()));
    }
    reduced = graft::sum(smooth) / denom;
  }
  return nll * (1 - ls) + reduced * (ls / static_cast<double>(classes));
}

// mse_loss = reduce((a - b)^2), composed so it is differentiable to any order.
Tensor mse_loss(const Tensor& a, const Tensor& b, Option<LossReduction> reduction) {
  if (autocast::detail::active()) [[unlikely]] {
    autocast::detail::OpCast cast_("mse_loss", autocast::policies::mse_loss, {&a, &b});
    if (cast_) return graft::mse_loss(cast_(a), cast_(b), reduction);
  }
  const LossReduction r = reduction.value("mse_loss");
  GRAFT_CHECK(a.sizes() == b.sizes(), "mse_loss: input shape ", shape_str(a.sizes()),
              " and target shape ", shape_str(b.sizes()), " must match");
  Tensor d = a - b;
  Tensor sq = d * d;
  if (r == LossReduction::None) return sq;
  return r == LossReduction::Sum ? graft::sum(sq) : graft::mean(sq);
}

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& w, const Tensor& b, double eps) {
  if (autocast::detail::active()) [[unlikely]] {
    autocast::detail::OpCast cast_("layer_norm", autocast::policies::layer_norm, {&x, &w, &b});
    if (cast_) return graft::layer_norm(cast_(x), normalized_shape, cast_(w), cast_(b), eps);
  }
  return graft::native_layer_norm(x, normalized_shape, w, b, eps)[0];
}

}  // namespace graft
