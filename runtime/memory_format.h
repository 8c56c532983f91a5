#pragma once
// MemoryFormat: the order in which a dense tensor's elements lie in memory, as PyTorch's
// torch.memory_format.
//
//   Contiguous    row-major: [N, C, H, W] has strides [C*H*W, H*W, W, 1]
//   ChannelsLast  for 4-D tensors, channels innermost: strides [H*W*C, 1, W*C, C] (NHWC in memory,
//                 the sizes stay NCHW, so every op sees the same logical shape)
//   Preserve      only as a request (clone, to, the *_like factories): keep the source's layout
//                 (preserve_format_strides)
//
// Invariants:
// - A layout is a property of strides only; no tensor carries a format tag. So a channels-last
//   tensor is an ordinary strided view to every op that does not care, and the formats can never
//   disagree with the strides.
// - is_channels_last_contiguous() ignores size-1 dims (as is_contiguous does), so a tensor can be
//   contiguous in both formats ([N, 1, H, W], [N, C, 1, 1]). strides_like_channels_last() breaks
//   that tie by the order of the strides themselves (PyTorch's rule): it is what kernels use to
//   pick a layout for their outputs, so an NCHW tensor never turns NHWC by accident.
#include <cstdint>
#include <ostream>

#include "runtime/shape.h"

namespace graft {

enum class MemoryFormat : int64_t { Contiguous = 0, ChannelsLast = 1, Preserve = 2 };

const char* memory_format_name(MemoryFormat f);
std::ostream& operator<<(std::ostream& os, MemoryFormat f);

// The dense channels-last strides of a 4-D shape (size-1 dims still get their natural stride).
Shape channels_last_strides(const Shape& sizes);
// Whether strides lay a 4-D shape out densely in N, H, W, C order (size-1 dims ignored).
bool is_channels_last_contiguous(const Shape& sizes, const Shape& strides);
// Whether a 4-D tensor's strides are ordered C < W < H < N (with ties on size-1 dims broken
// towards Contiguous). Dense or not.
bool strides_like_channels_last(const Shape& sizes, const Shape& strides);
// Whether the elements fill one gap-free block in some dim order (any permutation of a
// contiguous layout): such a layout can be reproduced by a fresh allocation with the same strides.
bool is_non_overlapping_and_dense(const Shape& sizes, const Shape& strides);
// The strides of a new dense tensor laid out like one of `sizes` and `strides` (PyTorch's
// preserve_format, as clone, to and empty_like apply it): a non-overlapping, dense source's strides
// exactly, size-1 dims included; any other source's dims in the same order by stride (smallest
// innermost; a 0-stride dim keeps its place; of equal strides the smaller dim goes inside), densely;
// contiguous when a stride is negative.
Shape preserve_format_strides(const Shape& sizes, const Shape& strides);
// Whether strides lay `sizes` out densely in the layout of `like` (another tensor's strides for the
// same sizes): non-overlapping and dense, with like's stride in every dim of size above 1 (a size-1
// dim's stride moves no memory). Two such tensors walk their elements in one memory order: PyTorch's
// gradient layout contract, and what the fused optimizer kernels need of a parameter, its gradient
// and its state.
bool is_dense_like(const Shape& sizes, const Shape& strides, const Shape& like);

}  // namespace graft
