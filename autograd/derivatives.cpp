// The longer derivative formulas of the op declarations (derivatives.h).
#include "autograd/derivatives.h"

#include "runtime/memory_format.h"

#include <algorithm>

namespace graft::autograd::rules {

Tensor zero_where_not(const Tensor& g, const Tensor& mask) { return graft::where(mask, g, graft::zeros_like(g)); }

Tensor gelu_backward_rule(const Tensor& grad, const Tensor& x, GeluApproximate approximate) {
  if (!building_graph()) return ops::gelu_backward(grad, x, approximate);
  if (approximate == GeluApproximate::Tanh) {
    const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
    Tensor t = graft::tanh((x + x * x * x * c) * k);
    Tensor d = (t + 1) * 0.5 + x * (1 - t * t) * (x * x * (3 * c) + 1) * (0.5 * k);
    return grad * d;
  }
  Tensor cdf = (graft::erf(x * (1.0 / std::numbers::sqrt2)) + 1) * 0.5;
  Tensor pdf = graft::exp(x * x * -0.5) * (1.0 / std::sqrt(2 * std::numbers::pi));
  return grad * (cdf + x * pdf);
}

Tensor pow_scalar_backward(const Tensor& grad, const Tensor& x, const Scalar& exponent) {
  double e = exponent.to_double();
  if (e == 0) return graft::zeros_like(grad);
  return grad * graft::pow(x, e - 1) * e;
}

Tensor scaled(const Tensor& grad, const Scalar& alpha) {
  return alpha.to_double() == 1 ? grad : grad * alpha.to_double();
}

Tensor pow_exponent_backward(const Tensor& grad, const Tensor& a, const Tensor& y) {
  return graft::where(ops::eq(a, 0), graft::zeros_like(y), grad * y * graft::log(a));
}

Tensor extremum_pick_backward(const Tensor& grad, const Tensor& a, const Tensor& b, bool is_max) {
  Tensor half = grad * 0.5, zero = graft::zeros_like(grad);
  Tensor wins = is_max ? ops::gt(a, b) : ops::lt(a, b);
  return graft::where(wins, grad, graft::where(ops::eq(a, b), half, zero));
}

Tensor clamp_mask(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max) {
  Tensor mask = ops::ones(x.sizes(), kBool, x.device());
  if (min) mask = ops::logical_and(mask, ops::ge(x, *min));
  if (max) mask = ops::logical_and(mask, ops::le(x, *max));
  return mask;
}

namespace {
// Sorted, wrapped reduced dims, and g with them re-inserted (size 1) so it broadcasts over x.
Shape all_reduced(const Shape& dim, int64_t ndim) { return reduced_dims(dim, ndim); }
Tensor unreduce(const Tensor& g, const Shape& dim, int64_t ndim, bool keepdim) {
  return unsqueeze_reduced(g, reduced_dims(dim, ndim), ndim, keepdim);
}
int64_t rank(const Shape& sizes) { return static_cast<int64_t>(sizes.size()); }
}  // namespace

Tensor sum_backward(const Tensor& grad, const Shape& sizes, const Shape& dim, bool keepdim) {
  return graft::expand(unreduce(grad, dim, rank(sizes), keepdim), sizes);
}

Tensor mean_backward(const Tensor& grad, const Shape& sizes, const Shape& dim, bool keepdim) {
  double count = static_cast<double>(reduced_count(sizes, reduced_dims(dim, rank(sizes))));
  return sum_backward(grad, sizes, dim, keepdim) / count;
}

Tensor extremum_backward(const Tensor& grad, const Tensor& x, const Tensor& y, const Shape& dim, bool keepdim) {
  Tensor yk = unreduce(y, dim, x.dim(), keepdim);
  Tensor mask = graft::to(ops::eq(x, yk), x.dtype());
  Tensor count = graft::sum(mask, all_reduced(dim, x.dim()), true);
  return unreduce(grad, dim, x.dim(), keepdim) * mask / count;
}

Tensor index_extremum_backward(const Tensor& grad, const Tensor& indices, const TensorMeta& self, int64_t dim,
                               bool keepdim) {
  int64_t d = wrap_dim(dim, rank(self.shape), "max");
  Tensor gk = grad, ik = indices;
  if (!keepdim) {
    gk = graft::unsqueeze(gk, d);
    ik = ops::unsqueeze(ik, d);
  }
  return graft::scatter_add(zeros_of(self), d, ik, gk);
}

// The selected indices are distinct within a row, so scatter_add writes each gradient once, and
// its own derivative (a gather) makes the rule twice differentiable.
Tensor topk_backward(const Tensor& grad, const Tensor& indices, const TensorMeta& self, int64_t dim) {
  if (self.shape.empty()) return grad;  // 0-d: the value is the input itself
  return graft::scatter_add(zeros_of(self), wrap_dim(dim, rank(self.shape), "topk"), indices, grad);
}

Tensor var_backward(const Tensor& grad, const Tensor& x, const Shape& dim, int64_t correction, bool keepdim) {
  Shape dims = all_reduced(dim, x.dim());
  double denom = static_cast<double>(reduced_count(x.sizes(), dims)) - static_cast<double>(correction);
  Tensor mean = graft::mean(x, dims, true);
  return unreduce(grad, dim, x.dim(), keepdim) * (x - mean) * (2.0 / denom);
}

Tensor std_backward(const Tensor& grad, const Tensor& x, const Tensor& y, const Shape& dim, int64_t correction,
                    bool keepdim) {
  Shape dims = all_reduced(dim, x.dim());
  double denom = static_cast<double>(reduced_count(x.sizes(), dims)) - static_cast<double>(correction);
  Tensor mean = graft::mean(x, dims, true);
  return unreduce(grad, dim, x.dim(), keepdim) * (x - mean) / (unreduce(y, dim, x.dim(), keepdim) * denom);
}

Tensor norm_backward(const Tensor& grad, const Tensor& x, const Tensor& y, double p, const Shape& dim, bool keepdim) {
  Tensor yk = unreduce(y, dim, x.dim(), keepdim), g_k = unreduce(grad, dim, x.dim(), keepdim);
  if (p == 0) return graft::zeros_like(x);
  if (p == 1) return g_k * graft::sign(x);
  if (std::isinf(p)) {
    Tensor ax = graft::abs(x);
    Tensor mask = graft::to(ops::eq(ax, yk), x.dtype());
    Tensor count = graft::sum(mask, all_reduced(dim, x.dim()), true);
    return g_k * graft::sign(x) * mask / count;
  }
  Tensor safe = graft::where(ops::eq(yk, 0), graft::ones_like(yk), yk);
  if (p == 2) return graft::where(ops::eq(yk, 0), graft::zeros_like(x), g_k * x / safe);
  Tensor num = x * graft::pow(graft::abs(x), p - 2);
  return graft::where(ops::eq(yk, 0), graft::zeros_like(x), g_k * num / graft::pow(safe, p - 1));
}

Tensor logsumexp_backward(const Tensor& grad, const Tensor& x, const Tensor& y, const Shape& dim, bool keepdim) {
  return unreduce(grad, dim, x.dim(), keepdim) * graft::exp(x - unreduce(y, dim, x.dim(), keepdim));
}

Tensor softmax_backward_rule(const Tensor& grad, const Tensor& y, int64_t dim) {  // y * (g - sum(g * y, dim))
  int64_t d = wrap_dim(dim, y.dim(), "softmax");
  if (!building_graph()) return ops::softmax_backward(grad, y, d);
  return y * (grad - graft::sum(grad * y, {d}, true));
}

Tensor log_softmax_backward_rule(const Tensor& grad, const Tensor& y, int64_t dim) {  // g - exp(y) * sum(g, dim)
  int64_t d = wrap_dim(dim, y.dim(), "log_softmax");
  if (!building_graph()) return ops::log_softmax_backward(grad, y, d);
  return grad - graft::exp(y) * graft::sum(grad, {d}, true);
}

Tensor nll_loss_backward_rule(const Tensor& grad, const Tensor& lp, const Tensor& target, const Tensor& weight,
                              LossReduction reduction, int64_t ignore_index) {
  Tensor ones = ops::ones(grad.sizes(), grad.dtype(), grad.device());
  Tensor m = ops::nll_loss_backward(ones, lp, target, weight, reduction, ignore_index);
  Tensor gb = grad;
  if (reduction == LossReduction::None && lp.dim() >= 2) gb = graft::unsqueeze(gb, 1);
  return m * gb;
}

variable_list layer_norm_backward_rule(const Tensor& grad, const Tensor& x, const Shape& normalized_shape,
                                       const Tensor& mean, const Tensor& rstd, const Tensor& w, const Tensor& b,
                                       const std::array<bool, 3>& mask) {
  auto r = ops::native_layer_norm_backward(grad, x, normalized_shape, mean, rstd, w, b);
  if (building_graph())
    for (auto& t : r) t = mark_not_twice_differentiable(t, "NativeLayerNorm", {&grad, &x, &w});
  for (size_t i = 0; i < 3; ++i)
    if (!mask[i]) r[i] = Tensor();
  return r;
}

Tensor product_grad(OpNode& n, size_t i, const Tensor& l, const Tensor& r) {
  const Edge& e = n.next_edges()[i];
  if (e.is_valid() && e.function->accumulate_directly([&](Tensor& acc) { ops::mm_accumulate_(acc, l, r); }))
    return Tensor();
  return graft::mm(l, r);
}

Tensor linear_weight_backward(OpNode& n, const Tensor& grad, const Tensor& input) {
  if (grad.dim() == 2) return product_grad(n, 1, grad.t(), input);
  const int64_t out = grad.size(-1), in = input.size(-1);
  return product_grad(n, 1, graft::reshape(grad, {-1, out}).t(), graft::reshape(input, {-1, in}));
}

variable_list conv2d_backward_rule(const Tensor& grad, const Tensor& x, const Tensor& w, const Shape& stride,
                                   const Shape& padding, const Shape& dilation, int64_t groups,
                                   const std::array<bool, 3>& mask) {
  Tensor gx, gw, gb;
  if (mask[0]) gx = ops::conv2d_backward_input(grad, x.sizes(), w, stride, padding, dilation, groups);
  if (mask[1] && mask[2]) {
    // One pass over grad for both where the kernel can (a CNN's largest gradient, read once).
    std::vector<Tensor> wb = ops::conv2d_backward_weight_bias(grad, x, w.sizes(), stride, padding, dilation, groups);
    gw = wb[0];
    gb = wb[1];
  } else {
    if (mask[1]) gw = ops::conv2d_backward_weight(grad, x, w.sizes(), stride, padding, dilation, groups);
    if (mask[2]) gb = graft::sum(grad, x.dim() == 4 ? Shape{0, 2, 3} : Shape{1, 2});
  }
  if (building_graph()) {
    gx = mark_not_twice_differentiable(gx, "Convolution", {&grad, &w});
    gw = mark_not_twice_differentiable(gw, "Convolution", {&grad, &x});
  }
  return {gx, gw, gb};
}

// The engine hands a node its incoming gradients by value and drops them once the rule returns, so
// a gradient whose TensorImpl and storage have no other holder (no hook kept it, no retain_grad, no
// view of it elsewhere), without autograd meta, dense with the result's dtype, shape and strides, is seen
// by nothing but this rule: overwriting it is invisible, and the same functor gives the same bits.
// The engine's own buffer accumulation (add_to_buffer) relies on the same ownership test.
Tensor relu_grad(const Tensor& grad, const Tensor& result) {
  // `result` is relu's output, or the bool mask (result > 0) a compressed save decodes to.
  const bool mask = result.dtype() == kBool;
  // Dense in the result's layout (contiguous, or channels-last as a CNN's are): the in-place
  // result then has the layout the out-of-place op would give.
  const bool owned = grad.impl_ptr().use_count() == 1 && grad.impl()->storage().use_count() == 1 &&
                     get_meta(grad) == nullptr && (mask || grad.dtype() == result.dtype()) &&
                     grad.sizes() == result.sizes() && grad.strides() == result.strides() &&
                     is_non_overlapping_and_dense(grad.sizes(), grad.strides());
  Tensor g = grad;  // a second reference to the same tensor, which the in-place ops write and return
  if (mask) {
    if (owned) return ops::_keep_where_(g, result);
    return ops::where(result, grad, ops::zeros({}, grad.dtype(), grad.device()));
  }
  if (!owned) return ops::threshold_backward(grad, result, 0);
  return ops::threshold_backward_(g, result, 0);
}

Tensor max_pool2d_backward_rule(const Tensor& grad, const Shape& x_sizes, const Shape& x_strides,
                                const Tensor& indices) {
  // The gradient takes the input's layout, as the forward kernel worked in it.
  const bool channels_last = x_sizes.size() == 4 && strides_like_channels_last(x_sizes, x_strides);
  Tensor gx = ops::max_pool2d_backward(grad, indices, x_sizes, channels_last);
  if (building_graph()) gx = mark_not_twice_differentiable(gx, "MaxPool2DWithIndices", {&grad});
  return gx;
}

Tensor max_pool2d_offsets_backward_rule(const Tensor& grad, const Shape& x_sizes, const Shape& x_strides,
                                        const Tensor& offsets, const Shape& kernel, const Shape& stride,
                                        const Shape& padding, const Shape& dilation) {
  const bool channels_last = x_sizes.size() == 4 && strides_like_channels_last(x_sizes, x_strides);
  Tensor gx = ops::_max_pool2d_offsets_backward(grad, offsets, x_sizes, kernel, stride, padding, dilation,
                                                channels_last);
  if (building_graph()) gx = mark_not_twice_differentiable(gx, "MaxPool2DWithIndices", {&grad});
  return gx;
}

Tensor avg_pool2d_backward_rule(const Tensor& grad, const Tensor& x, const Shape& kernel, const Shape& stride,
                                const Shape& padding, bool ceil_mode, bool count_include_pad) {
  Tensor gx = ops::avg_pool2d_backward(grad, x, kernel, stride, padding, ceil_mode, count_include_pad);
  if (building_graph()) gx = mark_not_twice_differentiable(gx, "AvgPool2D", {&grad});
  return gx;
}

Tensor permute_backward(const Tensor& grad, const Shape& dims) {  // the inverse permutation
  Shape inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inv[static_cast<size_t>(wrap_dim(dims[i], static_cast<int64_t>(dims.size()), "permute"))] = static_cast<int64_t>(i);
  return graft::permute(grad, inv);
}

namespace {
// Writes `g` into the region a view covers of a zero tensor shaped like its input. Done with the
// autograd-aware in-place copy on a view, so under create_graph it is itself differentiable.
template <class MakeView>
Tensor into_zeros(const TensorMeta& self, const Tensor& g, MakeView&& make_view) {
  Tensor r = zeros_of(self);
  Tensor v = make_view(r);
  graft::copy_(v, g);
  return r;
}
}  // namespace

Tensor slice_backward(const Tensor& grad, const TensorMeta& self, int64_t dim, int64_t start, int64_t end,
                      int64_t step) {
  int64_t d = wrap_dim(dim, static_cast<int64_t>(self.shape.size()), "slice"), len = self.shape[d];
  int64_t s0 = std::clamp<int64_t>(start < 0 ? start + len : start, 0, len);
  int64_t e0 = std::clamp<int64_t>(end < 0 ? end + len : end, s0, len);
  return into_zeros(self, grad, [&](Tensor& r) { return graft::slice(r, d, s0, e0, step); });
}

Tensor select_backward(const Tensor& grad, const TensorMeta& self, int64_t dim, int64_t index) {
  int64_t d = wrap_dim(dim, static_cast<int64_t>(self.shape.size()), "select");
  int64_t i = index < 0 ? index + self.shape[d] : index;
  return into_zeros(self, grad, [&](Tensor& r) { return graft::select(r, d, i); });
}

Tensor as_strided_backward_rule(const Tensor& grad, const Shape& self_sizes, const Shape& self_strides,
                                int64_t self_offset, const Shape& stride, int64_t offset) {
  Geometry base{self_sizes, self_strides, self_offset};
  Geometry view{grad.sizes(), stride, offset};
  Tensor r = as_strided_backward(grad, base, view);
  if (building_graph()) r = mark_not_twice_differentiable(r, "AsStrided", {&grad});
  return r;
}

variable_list cat_backward(const OpNode& n, const Tensor& grad, int64_t dim) {
  variable_list out(n.inputs.size());
  int64_t d = wrap_dim(dim, grad.dim(), "cat");
  int64_t off = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Shape& shape = n.inputs[i].shape;
    if (shape.size() == 1 && shape[0] == 0 && grad.dim() != 1) continue;  // legacy empty inputs take no part
    int64_t len = shape[d];
    if (n.needs(i)) out[i] = graft::slice(grad, d, off, off + len);
    off += len;
  }
  return out;
}

