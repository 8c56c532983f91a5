// float32 <-> bfloat16 / float16 conversion against PyTorch 2.15 (tests/runtime/data/rounding.json,
// made by make_dtype_fixtures.py): the scalar conversion of runtime/half_types.h, and the vectorised
// one of ops/reduced_float.h (through a contiguous to()) under every GRAFT_MAX_CPU_ISA level.
//
// NaN: PyTorch's own paths disagree (its vectorised bf16 path writes 0xffff, its scalar path 0x7fc0;
// its fp16 keeps part of the payload). graft writes sign|0x7FC0 (bf16) and sign|0x7E00 (fp16) on
// every path (half_types.h invariant 1), so NaN cases check NaN-ness and those bits; every other
// case checks PyTorch's exact bits.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graft.h"
#include "ops/reduced_float.h"
#include "runtime/cpu_isa.h"
#include "support/fixtures.h"
#include "support/process.h"

using namespace graft;

namespace {

struct RoundingCase {
  std::string what;
  uint32_t f32 = 0;
  uint16_t bf16 = 0, f16 = 0;
};

const std::vector<RoundingCase>& rounding_cases() {
  static const std::vector<RoundingCase> cases = [] {
    auto j = nlohmann::json::parse(test::read_file(test::tests_path("runtime/data/rounding.json")));
    std::vector<RoundingCase> out;
    for (const auto& c : j.at("cases"))
      out.push_back({c.at("what").get<std::string>(), c.at("f32").get<uint32_t>(), c.at("bf16").get<uint16_t>(),
                     c.at("f16").get<uint16_t>()});
    return out;
  }();
  return cases;
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

bool f32_is_nan(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }

// graft's canonical NaN for a NaN input with this sign bit.
uint16_t canonical_bf16_nan(uint32_t f32) { return static_cast<uint16_t>(((f32 >> 16) & 0x8000u) | 0x7FC0u); }
uint16_t canonical_f16_nan(uint32_t f32) { return static_cast<uint16_t>(((f32 >> 16) & 0x8000u) | 0x7E00u); }

// The expected bits of graft's conversion: PyTorch's, except NaN (graft's canonical NaN).
uint16_t expected_bf16(const RoundingCase& c) { return f32_is_nan(c.f32) ? canonical_bf16_nan(c.f32) : c.bf16; }
uint16_t expected_f16(const RoundingCase& c) { return f32_is_nan(c.f32) ? canonical_f16_nan(c.f32) : c.f16; }

std::string hex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

// Each fixture case repeated `copies` times in a contiguous float32 tensor, so every case lands
// in vector bodies (and, with an odd count, in the scalar tail too).
Tensor repeated_cases(int64_t copies) {
  const auto& cases = rounding_cases();
  Tensor t = ops::empty({static_cast<int64_t>(cases.size()) * copies}, kFloat32);
  auto* p = static_cast<uint32_t*>(t.data_ptr());
  for (size_t i = 0; i < cases.size(); ++i)
    for (int64_t k = 0; k < copies; ++k) p[static_cast<int64_t>(i) * copies + k] = cases[i].f32;
  return t;
}

// The vectorised conversion of every case through a contiguous to(), each case's copies checked.
void check_vectorised_conversion() {
  const auto& cases = rounding_cases();
  constexpr int64_t kCopies = 37;  // 37 = 2 * 16 + 5: vector bodies of 16 and 8, and a tail
  Tensor src = repeated_cases(kCopies);
  Tensor bf = src.to(kBFloat16), hf = src.to(kFloat16);
  REQUIRE(bf.dtype() == kBFloat16);
  REQUIRE(hf.dtype() == kFloat16);
  const auto* b = static_cast<const uint16_t*>(bf.data_ptr());
  const auto* h = static_cast<const uint16_t*>(hf.data_ptr());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].what << " (f32 " << hex(cases[i].f32) << ", ISA " << cpu_isa_name(cpu_isa()) << ")");
    for (int64_t k = 0; k < kCopies; ++k) {
      const int64_t at = static_cast<int64_t>(i) * kCopies + k;
      REQUIRE(hex(b[at]) == hex(expected_bf16(cases[i])));
      REQUIRE(hex(h[at]) == hex(expected_f16(cases[i])));
    }
  }
  // And back: 16 bits -> float32 is exact, NaN stays NaN.
  Tensor bf_back = bf.to(kFloat32), hf_back = hf.to(kFloat32);
  const auto* bb = static_cast<const float*>(bf_back.data_ptr());
  const auto* hb = static_cast<const float*>(hf_back.data_ptr());
  for (size_t i = 0; i < cases.size(); ++i) {
    INFO(cases[i].what);
    const int64_t at = static_cast<int64_t>(i) * kCopies + kCopies - 1;
    CHECK(std::isnan(bb[at]) == f32_is_nan(cases[i].f32));
    CHECK(std::isnan(hb[at]) == f32_is_nan(cases[i].f32));
    if (!f32_is_nan(cases[i].f32)) {
      CHECK(bb[at] == static_cast<float>(BFloat16::from_bits(expected_bf16(cases[i]))));
      CHECK(hb[at] == static_cast<float>(Half::from_bits(expected_f16(cases[i]))));
    }
  }
}

}  // namespace

