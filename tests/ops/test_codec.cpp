// The saved-tensor codecs (codegen/ops/codec.yaml): sign masks and per-channel int8 against
// reference formulas written here from the declaration's text, non-finite values, layouts, dtypes,
// stochastic rounding's determinism and expectation, and errors. The same ops on CUDA are compared
// with these by tests/cuda/test_cuda_vs_cpu.cpp.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "graft.h"
#include "support/error_message.h"

using namespace graft;
using Catch::Contains;

namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

std::vector<uint8_t> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  std::vector<uint8_t> out(c.nbytes());
  std::memcpy(out.data(), c.data_ptr(), out.size());
  return out;
}
std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).contiguous().to_vector<float>(); }

// The declaration's formula, element by element: scale = largest finite |x| of the channel / 126,
// code = clamp(round_half_even(x / scale), -126, 126), with 127 / -127 / -128 for +inf / -inf / NaN.
struct Int8Ref {
  std::vector<float> scale;
  std::vector<int8_t> codes;
};
Int8Ref int8_reference(const std::vector<float>& x, int64_t outer, int64_t C, int64_t inner) {
  Int8Ref r{std::vector<float>(static_cast<size_t>(C), 0.0f), std::vector<int8_t>(x.size())};
  for (size_t i = 0; i < x.size(); ++i) {
    const size_t c = (i / static_cast<size_t>(inner)) % static_cast<size_t>(C);
    if (std::isfinite(x[i])) r.scale[c] = std::max(r.scale[c], std::fabs(x[i]));
  }
  for (float& s : r.scale) s = s / 126.0f;
  for (size_t i = 0; i < x.size(); ++i) {
    const float s = r.scale[(i / static_cast<size_t>(inner)) % static_cast<size_t>(C)];
    if (std::isnan(x[i])) r.codes[i] = -128;
    else if (std::isinf(x[i])) r.codes[i] = x[i] > 0 ? 127 : -127;
    else if (s == 0.0f) r.codes[i] = 0;
    else r.codes[i] = static_cast<int8_t>(std::clamp(std::nearbyint(x[i] / s), -126.0f, 126.0f));
  }
  (void)outer;
  return r;
}

}  // namespace

TEST_CASE("_pack_sign_bits sets the bits of positive and NaN elements, row-major, low bit first") {
  // Elements 0..9: NaN, -0, 0, 1e-30, -1, inf, -inf, 2, then (byte 1) 3, -5.
  Tensor x = tensor(std::vector<float>{kNaN, -0.0f, 0.0f, 1e-30f, -1.0f, kInf, -kInf, 2.0f, 3.0f, -5.0f}, {10});
  Tensor bits = ops::_pack_sign_bits(x);
  CHECK(bits.dtype() == kUInt8);
  CHECK(bits.sizes() == Shape{2});
  // byte 0: bits 0 (NaN), 3 (1e-30), 5 (inf), 7 (2) -> 0b10101001; byte 1: bit 0 (3).
  CHECK(bytes_of(bits) == std::vector<uint8_t>{0xA9, 0x01});
  Tensor back = ops::_unpack_sign_bits(bits, {10}, kFloat32);
  CHECK(floats(back) == std::vector<float>{1, 0, 0, 1, 0, 1, 0, 1, 1, 0});
  // The same values spread over whole 32-bit words (the float32 loop packs 32 lanes at a time),
  // then a few bytes and a partial byte: every bit against its definition.
  const std::vector<float> special{kNaN, -0.0f, 0.0f, 1e-30f, -1e-30f, -1.0f, kInf, -kInf, 2.0f, -5.0f, 1e-45f};
  std::vector<float> many(203);
  for (size_t i = 0; i < many.size(); ++i) many[i] = special[(i * 7 + i / 11) % special.size()];
  const std::vector<uint8_t> packed = bytes_of(ops::_pack_sign_bits(tensor(many, {203})));
  REQUIRE(packed.size() == 26);
  for (size_t i = 0; i < many.size(); ++i) {
    INFO("element " << i << " = " << many[i]);
    CHECK(((packed[i / 8] >> (i % 8)) & 1) == (many[i] <= 0.0f ? 0 : 1));
  }
  for (size_t i = many.size(); i < 26 * 8; ++i) CHECK(((packed[i / 8] >> (i % 8)) & 1) == 0);  // padding
}

