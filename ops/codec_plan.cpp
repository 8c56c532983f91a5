#include "ops/codec_plan.h"

#include "ops/kernel_utils.h"
#include "runtime/shape.h"

namespace graft::kernels {
namespace {

Int8Plan geometry(const Shape& sizes, int64_t dim, const char* op) {
  Int8Plan p;
  p.dim = wrap_dim(dim, static_cast<int64_t>(sizes.size()), op);
  p.channels = sizes[static_cast<size_t>(p.dim)];
  for (int64_t d = 0; d < p.dim; ++d) p.outer *= sizes[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(p.dim) + 1; d < sizes.size(); ++d) p.inner *= sizes[d];
  return p;
}

}  // namespace

int64_t plan_unpack_sign_bits(const Tensor& bits, const Shape& sizes, DType dtype) {
  check_defined(bits, "_unpack_sign_bits", "bits");
  GRAFT_CHECK(bits.dtype() == kUInt8 && bits.dim() == 1, "_unpack_sign_bits: expected bits to be a 1-D uint8 tensor, got ",
              bits.dtype(), " ", shape_str(bits.sizes()), " on ", bits.device());
  int64_t n = 1;
  for (int64_t s : sizes) {
    GRAFT_CHECK(s >= 0, "_unpack_sign_bits: sizes must be non-negative, got ", shape_str(sizes));
    n *= s;
  }
  GRAFT_CHECK(sign_bits_bytes(n) <= bits.numel(), "_unpack_sign_bits: ", shape_str(sizes), " needs ",
              sign_bits_bytes(n), " bytes of bits, got ", bits.numel());
  (void)dtype;
  return n;
}

Int8Plan plan_quantize_int8(const Tensor& self, int64_t dim, int64_t seed, int64_t offset) {
  check_defined(self, "_quantize_int8", "self");
  GRAFT_CHECK(is_floating(self.dtype()), "_quantize_int8: expected a floating tensor, got ", self.dtype(), " ",
              shape_str(self.sizes()), " on ", self.device());
  GRAFT_CHECK(self.dim() >= 1, "_quantize_int8: expected a tensor with at least one dim (its channels), got a 0-d ",
              self.dtype(), " tensor on ", self.device());
  GRAFT_CHECK(offset >= 0, "_quantize_int8: offset must be non-negative, got ", offset);
  Int8Plan p = geometry(self.sizes(), dim, "_quantize_int8");
  p.stochastic = seed >= 0;
  return p;
}

Int8Plan plan_dequantize_int8(const Tensor& codes, const Tensor& scale, int64_t dim, DType dtype) {
  check_defined(codes, "_dequantize_int8", "codes");
  check_defined(scale, "_dequantize_int8", "scale");
  GRAFT_CHECK(codes.dtype() == kUInt8 && codes.dim() >= 1, "_dequantize_int8: expected codes to be uint8 with at least "
              "one dim, got ", codes.dtype(), " ", shape_str(codes.sizes()));
  GRAFT_CHECK(is_floating(dtype), "_dequantize_int8: dtype must be floating, got ", dtype);
  Int8Plan p = geometry(codes.sizes(), dim, "_dequantize_int8");
  GRAFT_CHECK(scale.dtype() == kFloat32 && scale.dim() == 1 && scale.size(0) == p.channels &&
                  scale.device() == codes.device(),
              "_dequantize_int8: expected scale to be float32 [", p.channels, "] on ", codes.device(), ", got ",
              scale.dtype(), " ", shape_str(scale.sizes()), " on ", scale.device());
  return p;
}

}  // namespace graft::kernels
