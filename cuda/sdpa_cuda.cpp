// _sdpa_flash and _sdpa_flash_backward on CUDA: checks, shapes and operand geometry from
// ops/sdpa_plan.h, as on the CPU ({out, lse} and {dq, dk, dv}, the gradients with the broadcast
// batch shape); kernels in cuda/kernels/sdpa.cu.
//
// q/k/v are read in place through the geometry's per-batch offsets (a broadcast operand is never
// copied); only an operand whose rows are not unit-stride is copied first. The offsets are
// computed on the host by the plan and uploaded once per call: one pinned staging buffer and one
// cudaMemcpyAsync on the current stream (the pinned allocator keeps the buffer until the copy has
// run, so nothing waits).
#include <cstring>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/kernels/sdpa.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "ops/sdpa_plan.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::new_tensor;
using kernels::SdpaGeometry;
using kernels::SdpaMask;

// A q/k/v operand as the kernels read it (sdpa_plan.h, invariant 2).
Tensor prepared(const Tensor& t) { return kernels::sdpa_operand_needs_copy(t) ? kernels::contiguous_as(t) : t; }

// The geometry with its offset arrays on `device`. The returned tensor owns them and must outlive
// the launches (its memory is reused in stream order once it dies).
SdpaDeviceGeometry upload_geometry(const SdpaGeometry& g, bool causal, Device device, Tensor& offsets) {
  SdpaDeviceGeometry d;
  d.B = g.B;
  d.L = g.L;
  d.S = g.S;
  d.E = g.E;
  d.Ev = g.Ev;
  d.mask = g.mask == SdpaMask::Bool ? kSdpaMaskBool : g.mask == SdpaMask::Additive ? kSdpaMaskAdditive : kSdpaMaskNone;
  d.causal = causal;
  d.q_rs = g.q_rs;
  d.k_rs = g.k_rs;
  d.v_rs = g.v_rs;
  d.m_rs = g.m_rs;
  d.m_cs = g.m_cs;
  if (g.B == 0) return d;
  const std::vector<int64_t>* arrays[] = {&g.q_off, &g.k_off, &g.v_off, &g.m_off};
  const int64_t n = g.mask == SdpaMask::None ? 3 : 4;
  for (int64_t a = 0; a < n; ++a)
    GRAFT_CHECK(static_cast<int64_t>(arrays[a]->size()) == g.B, "internal error: sdpa geometry has ",
                arrays[a]->size(), " offsets for ", g.B, " batch matrices");
  {
    Tensor host = new_tensor({n * g.B}, kInt64, kCPU, /*pinned=*/true);
    auto* h = static_cast<int64_t*>(host.data_ptr());
    for (int64_t a = 0; a < n; ++a)
      std::memcpy(h + a * g.B, arrays[a]->data(), static_cast<size_t>(g.B) * sizeof(int64_t));
    offsets = new_tensor({n * g.B}, kInt64, device);
    GRAFT_CUDA_CHECK(cudaMemcpyAsync(offsets.data_ptr(), host.data_ptr(), host.nbytes(), cudaMemcpyHostToDevice,
                                     current_stream()));
  }  // the pinned buffer is released here, on the stream that copies from it
  const auto* dev = static_cast<const int64_t*>(offsets.data_ptr());
  d.q_off = dev;
  d.k_off = dev + g.B;
  d.v_off = dev + 2 * g.B;
  d.m_off = n == 4 ? dev + 3 * g.B : nullptr;
  return d;
}

const void* mask_ptr(const Tensor& mask) { return mask.defined() ? mask.data_ptr() : nullptr; }

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

std::vector<Tensor> sdpa_flash_cuda(const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& mask,
                                    bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention";
  // The dispatcher put every tensor argument on one device; q undefined fails in the plan.
  DeviceGuard guard(q0.defined() ? q0.device().index : -1);
  Tensor q = prepared(q0), k = prepared(k0), v = prepared(v0);
  SdpaGeometry g = kernels::plan_sdpa(q, k, v, mask, op);
  Tensor out = new_tensor(g.out_sizes(), q.dtype(), q.device());
  Tensor lse = new_tensor(g.lse_sizes(), q.dtype(), q.device());
  if (out.numel() == 0 && lse.numel() == 0) return {out, lse};
  Tensor offsets;
  SdpaDeviceGeometry dg = upload_geometry(g, is_causal, q.device(), offsets);
  launch_sdpa_forward(dg, q.dtype(), q.data_ptr(), k.data_ptr(), v.data_ptr(), mask_ptr(mask), scale, out.data_ptr(),
                      lse.data_ptr(), current_stream());
  return {out, lse};
}

std::vector<Tensor> sdpa_flash_backward_cuda(const Tensor& grad_out, const Tensor& q0, const Tensor& k0,
                                             const Tensor& v0, const Tensor& out, const Tensor& lse,
                                             const Tensor& mask, bool is_causal, double scale) {
  const char* op = "scaled_dot_product_attention_backward";
  DeviceGuard guard(q0.defined() ? q0.device().index : -1);
  Tensor q = prepared(q0), k = prepared(k0), v = prepared(v0);
  SdpaGeometry g = kernels::plan_sdpa_backward(grad_out, q, k, v, out, lse, mask, op);
  Tensor go = kernels::contiguous_as(grad_out), oc = kernels::contiguous_as(out), lc = kernels::contiguous_as(lse);
  Shape dq_sizes = g.batch, dk_sizes = g.batch, dv_sizes = g.batch;
  dq_sizes.insert(dq_sizes.end(), {g.L, g.E});
  dk_sizes.insert(dk_sizes.end(), {g.S, g.E});
  dv_sizes.insert(dv_sizes.end(), {g.S, g.Ev});
  Tensor dq = new_tensor(dq_sizes, q.dtype(), q.device());
  Tensor dk = new_tensor(dk_sizes, q.dtype(), q.device());
  Tensor dv = new_tensor(dv_sizes, q.dtype(), q.device());
  if (g.B == 0) return {dq, dk, dv};
  Tensor offsets;
  SdpaDeviceGeometry dg = upload_geometry(g, is_causal, q.device(), offsets);
  Tensor scratch = reduce_helpers::scratch(sdpa_backward_scratch_bytes(dg, q.dtype()), q.device());  // D: B * L values
  launch_sdpa_backward(dg, q.dtype(), go.data_ptr(), q.data_ptr(), k.data_ptr(), v.data_ptr(), oc.data_ptr(),
                       lc.data_ptr(), mask_ptr(mask), scale, dq.data_ptr(), dk.data_ptr(), dv.data_ptr(),
                       scratch.defined() ? scratch.data_ptr() : nullptr, current_stream());
  return {dq, dk, dv};
}

}  // namespace graft::cuda
