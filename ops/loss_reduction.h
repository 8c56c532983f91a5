#pragma once
// How a loss reduces its per-sample values. A plain enum with no graft types, so the CUDA kernels
// (compiled by nvcc, cuda/kernels/softmax_loss.h) take the very value the shared plan parsed.
namespace graft {

enum class LossReduction : int { None, Mean, Sum };

}  // namespace graft
