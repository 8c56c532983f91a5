// graft:: reductions, softmax, losses and layer norm (declared in functional.h), each with its
// derivative rule. Notation: x input, y output, g grad;
// g_k is g with the reduced dims re-inserted (size 1) so it broadcasts over x.
#include <cmath>
#include <limits>

#include "autograd/rules.h"

namespace graft {
using namespace autograd;
using namespace autograd::rules;

namespace {

// Reductions over `dims` (already wrapped and sorted by reduced_dims): sum, mean, amax/amin,
// max()/min(), logsumexp. x and y are saved only by the rules that read them.
struct ReductionSaved {
  Shape dims;
  bool keepdim = false;
  SavedVariable x, y;
};
// var (x) and std (x, y): `correction` is subtracted from the reduced element count.
struct VarSaved {
  Shape dims;
  bool keepdim = false;
  double correction = 0;
  SavedVariable x, y;
};
struct NormSaved {
  Shape dims;
  bool keepdim = false;
  double p = 2;
  SavedVariable x, y;
};
// max(dim)/min(dim): `dim` is wrapped; `indices` is the op's argmax/argmin output.
struct ExtremumDimSaved {
  int64_t dim = 0;
  bool keepdim = false;
  SavedVariable indices;
};
// softmax/log_softmax: `dim` is wrapped; `y` is the op's output.
struct SoftmaxSaved {
  int64_t dim = 0;
  SavedVariable y;
};
struct NllLossSaved {
  std::string reduction;
  int64_t ignore_index = -100;
  SavedVariable log_probs, target, weight;
};
// mean and rstd are the forward's statistics (outputs 1 and 2 of ops::layer_norm).
struct LayerNormSaved {
  Shape normalized_shape;
  SavedVariable x, weight, bias, mean, rstd;
};

int64_t ndim_in(const OpNode& n) { return static_cast<int64_t>(n.inputs[0].shape.size()); }
// g_k: `g` with the reduced dims re-inserted; Saved is any struct with `dims` and `keepdim`.
template <class Saved>
Tensor gk(const OpNode& n, const Saved& s, const Tensor& g) {
  return unsqueeze_reduced(g, s.dims, ndim_in(n), s.keepdim);
}

// ---------------- the table ----------------
variable_list d_sum(OpNode& n, ReductionSaved& s, const variable_list& g) {  // dx = expand(g_k)
  return {graft::expand(gk(n, s, g[0]), n.inputs[0].shape)};
}
variable_list d_mean(OpNode& n, ReductionSaved& s, const variable_list& g) {  // dx = expand(g_k) / N
  double count = static_cast<double>(reduced_count(n.inputs[0].shape, s.dims));
  return {graft::expand(gk(n, s, g[0]), n.inputs[0].shape) / count};
}
// amax/amin/max()/min(): the gradient is shared evenly by the elements equal to the extremum.
variable_list d_extremum(OpNode& n, ReductionSaved& s, const variable_list& g) {  // x, y
  Tensor x = n.unpack(s.x), yk = gk(n, s, n.unpack(s.y));
  Tensor mask = graft::to(ops::eq(x, yk), x.dtype());
  Tensor count = graft::sum(mask, s.dims.empty() ? reduced_dims({}, x.dim()) : s.dims, true);
  return {gk(n, s, g[0]) * mask / count};
}
// max(dim)/min(dim): scatter g back to the saved indices of the extremum.
variable_list d_max_dim(OpNode& n, ExtremumDimSaved& s, const variable_list& g) {
  int64_t dim = s.dim;
  Tensor idx = n.unpack(s.indices);
  Tensor gkk = g[0], ik = idx;
  if (!s.keepdim) {
    gkk = graft::unsqueeze(gkk, dim);
    ik = ops::unsqueeze(ik, dim);
  }
  return {graft::scatter_add(zeros_of(n.inputs[0]), dim, ik, gkk)};
}
variable_list d_var(OpNode& n, VarSaved& s, const variable_list& g) {  // x: g_k * 2 (x - mean) / (N - c)
  Tensor x = n.unpack(s.x);
  double denom = static_cast<double>(reduced_count(x.sizes(), s.dims)) - s.correction;
  Tensor mean = graft::mean(x, s.dims.empty() ? reduced_dims({}, x.dim()) : s.dims, true);
  return {gk(n, s, g[0]) * (x - mean) * (2.0 / denom)};
}
variable_list d_std(OpNode& n, VarSaved& s, const variable_list& g) {  // x, y: g_k (x - mean) / (y_k (N - c))
  Tensor x = n.unpack(s.x), yk = gk(n, s, n.unpack(s.y));
  double denom = static_cast<double>(reduced_count(x.sizes(), s.dims)) - s.correction;
  Tensor mean = graft::mean(x, s.dims.empty() ? reduced_dims({}, x.dim()) : s.dims, true);
  return {gk(n, s, g[0]) * (x - mean) / (yk * denom)};
}
variable_list d_norm(OpNode& n, NormSaved& s, const variable_list& g) {  // x, y
  Tensor x = n.unpack(s.x), yk = gk(n, s, n.unpack(s.y)), g_k = gk(n, s, g[0]);
  double p = s.p;
  if (p == 0) return {graft::zeros_like(x)};
  if (p == 1) return {g_k * graft::sign(x)};
  if (std::isinf(p)) {
    Tensor ax = graft::abs(x);
    Tensor mask = graft::to(ops::eq(ax, yk), x.dtype());
    Tensor count = graft::sum(mask, s.dims.empty() ? reduced_dims({}, x.dim()) : s.dims, true);
    return {g_k * graft::sign(x) * mask / count};
  }
  Tensor safe = graft::where(ops::eq(yk, 0), graft::ones_like(yk), yk);
  if (p == 2) return {graft::where(ops::eq(yk, 0), graft::zeros_like(x), g_k * x / safe)};
  Tensor num = x * graft::pow(graft::abs(x), p - 2);
  return {graft::where(ops::eq(yk, 0), graft::zeros_like(x), g_k * num / graft::pow(safe, p - 1))};
}
variable_list d_logsumexp(OpNode& n, ReductionSaved& s, const variable_list& g) {  // x, y: g_k * exp(x - y_k)
  Tensor x = n.unpack(s.x), yk = gk(n, s, n.unpack(s.y));
  return {gk(n, s, g[0]) * graft::exp(x - yk)};
}
variable_list d_softmax(OpNode& n, SoftmaxSaved& s, const variable_list& g) {  // y: y * (g - sum(g*y, dim))
  Tensor y = n.unpack(s.y);
  int64_t dim = s.dim;
  if (!building_graph()) return {ops::softmax_backward(g[0], y, dim)};
  return {y * (g[0] - graft::sum(g[0] * y, {dim}, true))};
}
variable_list d_log_softmax(OpNode& n, SoftmaxSaved& s, const variable_list& g) {  // y: g - exp(y) * sum(g, dim)
  Tensor y = n.unpack(s.y);
  int64_t dim = s.dim;
  if (!building_graph()) return {ops::log_softmax_backward(g[0], y, dim)};
  return {g[0] - graft::exp(y) * graft::sum(g[0], {dim}, true)};
}
// nll_loss is linear in log_probs: its gradient is a fixed pattern M (-w[t]/denominator at each
// target) scaled by g, so it stays differentiable in g for higher orders.
variable_list d_nll_loss(OpNode& n, NllLossSaved& s, const variable_list& g) {  // log_probs, target, weight
  Tensor lp = n.unpack(s.log_probs), target = n.unpack(s.target), weight = n.unpack(s.weight);
  Tensor ones = ops::ones(g[0].sizes(), g[0].dtype(), g[0].device());
  Tensor m = ops::nll_loss_backward(ones, lp, target, weight, s.reduction, s.ignore_index);
  Tensor gb = g[0];
  if (s.reduction == "none" && lp.dim() >= 2) gb = graft::unsqueeze(gb, 1);
  return {m * gb, Tensor(), Tensor()};
}
variable_list d_layer_norm(OpNode& n, LayerNormSaved& s, const variable_list& g) {  // x, weight, bias, mean, rstd
  Tensor x = n.unpack(s.x), w = n.unpack(s.weight), b = n.unpack(s.bias), mean = n.unpack(s.mean),
         rstd = n.unpack(s.rstd);
  auto r = ops::layer_norm_backward(g[0], x, s.normalized_shape, mean, rstd, w, b);
  if (building_graph())
    for (auto& t : r) t = mark_not_twice_differentiable(t, "LayerNorm", {&g[0], &x, &w});
  return {n.needs(0) ? r[0] : Tensor(), n.needs(1) ? r[1] : Tensor(), n.needs(2) ? r[2] : Tensor()};
}

// ---------------- forward wrappers ----------------
Tensor reduction(const char* name, Rule<ReductionSaved> fn, const Tensor& x, Tensor y, const Shape& dims,
                 bool keepdim, bool save_x, bool save_y) {
  if (auto n = record_op(name, fn, {&x})) {
    set_output(n, y);
    n->saved.dims = reduced_dims(dims, x.dim());
    n->saved.keepdim = keepdim;
    if (save_x) n->save(n->saved.x, x);
    if (save_y) n->save(n->saved.y, y, true);
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& d, bool k) {
  return reduction("SumBackward", d_sum, x, ops::sum(x, d, k), d, k, false, false);
}
Tensor mean(const Tensor& x, const Shape& d, bool k) {
  return reduction("MeanBackward", d_mean, x, ops::mean(x, d, k), d, k, false, false);
}
Tensor amax(const Tensor& x, const Shape& d, bool k) {
  return reduction("AmaxBackward", d_extremum, x, ops::amax(x, d, k), d, k, true, true);
}
Tensor amin(const Tensor& x, const Shape& d, bool k) {
  return reduction("AminBackward", d_extremum, x, ops::amin(x, d, k), d, k, true, true);
}
Tensor max(const Tensor& x) { return reduction("MaxBackward", d_extremum, x, ops::max(x), {}, false, true, true); }
Tensor min(const Tensor& x) { return reduction("MinBackward", d_extremum, x, ops::min(x), {}, false, true, true); }
static std::vector<Tensor> extremum_dim(const char* name, std::vector<Tensor> r, const Tensor& x, int64_t dim,
                                        bool keepdim) {
  if (auto n = record_op(name, d_max_dim, {&x})) {
    set_output(n, r[0]);
    n->saved.dim = wrap_dim(dim, x.dim(), name);
    n->saved.keepdim = keepdim;
    n->save(n->saved.indices, r[1]);
  }
  return r;
}
std::vector<Tensor> max(const Tensor& x, int64_t d, bool k) { return extremum_dim("MaxBackward", ops::max_dim(x, d, k), x, d, k); }
std::vector<Tensor> min(const Tensor& x, int64_t d, bool k) { return extremum_dim("MinBackward", ops::min_dim(x, d, k), x, d, k); }
Tensor argmax(const Tensor& x, std::optional<int64_t> d, bool k) { return ops::argmax(x, d, k); }
Tensor argmin(const Tensor& x, std::optional<int64_t> d, bool k) { return ops::argmin(x, d, k); }
Tensor var(const Tensor& x, const Shape& d, int64_t c, bool k) {
  Tensor y = ops::var(x, d, c, k);
  if (auto n = record_op("VarBackward", d_var, {&x})) {
    set_output(n, y);
    n->saved.dims = reduced_dims(d, x.dim());
    n->saved.keepdim = k;
    n->saved.correction = static_cast<double>(c);
    n->save(n->saved.x, x);
  }
  return y;
}
Tensor std(const Tensor& x, const Shape& d, int64_t c, bool k) {
  Tensor y = ops::std(x, d, c, k);
  if (auto n = record_op("StdBackward", d_std, {&x})) {
    set_output(n, y);
    n->saved.dims = reduced_dims(d, x.dim());
    n->saved.keepdim = k;
    n->saved.correction = static_cast<double>(c);
    n->save(n->saved.x, x);
    n->save(n->saved.y, y, true);
  }
  return y;
}
Tensor norm(const Tensor& x, double p, const Shape& d, bool k) {
  Tensor y = ops::norm(x, p, d, k);
  if (auto n = record_op("NormBackward", d_norm, {&x})) {
    set_output(n, y);
    n->saved.dims = reduced_dims(d, x.dim());
    n->saved.keepdim = k;
    n->saved.p = p;
    n->save(n->saved.x, x);
    n->save(n->saved.y, y, true);
  }
  return y;
}
Tensor logsumexp(const Tensor& x, const Shape& d, bool k) {
  return reduction("LogsumexpBackward", d_logsumexp, x, ops::logsumexp(x, d, k), d, k, true, true);
}

Tensor softmax(const Tensor& x, int64_t dim) {
  Tensor y = ops::softmax(x, dim);
  if (auto n = record_op("SoftmaxBackward", d_softmax, {&x})) {
    set_output(n, y);
    n->saved.dim = wrap_dim(dim, x.dim(), "softmax");
    n->save(n->saved.y, y, true);
  }
  return y;
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  Tensor y = ops::log_softmax(x, dim);
  if (auto n = record_op("LogSoftmaxBackward", d_log_softmax, {&x})) {
    set_output(n, y);
    n->saved.dim = wrap_dim(dim, x.dim(), "log_softmax");
    n->save(n->saved.y, y, true);
  }
  return y;
}

Tensor nll_loss(const Tensor& lp, const Tensor& t, const Tensor& w, const std::string& r, int64_t ii) {
  Tensor y = ops::nll_loss(lp, t, w, r, ii);
  if (auto n = record_op("NllLossBackward", d_nll_loss, {&lp, &t, &w})) {
    set_output(n, y);
    n->save(n->saved.log_probs, lp);
    n->save(n->saved.target, t);
    n->save(n->saved.weight, w);
    n->saved.reduction = r;
    n->saved.ignore_index = ii;
  }
  return y;
}

// cross_entropy = nll_loss(log_softmax(x)), plus PyTorch's label smoothing term; composed from
// differentiable ops so every order of derivative is exact.
Tensor cross_entropy(const Tensor& x, const Tensor& t, const Tensor& w, const std::string& r, int64_t ii, double ls) {
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
  if (r == "none") {
    reduced = smooth;
  } else if (r == "sum") {
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
Tensor mse_loss(const Tensor& a, const Tensor& b, const std::string& r) {
  GRAFT_CHECK(a.sizes() == b.sizes(), "mse_loss: input shape ", shape_str(a.sizes()),
              " and target shape ", shape_str(b.sizes()), " must match");
  GRAFT_CHECK(r == "mean" || r == "sum" || r == "none", "mse_loss: unknown reduction '", r,
              "' (expected mean, sum or none)");
  Tensor d = a - b;
  Tensor sq = d * d;
  if (r == "none") return sq;
  return r == "sum" ? graft::sum(sq) : graft::mean(sq);
}

Tensor layer_norm(const Tensor& x, const Shape& ns, const Tensor& w, const Tensor& b, double eps) {
  auto r = ops::layer_norm(x, ns, w, b, eps);
  if (auto n = record_op("NativeLayerNormBackward", d_layer_norm, {&x, &w, &b})) {
    set_output(n, r[0]);
    n->saved.normalized_shape = ns;
    n->save(n->saved.x, x);
    n->save(n->saved.weight, w);
    n->save(n->saved.bias, b);
    n->save(n->saved.mean, r[1]);
    n->save(n->saved.rstd, r[2]);
  }
  return r[0];
}

}  // namespace graft
