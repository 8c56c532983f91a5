#pragma once
// graft::ops: the dispatched op library. Each function boxes its arguments and goes through the
// dispatcher (modes, then the device kernel). These calls record no autograd history: the public
// functions in autograd/functional.h wrap them and add it.
//
// Schema conventions (see runtime/op_schema.h): in-place ops end in '_' and write `self`; views
// alias `self`. Reductions take `dims` (empty = all dims) and `keepdim`.
#include <optional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace graft::ops {

// ---- factories ----
Tensor empty(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU), bool pinned = false);
Tensor empty_strided(const Shape& sizes, const Shape& strides, DType dtype = kFloat32,
                     Device device = Device(DeviceType::CPU));
Tensor full(const Shape& sizes, Scalar value, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor zeros(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor ones(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor arange(double start, double end, double step, DType dtype, Device device = Device(DeviceType::CPU));
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);

// ---- random (use the device's default generator) ----
Tensor randn(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor rand(const Shape& sizes, DType dtype = kFloat32, Device device = Device(DeviceType::CPU));
Tensor randint(int64_t low, int64_t high, const Shape& sizes, DType dtype = kInt64,
               Device device = Device(DeviceType::CPU));
Tensor& normal_(Tensor& self, double mean = 0, double std = 1);
Tensor& uniform_(Tensor& self, double from = 0, double to = 1);
Tensor& random_(Tensor& self, int64_t low, int64_t high);  // integers in [low, high)
Tensor& bernoulli_(Tensor& self, double p);                  // 1 with probability p

// ---- copy, cast, fill ----
Tensor& copy_(Tensor& self, const Tensor& src, bool non_blocking = false);  // broadcasts src, casts dtype
Tensor& fill_(Tensor& self, Scalar value);
Tensor& zero_(Tensor& self);
Tensor to_dtype(const Tensor& self, DType dtype);                     // a copy unless already that dtype
Tensor to_device(const Tensor& self, Device device, bool non_blocking = false, bool pinned = false);
// A copy laid out in `f` (default Contiguous, as graft always did; PyTorch's default is Preserve).
Tensor clone(const Tensor& self, MemoryFormat f = MemoryFormat::Contiguous);
Tensor contiguous(const Tensor& self);  // self when already contiguous
// Self when it is already dense in `f` (size-1 dims ignored, as PyTorch), else clone(self, f).
Tensor contiguous(const Tensor& self, MemoryFormat f);

// ---- views (never copy; share storage and version) ----
Tensor as_strided(const Tensor& self, const Shape& sizes, const Shape& strides, int64_t offset);
Tensor alias(const Tensor& self);  // a new TensorImpl over the same view (used by detach)
Tensor view(const Tensor& self, const Shape& sizes);
Tensor reshape(const Tensor& self, const Shape& sizes);  // a view when possible, else a copy
Tensor transpose(const Tensor& self, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& self, const Shape& dims);
Tensor slice(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& self, int64_t dim, int64_t index);
Tensor expand(const Tensor& self, const Shape& sizes);
Tensor squeeze(const Tensor& self, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& self, int64_t dim);
Tensor flatten(const Tensor& self, int64_t start_dim = 0, int64_t end_dim = -1);

// ---- elementwise unary ----
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
// The unary op table: Tensor exp(const Tensor& x); ... (runtime/op_table/unary.def)
#define GRAFT_UNARY_OP(name, ...) Tensor name(const Tensor& x);
#include "runtime/op_table/unary.def"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");  // "none" | "tanh"
Tensor pow(const Tensor& x, Scalar exponent);
Tensor logical_not(const Tensor& x);
Tensor& sin_(Tensor& x);
Tensor& exp_(Tensor& x);
Tensor& relu_(Tensor& x);
Tensor& neg_(Tensor& x);
Tensor& sqrt_(Tensor& x);

// Derivative helper kernels (fused for speed; each is also expressible with the ops above).
Tensor threshold_backward(const Tensor& grad, const Tensor& x, Scalar threshold);  // grad * (x > threshold)
Tensor gelu_backward(const Tensor& grad, const Tensor& x, const std::string& approximate = "none");
Tensor sigmoid_backward(const Tensor& grad, const Tensor& y);  // grad * y * (1 - y)
Tensor tanh_backward(const Tensor& grad, const Tensor& y);     // grad * (1 - y^2)

// ---- elementwise binary (NumPy broadcasting, PyTorch type promotion) ----
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);  // a + alpha * b
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
Tensor rsub(const Tensor& a, Scalar b);  // b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);  // true division: integers give float32
Tensor div(const Tensor& a, Scalar b);
Tensor rdiv(const Tensor& a, Scalar b);  // b / a
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor& add_(Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& add_(Tensor& a, Scalar b);
Tensor& sub_(Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& sub_(Tensor& a, Scalar b);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, Scalar b);
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, Scalar b);
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor& addcmul_(Tensor& self, const Tensor& a, const Tensor& b, Scalar value);  // self += value * a * b
Tensor& addcdiv_(Tensor& self, const Tensor& a, const Tensor& b, Scalar value);  // self += value * a / b
Tensor& lerp_(Tensor& self, const Tensor& end, Scalar weight);                   // self += w * (end - self)
// Fused optimizer steps (ops/fused_optim.cpp): one in-place pass over a parameter, its gradient and
// its state, giving the same bits as the op-by-op update. All tensors contiguous, alike, CPU.
struct FusedAdamArgs {
  double lr, beta1, beta2, weight_decay, eps, bias_correction1, bias_correction2;
  bool decoupled;  // AdamW: p *= 1 - lr * wd; Adam: g += wd * p
};
void fused_adam_(Tensor& param, Tensor& exp_avg, Tensor& exp_avg_sq, const Tensor& grad, const FusedAdamArgs& args);
struct FusedSgdArgs {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, first;  // first: the momentum buffer starts as the (decayed) gradient
};
// momentum_buffer is unused (may be undefined) when momentum == 0.
void fused_sgd_(Tensor& param, Tensor& momentum_buffer, const Tensor& grad, const FusedSgdArgs& args);

// ---- reductions: dims empty = all; results keep the input's dtype (sum of bool/int gives int64) ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false, std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
std::vector<Tensor> max_dim(const Tensor& x, int64_t dim, bool keepdim = false);  // {values, indices(int64)}
std::vector<Tensor> min_dim(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);  // over all elements; errors on empty tensors
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, const Shape& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);
// Sums `grad` down to `shape` (undoes broadcasting): used by every broadcasting derivative.
Tensor sum_to(const Tensor& grad, const Shape& shape);

// ---- linear algebra (oneDNN on CPU) ----
Tensor mm(const Tensor& a, const Tensor& b);         // [n,k] x [k,m]
Tensor bmm(const Tensor& a, const Tensor& b);        // [B,n,k] x [B,k,m]
Tensor& mm_accumulate_(Tensor& self, const Tensor& a, const Tensor& b);  // self[n,m] += a[n,k] @ b[k,m]
Tensor matmul(const Tensor& a, const Tensor& b);     // torch.matmul semantics incl. 1-D and batch broadcast
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = {});  // x @ w^T + b

