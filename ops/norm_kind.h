#pragma once
// Which p a vector norm has: the kernels special-case these. A plain enum with no graft types, so
// the CUDA kernels (compiled by nvcc, cuda/kernels/reduce.h) take the very value the shared plan
// chose (ops/reduce_plan.h: plan_norm).
namespace graft {

enum class NormKind : int { Zero, One, Two, Inf, NegInf, General };

}  // namespace graft
