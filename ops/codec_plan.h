#pragma once
// The device-independent half of the saved-tensor codecs (codegen/ops/codec.yaml): argument checks
// with messages that name the op, shapes and dtypes, and the geometry both devices walk.
// ops/codec.cpp (CPU) and cuda/codec_cuda.cpp supply only the loops; the per-element formulas are
// in ops/codec_math.h.
//
// Geometry of the int8 codec: self, made contiguous, is [outer, C, inner] around `dim`, so element
// i belongs to channel (i / inner) % C. Codes are contiguous in self's shape; scale is float32 [C].
#include <cstdint>

#include "runtime/tensor.h"

namespace graft::kernels {

// Bytes of a sign mask of n elements.
inline int64_t sign_bits_bytes(int64_t n) { return (n + 7) / 8; }

// _unpack_sign_bits: bits is a 1-D uint8 tensor of at least numel(sizes) bits; sizes are >= 0.
// Returns numel(sizes).
int64_t plan_unpack_sign_bits(const Tensor& bits, const Shape& sizes, DType dtype);

struct Int8Plan {
  int64_t dim = 0;  // wrapped
  int64_t outer = 1, channels = 1, inner = 1;
  bool stochastic = false;
};
// _quantize_int8: self floating with at least one dim, dim in range; seed >= 0 asks for stochastic
// rounding, offset >= 0.
Int8Plan plan_quantize_int8(const Tensor& self, int64_t dim, int64_t seed, int64_t offset);
// _dequantize_int8: codes uint8 with at least one dim, scale float32 [size(dim)] on codes' device,
// dtype floating.
Int8Plan plan_dequantize_int8(const Tensor& codes, const Tensor& scale, int64_t dim, DType dtype);
// Philox blocks the stochastic rounding of n elements reads (4 uniforms per block).
inline uint64_t int8_rounding_blocks(int64_t n) { return static_cast<uint64_t>((n + 3) / 4); }

}  // namespace graft::kernels
