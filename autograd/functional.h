#pragma once
// The public, differentiable op functions: graft::add(a, b), graft::matmul(x, w), graft::zeros(...).
// Each records autograd history where needed and then calls the dispatched op in ops/ops.h.
// Tensor's math methods (x.add(y)) forward here.
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "runtime/tensor.h"

namespace graft {

// ---- factories (default float32 on CPU) ----
Tensor empty(const Shape& sizes, TensorOptions options = {});
Tensor zeros(const Shape& sizes, TensorOptions options = {});
Tensor ones(const Shape& sizes, TensorOptions options = {});
Tensor full(const Shape& sizes, Scalar value, TensorOptions options = {});
// Integral bounds without a dtype give int64, as torch.arange.
Tensor arange(Scalar end, TensorOptions options = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions options = {});
Tensor randn(const Shape& sizes, TensorOptions options = {});
Tensor rand(const Shape& sizes, TensorOptions options = {});
Tensor randint(int64_t low, int64_t high, const Shape& sizes, TensorOptions options = {});
Tensor empty_like(const Tensor& t, TensorOptions options = {});
Tensor zeros_like(const Tensor& t, TensorOptions options = {});
Tensor ones_like(const Tensor& t, TensorOptions options = {});
Tensor full_like(const Tensor& t, Scalar value, TensorOptions options = {});
Tensor randn_like(const Tensor& t, TensorOptions options = {});
Tensor rand_like(const Tensor& t, TensorOptions options = {});
// 1-D tensor from values (float32 unless options say otherwise).
Tensor tensor(std::initializer_list<double> values, TensorOptions options = {});
Tensor tensor(const std::vector<float>& values, const Shape& sizes, TensorOptions options = {});
Tensor tensor(const std::vector<double>& values, const Shape& sizes, TensorOptions options = {});
Tensor tensor(const std::vector<int64_t>& values, const Shape& sizes, TensorOptions options = {});
Tensor tensor(const std::vector<bool>& values, const Shape& sizes, TensorOptions options = {});
// A 0-d tensor.
Tensor scalar_tensor(Scalar value, TensorOptions options = {});

// ---- elementwise ----
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor neg(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
// The unary op table: Tensor exp(const Tensor& x); ... (runtime/op_table/unary.def)
#define GRAFT_UNARY_OP(name, ...) Tensor name(const Tensor& x);
#include "runtime/op_table/unary.def"
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor pow(const Tensor& x, Scalar exponent);
Tensor pow(const Tensor& x, const Tensor& exponent);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);

// ---- reductions ----
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amax(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
std::vector<Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);  // {values, indices}
std::vector<Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor norm(const Tensor& x, double p = 2, const Shape& dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, const Shape& dims, bool keepdim = false);

// ---- linear algebra, convolution, pooling ----
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = {});
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {}, const Shape& stride = {1, 1},
              const Shape& padding = {0, 0}, const Shape& dilation = {1, 1}, int64_t groups = 1);
Tensor max_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0, 0},
                  const Shape& dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, const Shape& kernel, const Shape& stride = {}, const Shape& padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);

// ---- softmax, losses, normalisation ----
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const Tensor& weight = {},
                const std::string& reduction = "mean", int64_t ignore_index = -100);
Tensor cross_entropy(const Tensor& logits, const Tensor& target, const Tensor& weight = {},
                     const std::string& reduction = "mean", int64_t ignore_index = -100,
                     double label_smoothing = 0.0);
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// ---- attention ----
// torch.nn.functional.scaled_dot_product_attention: q [..., L, E], k [..., S, E], v [..., S, Ev]
// -> [..., L, Ev] = softmax(q k^T * scale + mask) v, batch dims broadcast. attn_mask is bool
// (true = takes part) or of q's dtype (added), broadcast to [..., L, S]; is_causal keeps key j for
// query i when j <= i (top-left) and excludes attn_mask; scale defaults to 1/sqrt(E). A row no key
// may attend to gives 0. Runs the fused tiled kernel (no L x S matrix; backward recomputes the
// tiles from the saved log-sum-exp) unless dropout_p > 0 or the mask requires grad, which take
// the composed path. Double backward (create_graph) differentiates the composed gradient formulas.
enum class SdpaBackend : uint8_t { Auto, Flash, Math };
// Forces one implementation on this thread while alive (torch.nn.attention.sdpa_kernel); Flash
// with dropout or a mask that requires grad is an error, not a silent fallback.
class SdpaBackendGuard {
 public:
  explicit SdpaBackendGuard(SdpaBackend backend);
  ~SdpaBackendGuard();
  SdpaBackendGuard(const SdpaBackendGuard&) = delete;
  SdpaBackendGuard& operator=(const SdpaBackendGuard&) = delete;

 private:
  SdpaBackend prev_;
};
SdpaBackend sdpa_backend();
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& attn_mask = {},
                                    double dropout_p = 0.0, bool is_causal = false,
                                    std::optional<double> scale = std::nullopt);
// The reference composition (matmul, softmax, matmul), always; what the fused kernel is checked against.
Tensor scaled_dot_product_attention_math(const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& attn_mask = {}, double dropout_p = 0.0,
                                         bool is_causal = false, std::optional<double> scale = std::nullopt);

// ---- indexing, joining, shape ----
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx = -1);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor pad(const Tensor& x, const Shape& pads, double value = 0.0);
Tensor one_hot(const Tensor& indices, int64_t num_classes);

// ---- views, copies and conversions (also reachable as Tensor methods) ----
Tensor view(const Tensor& x, const Shape& shape);
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor transpose(const Tensor& x, int64_t dim0, int64_t dim1);
Tensor permute(const Tensor& x, const Shape& dims);
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, const Shape& shape);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset);
Tensor clone(const Tensor& x, MemoryFormat f = MemoryFormat::Contiguous);
Tensor contiguous(const Tensor& x);
Tensor contiguous(const Tensor& x, MemoryFormat f);
Tensor detach(const Tensor& x);
Tensor to(const Tensor& x, DType dtype);
Tensor to(const Tensor& x, Device device, bool non_blocking = false);
// Sums a broadcast gradient back to `shape` (the inverse of expand).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- in-place (bump the version counter once; rebase autograd history) ----
Tensor& add_(Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& add_(Tensor& a, Scalar b);
Tensor& sub_(Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor& sub_(Tensor& a, Scalar b);
Tensor& mul_(Tensor& a, const Tensor& b);
Tensor& mul_(Tensor& a, Scalar b);
Tensor& div_(Tensor& a, const Tensor& b);
Tensor& div_(Tensor& a, Scalar b);
Tensor& sin_(Tensor& x);
Tensor& exp_(Tensor& x);
Tensor& relu_(Tensor& x);
Tensor& zero_(Tensor& x);
Tensor& fill_(Tensor& x, Scalar value);
Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking = false);
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max);
Tensor& normal_(Tensor& x, double mean = 0, double std = 1);
Tensor& uniform_(Tensor& x, double from = 0, double to = 1);

}  // namespace graft
