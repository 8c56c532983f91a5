#pragma once
// Device side of the fused scaled dot-product attention (_sdpa_flash, _sdpa_flash_backward; the
// checks and the operand geometry are ops/sdpa_plan.h's, shared with the CPU kernels).
//   forward:  s = scale * q k^T (+ mask), out = softmax(s) v, lse = logsumexp(s), tiled with an
//             online softmax so no L x S matrix exists
//   backward: p = exp(s - lse) recomputed per tile, D = rowsum(dout * out),
//             dv = p^T dout, dp = dout v^T, ds = p * (dp - D), dq = scale ds k, dk = scale ds^T q
// Plain launch functions over raw device pointers; they launch on `stream` and check every launch.
// dtype is float32 or float64 (accumulation in the operands' dtype).
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

// kernels::SdpaGeometry as the kernels read it. q/k/v row r of batch matrix b starts at
// base + off[b] + r * row_stride and is contiguous; out/lse/grad_out and dq/dk/dv are contiguous
// [B, L, Ev] / [B, L] / [B, L, E] etc. The offset arrays are device memory of B int64 each.
struct SdpaDeviceGeometry {
  int64_t B = 0, L = 0, S = 0, E = 0, Ev = 0;
  int mask = 0;  // 0 none, 1 bool (false: excluded), 2 additive (of the operands' dtype)
  bool causal = false;
  int64_t q_rs = 0, k_rs = 0, v_rs = 0;
  int64_t m_rs = 0, m_cs = 0;  // mask element strides over L and S (0 where broadcast)
  const int64_t* q_off = nullptr;
  const int64_t* k_off = nullptr;
  const int64_t* v_off = nullptr;
  const int64_t* m_off = nullptr;  // null without a mask
};
inline constexpr int kSdpaMaskNone = 0, kSdpaMaskBool = 1, kSdpaMaskAdditive = 2;

// out [B, L, Ev], lse [B, L]. `mask` points at the mask's element (0, ..., 0) (null without one).
void launch_sdpa_forward(const SdpaDeviceGeometry& g, DType dtype, const void* q, const void* k, const void* v,
                         const void* mask, double scale, void* out, void* lse, cudaStream_t stream);

// Bytes of device scratch launch_sdpa_backward needs (D = rowsum(dout * out), B * L values).
int64_t sdpa_backward_scratch_bytes(const SdpaDeviceGeometry& g, DType dtype);
// dout, out [B, L, Ev], lse [B, L] -> dq [B, L, E], dk [B, S, E], dv [B, S, Ev], every element written.
void launch_sdpa_backward(const SdpaDeviceGeometry& g, DType dtype, const void* dout, const void* q, const void* k,
                          const void* v, const void* out, const void* lse, const void* mask, double scale, void* dq,
                          void* dk, void* dv, void* scratch, cudaStream_t stream);

}  // namespace graft::cuda