TEST_CASE("sign masks round-trip every dtype, layout and a numel that is not a multiple of 8") {
  manual_seed(3);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    Tensor x = randn({7, 13}).to(dt);
    Tensor xt = x.t();  // strided: packed in its own row-major order
    for (const Tensor& v : {x, xt}) {
      Tensor m = ops::_unpack_sign_bits(ops::_pack_sign_bits(v), v.sizes(), dt);
      CHECK(m.dtype() == dt);
      CHECK(m.sizes() == v.sizes());
      CHECK(floats(m) == floats(gt(v, 0).to(kFloat32)));
    }
  }
  Tensor b = tensor(std::vector<bool>{true, false, true}, {3});
  CHECK(floats(ops::_unpack_sign_bits(ops::_pack_sign_bits(b), {3}, kBool)) == std::vector<float>{1, 0, 1});
  Tensor i = tensor(std::vector<int64_t>{-2, 0, 5}, {3});
  CHECK(floats(ops::_unpack_sign_bits(ops::_pack_sign_bits(i), {3}, kInt64)) == std::vector<float>{0, 0, 1});
  CHECK(ops::_pack_sign_bits(ops::empty({0, 4})).numel() == 0);
  CHECK(ops::_unpack_sign_bits(ops::_pack_sign_bits(ops::empty({0, 4})), {0, 4}, kFloat32).sizes() == Shape{0, 4});
  // Large enough to split across threads (whole bytes per chunk, a partial last byte after them).
  for (DType dt : {kFloat32, kBFloat16}) {
    Tensor big = randn({300001}).to(dt);
    CHECK(floats(ops::_unpack_sign_bits(ops::_pack_sign_bits(big), big.sizes(), dt)) == floats(gt(big, 0).to(kFloat32)));
  }
}

TEST_CASE("_keep_where_ gives threshold_backward's bits from a bool mask, fast path and generic loop alike") {
  manual_seed(9);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kFloat16}) {
    INFO(dt);
    Tensor x = randn({6, 5, 7, 9});
    Tensor g = randn({6, 5, 7, 9});
    g.narrow(0, 0, 1).fill_(kNaN);  // NaN gradients pass where kept and become +0 where not
    x = x.to(dt);
    g = g.to(dt);
    for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
      Tensor xf = x.contiguous(f), gf = g.contiguous(f);
      Tensor want = ops::threshold_backward(gf, xf, 0);
      Tensor keep = ops::gt(xf, 0);  // x > 0 in x's layout: the fast path
      Tensor got = gf.clone();
      ops::_keep_where_(got, keep);
      CHECK(bytes_of(got.contiguous()) == bytes_of(want.contiguous()));
      // A mask in the other layout takes the generic loop: the same bits.
      Tensor other = keep.contiguous(f == MemoryFormat::Contiguous ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
      Tensor got2 = gf.clone();
      ops::_keep_where_(got2, other);
      CHECK(bytes_of(got2.contiguous()) == bytes_of(want.contiguous()));
    }
  }
  CHECK_THAT(test::error_message([] {
               Tensor t = ops::zeros({3});
               ops::_keep_where_(t, ops::ones({3}));
             }),
             Contains("_keep_where_: expected a floating self and a bool keep mask, got self [3] float32 cpu and keep [3] float32 cpu"));
}

