#pragma once
// Launchers for the saved-tensor codecs on the device (codegen/ops/codec.yaml). Element formulas:
// ops/codec_math.h, shared with the CPU; geometry: ops/codec_plan.h. Every pointer is dense.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

// out[ceil(n / 8)]: bit k of byte j is sign_bit(x[8 j + k]).
void launch_pack_sign_bits(DType dtype, const void* x, int64_t n, uint8_t* out, cudaStream_t stream);
// out[n] of dtype: 1 where bit i is set, else 0.
void launch_unpack_sign_bits(DType dtype, const uint8_t* bits, int64_t n, void* out, cudaStream_t stream);
// scale[C] (zeroed by the caller) <- int8_scale(largest finite |x|) per channel of x [outer, C, inner];
// then codes[i] = int8_code(x[i], scale[channel], u), u < 0 without a seed (seed < 0), else the
// uniform of Philox block (seed, offset + i / 4), word i % 4.
void launch_quantize_int8(DType dtype, const void* x, int64_t outer, int64_t C, int64_t inner, int64_t seed,
                          int64_t offset, float* scale, int8_t* codes, cudaStream_t stream);
// out[i] = int8_value(codes[i], scale[channel]) in dtype.
void launch_dequantize_int8(DType dtype, const int8_t* codes, const float* scale, int64_t outer, int64_t C,
                            int64_t inner, void* out, cudaStream_t stream);

}  // namespace graft::cuda
