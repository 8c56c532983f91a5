#pragma once
// CpuIsa: the instruction sets graft's own vector loops may use, detected once and capped by
// GRAFT_MAX_CPU_ISA, as oneDNN's loops are capped by ONEDNN_MAX_CPU_ISA (same names).
//
// Invariants:
// 1. cpu_isa() never exceeds what the CPU reports (cpuid through __builtin_cpu_supports), so a
//    path chosen from it cannot fault; the cap only lowers it, to test the slower paths on a
//    machine that has the fast ones (`GRAFT_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2`).
// 2. Every path gives the same bits: a lower ISA is slower, never different. Loops that pick a
//    path from cpu_isa() have a test that runs them under each cap (tests/ops/test_reduced_float.cpp).
// 3. Read once, at the first call; changing the environment afterwards has no effect (the value
//    is cached, as oneDNN caches its own).
#include <string>

namespace graft {

// Ordered: each level includes the ones below it.
enum class CpuIsa : int {
  Baseline = 0,      // x86-64 (SSE2): scalar loops
  Avx2 = 1,          // AVX2 + FMA + F16C: 8-lane float, hardware fp16 conversion
  Avx512Core = 2,    // AVX-512 F/BW/VL/DQ: 16-lane float
  Avx512CoreBf16 = 3 // + AVX512_BF16: hardware float -> bfloat16 rounding and bf16 dot products
};

CpuIsa cpu_isa();           // min(detected, GRAFT_MAX_CPU_ISA)
CpuIsa detected_cpu_isa();  // what the CPU has
// "AVX512_CORE_BF16", ...: oneDNN's spelling, which GRAFT_MAX_CPU_ISA also accepts (plus "ALL").
const char* cpu_isa_name(CpuIsa isa);

// The copy of a kernel that cpu_isa() allows: each argument is the same loop compiled with
// __attribute__((target(...))) for AVX-512 (F/BW/VL), AVX2, or no target.
template <class Fn>
Fn pick_for_isa(Fn avx512, Fn avx2, Fn generic) {
  const CpuIsa isa = cpu_isa();
  return isa >= CpuIsa::Avx512Core ? avx512 : isa >= CpuIsa::Avx2 ? avx2 : generic;
}
// Whether the CPU is Intel's (cpuid's vendor; false off x86). The same ISA runs at different rates
// on different vendors' cores: Intel's AVX512_BF16 dot products issue on one port, AMD's at twice
// the float rate (ops/dnnl_utils.h: which bf16 path pays).
bool cpu_is_intel();
// Parses a GRAFT_MAX_CPU_ISA value; throws graft::Error listing the accepted names.
CpuIsa parse_cpu_isa(const std::string& name);

}  // namespace graft