TEST_CASE("_quantize_int8 matches the reference formula per channel, for a middle and a last dim") {
  manual_seed(11);
  Tensor x = randn({3, 5, 7}) * 4;
  for (int64_t dim : {1, -1, 0}) {
    const int64_t d = dim < 0 ? dim + 3 : dim;
    int64_t outer = 1, inner = 1;
    for (int64_t k = 0; k < d; ++k) outer *= x.size(k);
    for (int64_t k = d + 1; k < 3; ++k) inner *= x.size(k);
    auto q = ops::_quantize_int8(x, dim);
    const Int8Ref ref = int8_reference(floats(x), outer, x.size(d), inner);
    CHECK(q[1].dtype() == kFloat32);
    CHECK(floats(q[1]) == ref.scale);
    std::vector<uint8_t> codes = bytes_of(q[0]);
    std::vector<int8_t> got(codes.size());
    std::memcpy(got.data(), codes.data(), codes.size());
    CHECK(got == ref.codes);
    // Dequantized: code * scale, each within half a step of x.
    Tensor y = ops::_dequantize_int8(q[0], q[1], dim, kFloat32);
    std::vector<float> xv = floats(x), yv = floats(y);
    for (size_t i = 0; i < xv.size(); ++i) {
      const float s = ref.scale[(i / static_cast<size_t>(inner)) % static_cast<size_t>(x.size(d))];
      CHECK(yv[i] == static_cast<float>(ref.codes[i]) * s);
      CHECK(std::fabs(yv[i] - xv[i]) <= 0.5f * s * (1 + 1e-6f));
    }
  }
}

TEST_CASE("int8's channels-last loop gives the reference codes on ties, clamps and non-finite values") {
  // The vectorised loop for a float [N, C] tensor quantized along its last dim (a linear's input):
  // 37 channels, so a vector remainder too. Channel c's largest finite |x| is 126 * (c + 1) / 8, so
  // x = (k + 0.5) * scale lands on a tie, which must round to even as nearbyint does.
  const int64_t N = 20, C = 37;
  std::vector<float> x(static_cast<size_t>(N * C));
  for (int64_t c = 0; c < C; ++c) {
    const float scale = static_cast<float>(c + 1) / 8.0f;  // exact in binary
    for (int64_t n = 0; n < N; ++n) {
      float v = (static_cast<float>(n % 9) - 4.0f + 0.5f) * scale;  // ties: -3.5 .. 4.5 steps
      if (n == 0) v = 126.0f * scale;                                 // the channel's max
      if (n == 1) v = -126.0f * scale;
      if (n == 2) v = 125.5f * scale;  // a tie next to the top code
      x[static_cast<size_t>(n * C + c)] = v;
    }
  }
  x[static_cast<size_t>(3 * C + 5)] = kNaN;
  x[static_cast<size_t>(4 * C + 6)] = kInf;
  x[static_cast<size_t>(5 * C + 7)] = -kInf;
  for (int64_t n = 0; n < N; ++n) x[static_cast<size_t>(n * C + 36)] = n % 2 ? 0.0f : -0.0f;  // a zero channel
  x[static_cast<size_t>(6 * C + 36)] = kNaN;
  Tensor t = tensor(x, {N, C});
  auto q = ops::_quantize_int8(t, 1);
  const Int8Ref ref = int8_reference(x, N, C, 1);
  CHECK(floats(q[1]) == ref.scale);
  std::vector<uint8_t> codes = bytes_of(q[0]);
  std::vector<int8_t> got(codes.size());
  std::memcpy(got.data(), codes.data(), codes.size());
  CHECK(got == ref.codes);
  CHECK(got[static_cast<size_t>(2 * C)] == 126);  // 125.5 rounds to the even 126
}

TEST_CASE("int8 codes keep inf, -inf and NaN, and a channel of zeros or non-finite values decodes exactly") {
  Tensor x = tensor(std::vector<float>{1.0f, kInf, -kInf, kNaN, -2.0f, 0.5f,  // channel rows: [2, 3] dim -1
                                       0.0f, 0.0f, 0.0f, kNaN, kInf, 0.0f},
                    {4, 3});
  auto q = ops::_quantize_int8(x, 0);  // channels: rows
  const std::vector<float> s = floats(q[1]);
  CHECK(s[0] == 1.0f / 126.0f);  // row 0: finite max 1
  CHECK(s[2] == 0.0f);           // row 2: zeros
  CHECK(s[3] == 0.0f);           // row 3: NaN, inf, 0
  std::vector<float> y = floats(ops::_dequantize_int8(q[0], q[1], 0, kFloat32));
  CHECK(y[1] == kInf);
  CHECK(y[2] == -kInf);
  CHECK(std::isnan(y[3]));
  CHECK(std::isnan(y[9]));
  CHECK(y[10] == kInf);
  CHECK(y[6] == 0.0f);
  CHECK(y[11] == 0.0f);
  CHECK(y[0] == 126.0f * (1.0f / 126.0f));
}