variable_list stack_backward(const OpNode& n, const Tensor& grad, int64_t dim) {
  variable_list out(n.inputs.size());
  int64_t d = wrap_dim(dim, grad.dim(), "stack");
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.needs(i)) out[i] = graft::select(grad, d, static_cast<int64_t>(i));
  return out;
}

Tensor pad_backward(const Tensor& grad, const Shape& pad) {  // crop with the negated pads
  Shape neg(pad.size());
  for (size_t i = 0; i < neg.size(); ++i) neg[i] = -pad[i];
  return graft::pad(grad, neg, 0.0);
}

Tensor scatter_add_src_backward(const Tensor& grad, int64_t dim, const Tensor& index, const TensorMeta& src) {
  Tensor gs = graft::gather(grad, dim, index);  // shaped like index
  // src may be larger than index (only its leading index-shaped block is read): zeros elsewhere.
  if (gs.sizes() != src.shape) {
    Shape pads;
    for (int64_t d = gs.dim() - 1; d >= 0; --d) pads.insert(pads.end(), {0, src.shape[d] - gs.size(d)});
    gs = graft::pad(gs, pads, 0.0);
  }
  return gs;
}

Tensor embedding_backward_rule(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  Tensor gw = ops::embedding_backward(grad, indices, num_weights, padding_idx);
  if (building_graph()) gw = mark_not_twice_differentiable(gw, "Embedding", {&grad});
  return gw;
}

Tensor to_copy_backward(const Tensor& grad, const TensorMeta& self) {
  Tensor g = grad.dtype() == self.dtype ? grad : graft::to(grad, self.dtype);
  return g.device() == self.device ? g : graft::to(g, self.device);
}

}  // namespace graft::autograd::rules
