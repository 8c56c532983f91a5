// The saved-tensor codecs on the CPU (codegen/ops/codec.yaml): checks and geometry in
// ops/codec_plan.h, per-element formulas in ops/codec_math.h; only the loops are here.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include "ops/codec_math.h"
#include "ops/codec_plan.h"
#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/vec_math.h"
#include "runtime/generator.h"
#include "runtime/parallel.h"

namespace graft::kernels {
namespace {

template <class T>
constexpr bool kFloatLike = std::is_floating_point_v<T> || std::is_same_v<T, BFloat16> || std::is_same_v<T, Half>;

template <class T>
inline bool sign_bit_of(T v) {
  if constexpr (std::is_same_v<T, double>) return codec_math::sign_bit(v);
  else if constexpr (kFloatLike<T>) return codec_math::sign_bit(static_cast<float>(v));
  else return v > T(0);
}

// No floating-point exceptions are looked at in graft, and with them "trapping" GCC keeps the
// selects below as branches: the loop stays scalar.
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
// codec_math::int8_code(x, scale, -1) without branches, so that a loop of it vectorises (3x faster
// on a linear's [256, 1024] activations; a branch per element kept it scalar). Same codes, bit for
// bit: the division is the same, clamping to +-126 before rounding commutes with it (126 is an
// integer), and adding and taking away 1.5 * 2^23 rounds a float of magnitude <= 126 to the nearest
// integer, ties to even, in the default rounding mode (what nearbyintf does). A non-finite x, or a
// zero scale (x / 0), is given its code by the selects after it.
inline int8_t int8_code_nearest(float x, float scale) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
  const float hi = static_cast<float>(codec_math::kInt8Levels);
  // Every case as a float select first, one conversion at the end: selects the vectoriser if-converts.
  // A NaN v (x NaN, or 0 / 0) passes the clamps and is replaced by a select below.
  float v = x / scale;
  v = v > hi ? hi : v;
  v = v < -hi ? -hi : v;
  float code = (v + kMagic) - kMagic;
  code = scale == 0.0f ? 0.0f : code;
  const float inf_code = x > 0.0f ? static_cast<float>(codec_math::kCodePosInf) : static_cast<float>(codec_math::kCodeNegInf);
  code = __builtin_fabsf(x) == INFINITY ? inf_code : code;  // std::fabs would not inline here (other options)
  code = x != x ? static_cast<float>(codec_math::kCodeNaN) : code;
  return static_cast<int8_t>(static_cast<int32_t>(code));
}

// One outer row of a channels-last [outer, C] tensor, rounded to nearest.
template <class T>
void int8_codes_nearest(const T* x, const float* scale, int8_t* q, int64_t C) {
  for (int64_t c = 0; c < C; ++c) q[c] = int8_code_nearest(static_cast<float>(x[c]), scale[c]);
}
#pragma GCC pop_options

// float32 masks, bytes [b, e), with the generic loop's sign_bit, multiversioned (the build targets generic x86-64). 32 lanes make one 32-bit word, stored little
// endian as four bytes: GCC turns that loop into compares and mask moves, where a byte per pass
// stayed scalar (6x slower on one core).
GRAFT_VECTOR_CLONES void sign_bytes_f32(const float* p, uint8_t* o, int64_t b, int64_t e) {
  int64_t j = b;
  for (; j + 4 <= e; j += 4) {
    const float* v = p + j * 8;
    uint32_t word = 0;
    for (int k = 0; k < 32; ++k) word |= static_cast<uint32_t>(codec_math::sign_bit(v[k])) << k;
    static_assert(std::endian::native == std::endian::little, "sign bits are stored little endian");
    std::memcpy(o + j, &word, sizeof word);
  }
  for (; j < e; ++j) {
    const float* v = p + j * 8;
    uint8_t byte = 0;
    for (int k = 0; k < 8; ++k) byte |= static_cast<uint8_t>(codec_math::sign_bit(v[k])) << k;
    o[j] = byte;
  }
}

}  // namespace

