#pragma once
// The saved-tensor codecs' per-element formulas (codegen/ops/codec.yaml), written once for the CPU
// kernels (ops/codec.cpp) and the CUDA kernels (cuda/kernels/codec.cu). Same rules as
// ops/scalar_math.h: plain scalars, GRAFT_HOST_DEVICE, inline.
//
// Int8 codes: a finite value maps into [-kInt8Levels, kInt8Levels]; the three codes above and
// below that range keep the non-finite values exactly, so a round trip never turns an inf or a
// NaN in an activation into a finite number that would hide it from anomaly mode or GradScaler.
#include <cmath>
#include <cstdint>

#include "ops/math/device_math.h"

namespace graft::codec_math {

constexpr int kInt8Levels = 126;
constexpr int8_t kCodePosInf = 127, kCodeNegInf = -127, kCodeNaN = -128;

// 1 where threshold_backward(g, x, 0) keeps g: x > 0 or x NaN.
GRAFT_HOST_DEVICE inline bool sign_bit(float x) { return !(x <= 0.0f); }
GRAFT_HOST_DEVICE inline bool sign_bit(double x) { return !(x <= 0.0); }

// The channel's scale from its largest finite |x| (0 when the channel has none, or only zeros).
GRAFT_HOST_DEVICE inline float int8_scale(float amax) { return amax / static_cast<float>(kInt8Levels); }

// x -> code. `u` < 0 rounds to nearest even; u in [0, 1) rounds stochastically (floor(x / s + u)),
// which keeps the code's expectation equal to x / s.
GRAFT_HOST_DEVICE inline int8_t int8_code(float x, float scale, float u) {
  if (x != x) return kCodeNaN;
  if (fabsf(x) == INFINITY) return x > 0 ? kCodePosInf : kCodeNegInf;
  if (scale == 0.0f) return 0;
  const float v = x / scale;  // correctly rounded on both devices (no reciprocal, no FMA)
  float q = u < 0.0f ? nearbyintf(v) : floorf(v + u);
  const float hi = static_cast<float>(kInt8Levels);
  q = q > hi ? hi : (q < -hi ? -hi : q);
  return static_cast<int8_t>(q);
}

GRAFT_HOST_DEVICE inline float int8_value(int8_t code, float scale) {
  if (code == kCodeNaN) return NAN;
  if (code == kCodePosInf) return INFINITY;
  if (code == kCodeNegInf) return -INFINITY;
  return static_cast<float>(code) * scale;
}

}  // namespace graft::codec_math
