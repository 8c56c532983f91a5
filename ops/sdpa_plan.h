#pragma once
// The device-independent half of the fused scaled_dot_product_attention kernels (_sdpa_flash and
// _sdpa_flash_backward): argument checks, error messages, output shapes, and each operand's batch
// geometry as element offsets. The CPU (ops/sdpa.cpp) and CUDA (cuda/sdpa_cuda.cpp) kernels only
// run the tiles.
//
//   q [batch..., L, E], k [batch..., S, E], v [batch..., S, Ev]  ->  out [batch..., L, Ev], lse [batch..., L]
//   out = softmax(scale * q k^T + mask) v,  lse = logsumexp over S of (scale * q k^T + mask)
//
// Invariants:
// 1. The batch dims of q, k and v broadcast against each other; out and lse have the broadcast
//    batch shape and are contiguous. A broadcast operand is read through offsets, never copied.
// 2. Each operand row (one query, key or value vector) is contiguous: a kernel reads
//    base + off[b] + row * row_stride + [0, E). Operands whose last stride is not 1 are copied by
//    the device before the geometry is taken (prepare_sdpa_operand says which).
// 3. The mask is bool (true = takes part) or of q's dtype (added to the scores) and broadcasts to
//    batch + [L, S]; it is read as mask + m_off[b] + i * m_rs + j * m_cs, so a [L, S] mask shared by
//    every batch and head costs no copy.
// 4. is_causal keeps key j for query i when j <= i (top-left aligned, as PyTorch), also when L != S.
// 5. A query row that no key may attend to has out = 0 and lse = -inf; its gradients are 0.
// 6. lse is float32 for bfloat16/float16 operands on a device whose kernel is native in 16-bit
//    (the CPU), as PyTorch's CPU flash attention keeps its logsumexp in the accumulation type: a
//    16-bit lse would put a 2^-8 relative error into every recomputed probability of the backward.
//    The backward also takes the 16-bit lse of a float-fallback forward (CUDA today).
#include <cstdint>
#include <vector>

#include "runtime/tensor.h"

namespace graft::kernels {

enum class SdpaMask : uint8_t { None, Bool, Additive };

struct SdpaGeometry {
  Shape batch;                 // broadcast batch dims
  int64_t B = 1, L = 0, S = 0, E = 0, Ev = 0;
  SdpaMask mask = SdpaMask::None;
  std::vector<int64_t> q_off, k_off, v_off, m_off;  // per flattened batch index, in elements
  int64_t q_rs = 0, k_rs = 0, v_rs = 0;             // row strides
  int64_t m_rs = 0, m_cs = 0;                       // mask strides over L and S (0 where broadcast)
  Shape out_sizes() const;  // batch + [L, Ev]
  Shape lse_sizes() const;  // batch + [L]
};

// The dtype of lse for operands of dtype t (invariant 6).
inline DType sdpa_lse_dtype(DType t) { return is_reduced_floating(t) ? kFloat32 : t; }

// Checks the forward's arguments (op names the caller in errors: ranks, E and S agreement, dtypes,
// devices, the mask's dtype and broadcast shape) and returns the geometry. Operands must already
// satisfy invariant 2.
SdpaGeometry plan_sdpa(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& mask, const char* op);
// Also checks grad_out and out ([batch..., L, Ev]) and lse ([batch..., L]) against the geometry.
SdpaGeometry plan_sdpa_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                const Tensor& out, const Tensor& lse, const Tensor& mask, const char* op);
// Element offsets of each of `batch`'s matrices in `t`, whose leading dims broadcast to `batch`.
std::vector<int64_t> sdpa_batch_offsets(const Tensor& t, const Shape& batch);
// The strides the output takes: q's dim order (as PyTorch's fused kernels, out follows query's
// layout), so MultiheadAttention's heads, read from [N, L, H, D] views, come back as [N, L, H, Ev]
// storage and its transpose-and-merge of the heads is a view. Contiguous where q's batch dims do
// not span out's.
Shape sdpa_out_strides(const Tensor& q, const Shape& out_sizes);
// Whether a q/k/v operand must be copied before plan_sdpa (its rows are not unit-stride).
inline bool sdpa_operand_needs_copy(const Tensor& t) { return t.dim() >= 1 && t.size(-1) > 1 && t.stride(-1) != 1; }

}  // namespace graft::kernels