Tensor pack_sign_bits_cpu(const Tensor& self) {
  check_defined(self, "_pack_sign_bits", "self");
  const int64_t n = self.numel(), bytes = sign_bits_bytes(n);
  Tensor out = new_tensor({bytes}, kUInt8, self.device());
  if (n == 0) return out;
  Tensor x = contiguous_cpu(self);
  auto* o = static_cast<uint8_t*>(out.data_ptr());
  dispatch_all_dtypes(self.dtype(), "_pack_sign_bits", [&]<class T>() {
    const T* p = static_cast<const T*>(x.data_ptr());
    // Whole bytes with a fixed trip count of 8 (which the compiler unrolls and vectorises), then
    // the last, partial one.
    const int64_t whole = n / 8;
    parallel_for(0, whole, kGrainSize / 8, [&](int64_t b, int64_t e) {
      if constexpr (std::is_same_v<T, float>) {
        sign_bytes_f32(p, o, b, e);
        return;
      }
      for (int64_t j = b; j < e; ++j) {
        const T* v = p + j * 8;
        uint8_t byte = 0;
        for (int k = 0; k < 8; ++k) byte |= static_cast<uint8_t>(sign_bit_of(v[k])) << k;
        o[j] = byte;
      }
    });
    if (whole < bytes) {
      uint8_t byte = 0;
      for (int64_t k = whole * 8; k < n; ++k) byte |= static_cast<uint8_t>(sign_bit_of(p[k])) << (k - whole * 8);
      o[whole] = byte;
    }
  });
  return out;
}

Tensor unpack_sign_bits_cpu(const Tensor& bits, const Shape& sizes, DType dtype) {
  const int64_t n = plan_unpack_sign_bits(bits, sizes, dtype);
  Tensor out = new_tensor(sizes, dtype, bits.device());
  if (n == 0) return out;
  Tensor b = contiguous_cpu(bits);
  const auto* src = static_cast<const uint8_t*>(b.data_ptr());
  dispatch_all_dtypes(dtype, "_unpack_sign_bits", [&]<class T>() {
    T* dst = static_cast<T*>(out.data_ptr());
    const T one = static_cast<T>(1), zero = static_cast<T>(0);
    // A whole byte at a time from a table of its 8 values (8 KiB for float, in L1): one copy per
    // byte instead of a shift and a select per element, 8x faster on the CNN's 12 MiB relu mask.
    static const auto table = [&] {
      auto t = std::make_unique<T[]>(256 * 8);  // not std::vector: vector<bool> has no data()
      for (int b = 0; b < 256; ++b)
        for (int k = 0; k < 8; ++k) t[static_cast<size_t>(b * 8 + k)] = (b >> k) & 1 ? one : zero;
      return t;
    }();
    const int64_t whole = n / 8;
    parallel_for(0, whole, kGrainSize / 8, [&](int64_t lo, int64_t hi) {
      for (int64_t j = lo; j < hi; ++j) std::copy_n(table.get() + src[j] * 8, 8, dst + j * 8);
    });
    for (int64_t i = whole * 8; i < n; ++i) dst[i] = (src[i >> 3] >> (i & 7)) & 1 ? one : zero;
  });
  return out;
}