TEST_CASE("int8 takes 16-bit and float64 inputs, strided views, and decodes to any floating dtype") {
  manual_seed(5);
  Tensor base = randn({6, 8});
  for (DType dt : {kBFloat16, kFloat16, kFloat64}) {
    Tensor x = base.to(dt);
    auto q = ops::_quantize_int8(x, -1);
    auto qf = ops::_quantize_int8(x.to(kFloat32), -1);  // the formula computes in float
    CHECK(bytes_of(q[0]) == bytes_of(qf[0]));
    Tensor y = ops::_dequantize_int8(q[0], q[1], -1, dt);
    CHECK(y.dtype() == dt);
    CHECK(floats(y) == floats(ops::_dequantize_int8(qf[0], qf[1], -1, kFloat32).to(dt)));
  }
  Tensor t = base.t();  // [8, 6], strided
  auto qt = ops::_quantize_int8(t, 1);
  auto qc = ops::_quantize_int8(t.contiguous(), 1);
  CHECK(bytes_of(qt[0]) == bytes_of(qc[0]));
  CHECK(floats(qt[1]) == floats(qc[1]));
}

TEST_CASE("stochastic rounding is deterministic per (seed, offset), unbiased, and within one step") {
  // Channel max 1.26 -> scale 0.01; 0.2530 / 0.01 = 25.3: codes 25 or 26, 26 with probability 0.3.
  const int64_t n = 200000;
  std::vector<float> v(static_cast<size_t>(n), 0.2530f);
  v[0] = 1.26f;
  Tensor x = tensor(v, {1, n});
  auto a = ops::_quantize_int8(x, 0, /*seed=*/42, /*offset=*/0);
  auto b = ops::_quantize_int8(x, 0, 42, 0);
  auto c = ops::_quantize_int8(x, 0, 42, 1000);
  CHECK(bytes_of(a[0]) == bytes_of(b[0]));
  CHECK(bytes_of(a[0]) != bytes_of(c[0]));
  const float s = floats(a[1])[0];
  std::vector<uint8_t> codes = bytes_of(a[0]);
  double sum = 0;
  int outside = 0;
  for (int64_t i = 1; i < n; ++i) {
    const int8_t q = static_cast<int8_t>(codes[static_cast<size_t>(i)]);
    sum += q;
    if (q != 25 && q != 26) ++outside;
  }
  CHECK(outside == 0);
  const double mean = sum / static_cast<double>(n - 1);
  CHECK(std::fabs(mean - 0.2530 / s) < 0.01);  // 3.2 standard errors of 0.46 / sqrt(2e5) is 0.003
}

TEST_CASE("codec ops refuse bad input with errors that name the op, shapes and dtypes") {
  using test::error_message;
  CHECK_THAT(error_message([] { ops::_quantize_int8(tensor(std::vector<int64_t>{1, 2}, {2}), 0); }),
             Contains("_quantize_int8: expected a floating tensor, got int64"));
  CHECK_THAT(error_message([] { ops::_quantize_int8(ops::zeros({}), 0); }), Contains("at least one dim"));
  CHECK_THAT(error_message([] { ops::_quantize_int8(ops::zeros({2, 3}), 2); }), Contains("_quantize_int8"));
  CHECK_THAT(error_message([] {
               auto q = ops::_quantize_int8(ops::zeros({2, 3}), 1);
               ops::_dequantize_int8(q[0], ops::zeros({2}), 1, kFloat32);
             }),
             Contains("expected scale to be float32 [3]"));
  CHECK_THAT(error_message([] {
               auto q = ops::_quantize_int8(ops::zeros({2, 3}), 1);
               ops::_dequantize_int8(q[0], q[1], 1, kInt64);
             }),
             Contains("dtype must be floating, got int64"));
  CHECK_THAT(error_message([] { ops::_unpack_sign_bits(ops::zeros({1}, kUInt8), {3, 3}, kFloat32); }),
             Contains("_unpack_sign_bits: [3, 3] needs 2 bytes of bits, got 1"));
  CHECK_THAT(error_message([] { ops::_unpack_sign_bits(ops::zeros({4}), {3}, kFloat32); }),
             Contains("expected bits to be a 1-D uint8 tensor, got float32"));
}
