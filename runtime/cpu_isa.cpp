#include "runtime/cpu_isa.h"

#include <cstdlib>

#include "runtime/error.h"

namespace graft {

bool cpu_is_intel() {
#if defined(__x86_64__)
  static const bool intel = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") != 0;
  }();
  return intel;
#else
  return false;
#endif
}

CpuIsa detected_cpu_isa() {
#if defined(__x86_64__)
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    if (avx512 && __builtin_cpu_supports("avx512bf16")) return CpuIsa::Avx512CoreBf16;
    if (avx512) return CpuIsa::Avx512Core;
    if (avx2) return CpuIsa::Avx2;
    return CpuIsa::Baseline;
  }();
  return isa;
#else
  return CpuIsa::Baseline;
#endif
}

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::Baseline: return "DEFAULT";
    case CpuIsa::Avx2: return "AVX2";
    case CpuIsa::Avx512Core: return "AVX512_CORE";
    case CpuIsa::Avx512CoreBf16: return "AVX512_CORE_BF16";
  }
  return "?";
}

CpuIsa parse_cpu_isa(const std::string& name) {
  if (name == "ALL" || name == "AVX512_CORE_AMX" || name == "AVX512_CORE_BF16") return CpuIsa::Avx512CoreBf16;
  if (name == "AVX512_CORE" || name == "AVX512_CORE_VNNI") return CpuIsa::Avx512Core;
  if (name == "AVX2" || name == "AVX2_VNNI") return CpuIsa::Avx2;
  if (name == "DEFAULT" || name == "SSE41" || name == "AVX") return CpuIsa::Baseline;
  GRAFT_ERROR("GRAFT_MAX_CPU_ISA: unknown value '", name,
              "'; expected one of ALL, AVX512_CORE_AMX, AVX512_CORE_BF16, AVX512_CORE_VNNI, AVX512_CORE, "
              "AVX2_VNNI, AVX2, AVX, SSE41, DEFAULT");
}

CpuIsa cpu_isa() {
  static const CpuIsa isa = [] {
    const CpuIsa have = detected_cpu_isa();
    const char* cap = std::getenv("GRAFT_MAX_CPU_ISA");
    if (cap == nullptr || *cap == '\0') return have;
    const CpuIsa c = parse_cpu_isa(cap);
    return static_cast<int>(c) < static_cast<int>(have) ? c : have;
  }();
  return isa;
}

}  // namespace graft