std::vector<Tensor> quantize_int8_cpu(const Tensor& self, int64_t dim, int64_t seed, int64_t offset) {
  const Int8Plan p = plan_quantize_int8(self, dim, seed, offset);
  Tensor codes = new_tensor(self.sizes(), kUInt8, self.device());
  Tensor scale = new_tensor({p.channels}, kFloat32, self.device());
  auto* s = static_cast<float*>(scale.data_ptr());
  std::fill(s, s + p.channels, 0.0f);
  if (self.numel() == 0) return {codes, scale};
  Tensor x = contiguous_cpu(self);
  // Rows of the [outer, C, inner] view: row r is channel r % C, elements [r * inner, (r + 1) * inner).
  const int64_t rows = p.outer * p.channels, inner = p.inner, C = p.channels;
  auto* q = static_cast<int8_t*>(codes.data_ptr());
  dispatch_floating_or_reduced(self.dtype(), "_quantize_int8", [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    // Pass 1: each channel's largest finite |x|. Chunks keep their own maxima and merge them; max
    // does not depend on the order, so neither does the scale.
    std::mutex mu;
    auto merge = [&](const std::vector<float>& local) {
      std::lock_guard<std::mutex> lock(mu);
      for (int64_t c = 0; c < C; ++c) s[c] = std::max(s[c], local[static_cast<size_t>(c)]);
    };
    // NaN fails a > m; inf is not finite.
    auto widen = [](float m, float a) { return a > m && a != INFINITY ? a : m; };
    if (inner == 1) {
      // Channels last (a linear's [N, C] activations): each outer row is C channels side by side,
      // so the loop runs along the channels, with no index arithmetic per element.
      parallel_for(0, p.outer, grain_for(C), [&](int64_t b, int64_t e) {
        std::vector<float> local(static_cast<size_t>(C), 0.0f);
        float* m = local.data();
        for (int64_t o = b; o < e; ++o) {
          const T* row = xp + o * C;
          for (int64_t c = 0; c < C; ++c) m[c] = widen(m[c], std::fabs(static_cast<float>(row[c])));
        }
        merge(local);
      });
    } else {
      parallel_for(0, rows, grain_for(inner), [&](int64_t b, int64_t e) {
        std::vector<float> local(static_cast<size_t>(C), 0.0f);
        for (int64_t r = b; r < e; ++r) {
          float m = local[static_cast<size_t>(r % C)];
          const T* row = xp + r * inner;
          for (int64_t k = 0; k < inner; ++k) m = widen(m, std::fabs(static_cast<float>(row[k])));
          local[static_cast<size_t>(r % C)] = m;
        }
        merge(local);
      });
    }
    for (int64_t c = 0; c < C; ++c) s[c] = codec_math::int8_scale(s[c]);
    // Pass 2: the codes.
    const uint64_t useed = static_cast<uint64_t>(seed), base = static_cast<uint64_t>(offset);
    auto code = [&](int64_t i, float sc) {
      float u = -1.0f;
      if (p.stochastic) {
        const auto w = philox4x32(useed, base + static_cast<uint64_t>(i) / 4);
        u = uint_to_unit_float(w[static_cast<size_t>(i % 4)]);
      }
      q[i] = codec_math::int8_code(static_cast<float>(xp[i]), sc, u);
    };
    // float only: a 16-bit element's conversion would not inline into the other options' loop.
    if (std::is_same_v<T, float> && inner == 1 && !p.stochastic) {
      parallel_for(0, p.outer, grain_for(C), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o) int8_codes_nearest(xp + o * C, s, q + o * C, C);
      });
    } else if (inner == 1) {
      parallel_for(0, p.outer, grain_for(C), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          for (int64_t c = 0; c < C; ++c) code(o * C + c, s[c]);
      });
    } else {
      parallel_for(0, rows, grain_for(inner), [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) {
          const float sc = s[r % C];
          for (int64_t k = 0; k < inner; ++k) code(r * inner + k, sc);
        }
      });
    }
  });
  return {codes, scale};
}

Tensor dequantize_int8_cpu(const Tensor& codes, const Tensor& scale, int64_t dim, DType dtype) {
  const Int8Plan p = plan_dequantize_int8(codes, scale, dim, dtype);
  Tensor out = new_tensor(codes.sizes(), dtype, codes.device());
  if (out.numel() == 0) return out;
  Tensor c = contiguous_cpu(codes), sc = contiguous_cpu(scale);
  const auto* q = static_cast<const int8_t*>(c.data_ptr());
  const auto* s = static_cast<const float*>(sc.data_ptr());
  const int64_t rows = p.outer * p.channels, inner = p.inner, C = p.channels;
  dispatch_floating_or_reduced(dtype, "_dequantize_int8", [&]<class T>() {
    T* y = static_cast<T*>(out.data_ptr());
    if (inner == 1) {
      parallel_for(0, p.outer, grain_for(C), [&](int64_t b, int64_t e) {
        for (int64_t o = b; o < e; ++o)
          for (int64_t c = 0; c < C; ++c) y[o * C + c] = static_cast<T>(codec_math::int8_value(q[o * C + c], s[c]));
      });
      return;
    }
    parallel_for(0, rows, grain_for(inner), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const float f = s[r % C];
        for (int64_t k = r * inner; k < (r + 1) * inner; ++k) y[k] = static_cast<T>(codec_math::int8_value(q[k], f));
      }
    });
  });
  return out;
}

}  // namespace graft::kernels
