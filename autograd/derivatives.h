#pragma once
// What the declared derivative formulas (codegen/ops/*.yaml) call beyond graft:: ops: the rules'
// shared helpers (autograd/rules.h), and the longer derivatives written once here, each as a plain
// function of the gradient, the saved tensors and the op's arguments (PyTorch keeps the same
// split: derivatives.yaml names functions of FunctionsManual.cpp). Every helper builds its result
// from differentiable graft:: ops when a graph is being built (create_graph), so higher orders are
// exact, and may take a fused ops:: kernel otherwise.
#include <array>
#include <cmath>
#include <numbers>
#include <optional>

#include "autograd/rules.h"
#include "runtime/option.h"

namespace graft::autograd::rules {

// g where mask, else 0.
Tensor zero_where_not(const Tensor& g, const Tensor& mask);
// relu's first-order backward, threshold_backward(grad, result, 0), written into grad when the rule
// holds the only reference to it (see derivatives.cpp).
Tensor relu_grad(const Tensor& grad, const Tensor& result);

// d gelu(x) / dx * grad: the fused kernel, or the composed formula under create_graph.
Tensor gelu_backward_rule(const Tensor& grad, const Tensor& self, GeluApproximate approximate);
// grad * e * x^(e - 1) (0 for e = 0).
Tensor pow_scalar_backward(const Tensor& grad, const Tensor& self, const Scalar& exponent);

// ---- binary ----
// grad * alpha (grad itself when alpha is 1).
Tensor scaled(const Tensor& grad, const Scalar& alpha);
// d pow(a, b) / d b * grad = grad * y * log(a), 0 where a == 0 (y = a^b).
Tensor pow_exponent_backward(const Tensor& grad, const Tensor& a, const Tensor& result);
// The share of grad that maximum(a, b) (is_max) or minimum(a, b) routes to a: all of it where a
// wins, half where they tie, as PyTorch.
Tensor extremum_pick_backward(const Tensor& grad, const Tensor& a, const Tensor& b, bool is_max);
// Where clamp lets the gradient through: min <= x <= max (an absent bound is no bound).
Tensor clamp_mask(const Tensor& x, const std::optional<Scalar>& min, const std::optional<Scalar>& max);

// ---- reductions: `dim` as the op got it (empty: every dim) ----
Tensor sum_backward(const Tensor& grad, const Shape& self_sizes, const Shape& dim, bool keepdim);
Tensor mean_backward(const Tensor& grad, const Shape& self_sizes, const Shape& dim, bool keepdim);
// amax/amin/max()/min(): grad shared evenly by the elements equal to the extremum.
Tensor extremum_backward(const Tensor& grad, const Tensor& self, const Tensor& result, const Shape& dim, bool keepdim);
// max(dim)/min(dim): grad scattered to the saved indices of the extremum.
Tensor index_extremum_backward(const Tensor& grad, const Tensor& indices, const TensorMeta& self, int64_t dim,
                               bool keepdim);
// topk: grad scattered to the saved indices along dim (a 0-d input gets grad itself).
Tensor topk_backward(const Tensor& grad, const Tensor& indices, const TensorMeta& self, int64_t dim);
Tensor var_backward(const Tensor& grad, const Tensor& self, const Shape& dim, int64_t correction, bool keepdim);
Tensor std_backward(const Tensor& grad, const Tensor& self, const Tensor& result, const Shape& dim,
                    int64_t correction, bool keepdim);
Tensor norm_backward(const Tensor& grad, const Tensor& self, const Tensor& result, double p, const Shape& dim,
                     bool keepdim);
Tensor logsumexp_backward(const Tensor& grad, const Tensor& self, const Tensor& result, const Shape& dim,
                          bool keepdim);

// ---- softmax, losses, layer norm, attention ----
Tensor softmax_backward_rule(const Tensor& grad, const Tensor& result, int64_t dim);
Tensor log_softmax_backward_rule(const Tensor& grad, const Tensor& result, int64_t dim);
// nll_loss is linear in its log-probabilities: the fixed pattern M (-w[t] / denominator at each
// target) scaled by grad, so it stays differentiable in grad for higher orders.
Tensor nll_loss_backward_rule(const Tensor& grad, const Tensor& self, const Tensor& target, const Tensor& weight,
                              LossReduction reduction, int64_t ignore_index);
variable_list layer_norm_backward_rule(const Tensor& grad, const Tensor& input, const Shape& normalized_shape,
                                       const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                                       const Tensor& bias, const std::array<bool, 3>& mask);
// {dq, dk, dv} summed to the inputs' shapes: the fused backward, or the composed formulas under
// create_graph (autograd/functional_attention.cpp).
variable_list sdpa_flash_backward_rule(const Tensor& grad, const Tensor& q, const Tensor& k, const Tensor& v,
                                       const Tensor& out, const Tensor& lse, const Tensor& mask, bool causal,
                                       double scale, const std::array<bool, 3>& needs);

// ---- linear algebra, convolution, pooling ----
// The gradient of input i as the product l @ r. The node it flows to may take it straight into a
// leaf's .grad (AccumulateGrad::accumulate_directly decides), so no weight-sized temporary exists.
Tensor product_grad(OpNode& n, size_t i, const Tensor& l, const Tensor& r);
// linear's weight gradient grad^T @ input over every leading dim.
Tensor linear_weight_backward(OpNode& n, const Tensor& grad, const Tensor& input);
variable_list conv2d_backward_rule(const Tensor& grad, const Tensor& input, const Tensor& weight, const Shape& stride,
                                   const Shape& padding, const Shape& dilation, int64_t groups,
                                   const std::array<bool, 3>& mask);
Tensor max_pool2d_backward_rule(const Tensor& grad, const Shape& self_sizes, const Shape& self_strides,
                                const Tensor& indices);
// The same from window offsets (_max_pool2d_with_offsets, what max_pool2d saves).
Tensor max_pool2d_offsets_backward_rule(const Tensor& grad, const Shape& self_sizes, const Shape& self_strides,
                                        const Tensor& offsets, const Shape& kernel, const Shape& stride,
                                        const Shape& padding, const Shape& dilation);
Tensor avg_pool2d_backward_rule(const Tensor& grad, const Tensor& self, const Shape& kernel, const Shape& stride,
                                const Shape& padding, bool ceil_mode, bool count_include_pad);

// ---- views, joins, indexing, copies ----
Tensor permute_backward(const Tensor& grad, const Shape& dims);
Tensor slice_backward(const Tensor& grad, const TensorMeta& self, int64_t dim, int64_t start, int64_t end,
                      int64_t step);
Tensor select_backward(const Tensor& grad, const TensorMeta& self, int64_t dim, int64_t index);
Tensor as_strided_backward_rule(const Tensor& grad, const Shape& self_sizes, const Shape& self_strides,
                                int64_t self_offset, const Shape& stride, int64_t offset);
variable_list cat_backward(const OpNode& n, const Tensor& grad, int64_t dim);
variable_list stack_backward(const OpNode& n, const Tensor& grad, int64_t dim);
Tensor pad_backward(const Tensor& grad, const Shape& pad);
Tensor scatter_add_src_backward(const Tensor& grad, int64_t dim, const Tensor& index, const TensorMeta& src);
Tensor embedding_backward_rule(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx);
// _to_copy's gradient back in the input's dtype and on its device.
Tensor to_copy_backward(const Tensor& grad, const TensorMeta& self);

}  // namespace graft::autograd::rules