// ---- convolution and pooling (NCHW; oneDNN on CPU) ----
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const Shape& stride = {1, 1},
              const Shape& padding = {0, 0}, const Shape& dilation = {1, 1}, int64_t groups = 1);
Tensor conv2d_backward_input(const Tensor& grad_out, const Shape& input_sizes, const Tensor& weight,
                             const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);
Tensor conv2d_backward_weight(const Tensor& grad_out, const Tensor& input, const Shape& weight_sizes,
                              const Shape& stride, const Shape& padding, const Shape& dilation, int64_t groups);
// Returns {output, indices}: indices are flat h*W+w positions in each input plane (as PyTorch).
std::vector<Tensor> max_pool2d_with_indices(const Tensor& input, const Shape& kernel, const Shape& stride = {},
                                            const Shape& padding = {0, 0}, const Shape& dilation = {1, 1},
                                            bool ceil_mode = false);
Tensor max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0, 0},
                  const Shape& dilation = {1, 1}, bool ceil_mode = false);
Tensor max_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Tensor& indices);
Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor avg_pool2d_backward(const Tensor& grad_out, const Tensor& input, const Shape& kernel, const Shape& stride,
                           const Shape& padding, bool ceil_mode, bool count_include_pad);

// ---- softmax, losses, normalisation ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);
Tensor log_softmax_backward(const Tensor& grad_out, const Tensor& out, int64_t dim);
// reduction: "mean" | "sum" | "none". target: int64 class indices [N] (or [N, d...] for [N, C, d...]).
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor nll_loss_backward(const Tensor& grad_out, const Tensor& log_probs, const Tensor& target,
                         const Tensor& weight, const std::string& reduction, int64_t ignore_index);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
// Returns {out, mean, rstd}; mean/rstd have the leading (un-normalised) dims.
std::vector<Tensor> layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                               const Tensor& bias = {}, double eps = 1e-5);
// Returns {grad_x, grad_weight, grad_bias} (grad_weight/bias undefined when weight/bias are).
std::vector<Tensor> layer_norm_backward(const Tensor& grad_out, const Tensor& x, const Shape& normalized_shape,
                                        const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                                        const Tensor& bias);
// Fused scaled dot-product attention (ops/sdpa_plan.h): q [..., L, E], k [..., S, E], v [..., S, Ev]
// -> {out [..., L, Ev], lse [..., L]}. attn_mask is bool (true = takes part) or additive.
std::vector<Tensor> _sdpa_flash(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask,
                                bool is_causal, double scale);
// -> {grad_q, grad_k, grad_v}, each with the broadcast batch shape (the caller sums to the inputs').
std::vector<Tensor> _sdpa_flash_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& out, const Tensor& lse, const Tensor& attn_mask,
                                         bool is_causal, double scale);

// ---- indexing and joining ----
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx = -1);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);  // views
std::vector<Tensor> split_with_sizes(const Tensor& x, const Shape& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
// Constant padding; `pads` lists (before, after) pairs starting from the last dim, as torch.nn.functional.pad.
Tensor pad(const Tensor& x, const Shape& pads, double value = 0.0);
Tensor one_hot(const Tensor& indices, int64_t num_classes);

}  // namespace graft::ops
