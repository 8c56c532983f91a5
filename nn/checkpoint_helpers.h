#pragma once
// Checkpointing a sequence of layers:
// - checkpoint_sequential: `segments` checkpointed chunks (the last runs plainly, as its
//   activations are needed at once by backward): O(N/segments + segments) live activations for one
//   extra forward. segments = sqrt(N) gives O(sqrt N) memory.
// - checkpoint_nested: recursive halving. Each level keeps only its input, so O(log N) activations
//   are alive at once, for O(N log N) recomputation. The right spine of the tree (the half that
//   backward consumes first, recursively) is not checkpointed: its log2(N) inputs are held from the
//   forward, which the peak of the recursion needs anyway, and N layers of recompute are saved.
#include <functional>
#include <vector>

#include "autograd/checkpoint.h"
#include "runtime/tensor.h"

namespace graft::nn {

using Layer = std::function<Tensor(const Tensor&)>;

Tensor checkpoint_sequential(const std::vector<Layer>& layers, int64_t segments, const Tensor& input,
                             autograd::CheckpointOptions options = {});
Tensor checkpoint_nested(const std::vector<Layer>& layers, const Tensor& input,
                         autograd::CheckpointOptions options = {});

}  // namespace graft::nn