TEST_CASE("the rounding fixture covers every class the conversion distinguishes") {
  const auto& cases = rounding_cases();
  REQUIRE(cases.size() >= 80);
  int nan = 0, inf = 0, subnormal = 0;
  for (const auto& c : cases) {
    nan += f32_is_nan(c.f32);
    inf += (c.f32 & 0x7FFFFFFFu) == 0x7F800000u;
    subnormal += (c.f32 & 0x7F800000u) == 0 && (c.f32 & 0x7FFFFFu) != 0;
  }
  CHECK(nan >= 8);
  CHECK(inf == 2);
  CHECK(subnormal >= 6);
}

TEST_CASE("scalar float -> bfloat16/float16 conversion gives PyTorch's bits; NaN gives graft's canonical NaN") {
  for (const auto& c : rounding_cases()) {
    INFO(c.what << " (f32 " << hex(c.f32) << ")");
    const float f = from_bits(c.f32);
    const BFloat16 b(f);
    const Half h(f);
    CHECK(hex(b.x) == hex(expected_bf16(c)));
    CHECK(hex(h.x) == hex(expected_f16(c)));
    if (f32_is_nan(c.f32)) {
      CHECK(std::isnan(static_cast<float>(b)));
      CHECK(std::isnan(static_cast<float>(h)));
      // PyTorch's own bits are a NaN too (its paths only disagree on which NaN).
      CHECK(std::isnan(static_cast<float>(BFloat16::from_bits(c.bf16))));
      CHECK(std::isnan(static_cast<float>(Half::from_bits(c.f16))));
    }
  }
}

TEST_CASE("vectorised float -> bfloat16/float16 conversion gives the same bits at this machine's ISA") {
  check_vectorised_conversion();
}

// Run by the next test case in a child process, under a GRAFT_MAX_CPU_ISA cap (hidden from a plain
// run: cpu_isa() is read once per process, so each level needs its own process).
TEST_CASE("vectorised conversion under the ISA cap in the environment", "[.isa_child]") {
  const char* cap = std::getenv("GRAFT_MAX_CPU_ISA");
  REQUIRE(cap != nullptr);
  const CpuIsa want = parse_cpu_isa(cap);
  const CpuIsa expect = static_cast<int>(want) < static_cast<int>(detected_cpu_isa()) ? want : detected_cpu_isa();
  REQUIRE(cpu_isa() == expect);
  check_vectorised_conversion();
}

TEST_CASE("vectorised conversion gives the same bits under every GRAFT_MAX_CPU_ISA level") {
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  for (const char* isa : {"DEFAULT", "AVX2", "AVX512_CORE", "AVX512_CORE_BF16"}) {
    INFO("GRAFT_MAX_CPU_ISA=" << isa << " (this CPU: " << cpu_isa_name(detected_cpu_isa()) << ")");
    test::RunOptions opts;
    opts.merge_stderr = true;
    opts.timeout_s = 60;
    auto r = test::run_process(std::string("GRAFT_MAX_CPU_ISA=") + isa + " '" + exe + "' '[.isa_child]'", opts);
    INFO(r.out);
    CHECK_FALSE(r.timed_out);
    CHECK(r.exit_code == 0);
  }
}

TEST_CASE("every bfloat16 and float16 bit pattern converts to float and back unchanged") {
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO(dt);
    const uint32_t inf_bits = dt == kBFloat16 ? 0x7F80u : 0x7C00u;
    auto to_f = [&](uint16_t v) {
      return dt == kBFloat16 ? static_cast<float>(BFloat16::from_bits(v)) : static_cast<float>(Half::from_bits(v));
    };
    auto from_f = [&](float f) { return dt == kBFloat16 ? BFloat16(f).x : Half(f).x; };
    Tensor all16 = ops::empty({65536}, dt);
    auto* p = static_cast<uint16_t*>(all16.data_ptr());
    for (uint32_t v = 0; v < 65536; ++v) p[v] = static_cast<uint16_t>(v);
    // The vectorised conversions (contiguous to()) on all patterns at once.
    Tensor f = all16.to(kFloat32);
    Tensor back = f.to(dt);
    const auto* fp = static_cast<const float*>(f.data_ptr());
    const auto* bp = static_cast<const uint16_t*>(back.data_ptr());
    int64_t scalar_bad = 0, vector_bad = 0;
    for (uint32_t v = 0; v < 65536; ++v) {
      const auto bits = static_cast<uint16_t>(v);
      const bool nan = (v & 0x7FFFu) > inf_bits;
      const float scalar = to_f(bits);
      if (nan) {
        scalar_bad += !std::isnan(scalar) || !std::isnan(to_f(from_f(scalar)));
        vector_bad += !std::isnan(fp[v]) || !std::isnan(to_f(bp[v]));
      } else {
        scalar_bad += from_f(scalar) != bits;
        vector_bad += bp[v] != bits || std::memcmp(&fp[v], &scalar, 4) != 0;
      }
    }
    CHECK(scalar_bad == 0);
    CHECK(vector_bad == 0);
  }
}
