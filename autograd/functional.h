#pragma once
// The public, differentiable op functions: graft::add(a, b), graft::matmul(x, w), graft::zeros(...).
// Each records autograd history where needed and then calls the dispatched op in ops/ops.h.
// Tensor's math methods (x.add(y)) forward here.
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "runtime/generator.h"
#include "runtime/option.h"
#include "runtime/tensor.h"

namespace graft {

// Every declared op's public function (codegen/ops/*.yaml).
#include "autograd/functional_generated.h"

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

// ---- attention (the functions are declared ops: codegen/ops/attention.yaml) ----
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
// scaled_dot_product_attention and scaled_dot_product_attention_math are declared ops
// (codegen/ops/attention.yaml); the composition is the reference the fused kernel is checked against.

}  // namespace graft
