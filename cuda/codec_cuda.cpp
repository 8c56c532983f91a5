// The saved-tensor codecs on CUDA: checks and geometry from the shared plan (ops/codec_plan.h), as
// on the CPU; the loops are in cuda/kernels/codec.cu and evaluate the same formulas
// (ops/codec_math.h), so a mask or a code is the same bits on either device.
#include <cuda_runtime_api.h>

#include "cuda/cuda_context.h"
#include "cuda/cuda_kernels.h"
#include "cuda/kernels/codec.h"
#include "ops/codec_plan.h"
#include "ops/kernel_utils.h"

namespace graft::cuda {

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor pack_sign_bits_cuda(const Tensor& self) {
  kernels::check_defined(self, "_pack_sign_bits", "self");
  const int64_t n = self.numel();
  Tensor out = kernels::new_tensor({kernels::sign_bits_bytes(n)}, kUInt8, self.device());
  if (n == 0) return out;
  DeviceGuard guard(self.device().index);
  Tensor x = kernels::contiguous_as(self);
  launch_pack_sign_bits(self.dtype(), x.data_ptr(), n, static_cast<uint8_t*>(out.data_ptr()), current_stream());
  return out;
}

Tensor unpack_sign_bits_cuda(const Tensor& bits, const Shape& sizes, DType dtype) {
  const int64_t n = kernels::plan_unpack_sign_bits(bits, sizes, dtype);
  Tensor out = kernels::new_tensor(sizes, dtype, bits.device());
  if (n == 0) return out;
  DeviceGuard guard(bits.device().index);
  Tensor b = kernels::contiguous_as(bits);
  launch_unpack_sign_bits(dtype, static_cast<const uint8_t*>(b.data_ptr()), n, out.data_ptr(), current_stream());
  return out;
}

std::vector<Tensor> quantize_int8_cuda(const Tensor& self, int64_t dim, int64_t seed, int64_t offset) {
  const kernels::Int8Plan p = kernels::plan_quantize_int8(self, dim, seed, offset);
  Tensor codes = kernels::new_tensor(self.sizes(), kUInt8, self.device());
  Tensor scale = kernels::new_tensor({p.channels}, kFloat32, self.device());
  DeviceGuard guard(self.device().index);
  cudaStream_t stream = current_stream();
  if (p.channels > 0) GRAFT_CUDA_CHECK(cudaMemsetAsync(scale.data_ptr(), 0, scale.nbytes(), stream));
  if (self.numel() == 0) return {codes, scale};
  Tensor x = kernels::contiguous_as(self);
  launch_quantize_int8(self.dtype(), x.data_ptr(), p.outer, p.channels, p.inner, seed, offset,
                       static_cast<float*>(scale.data_ptr()), static_cast<int8_t*>(codes.data_ptr()), stream);
  return {codes, scale};
}

Tensor dequantize_int8_cuda(const Tensor& codes, const Tensor& scale, int64_t dim, DType dtype) {
  const kernels::Int8Plan p = kernels::plan_dequantize_int8(codes, scale, dim, dtype);
  Tensor out = kernels::new_tensor(codes.sizes(), dtype, codes.device());
  if (out.numel() == 0) return out;
  DeviceGuard guard(codes.device().index);
  Tensor c = kernels::contiguous_as(codes), s = kernels::contiguous_as(scale);
  launch_dequantize_int8(dtype, static_cast<const int8_t*>(c.data_ptr()), static_cast<const float*>(s.data_ptr()),
                         p.outer, p.channels, p.inner, out.data_ptr(), current_stream());
  return out;
}

}  // namespace graft::cuda
