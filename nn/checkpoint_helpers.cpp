#include "nn/checkpoint_helpers.h"

#include <algorithm>
#include <memory>

namespace graft::nn {

namespace {

// Recomputation happens during backward, after these helpers returned: the layers are shared with
// the checkpoints, never referenced from the caller's (possibly dead) vector.
using Layers = std::shared_ptr<const std::vector<Layer>>;

Tensor run_range(const Layers& layers, size_t lo, size_t hi, Tensor x) {
  for (size_t i = lo; i < hi; ++i) x = (*layers)[i](x);
  return x;
}

Tensor nested(const Layers& layers, size_t lo, size_t hi, const Tensor& x, const autograd::CheckpointOptions& opts) {
  if (hi - lo <= 1) return run_range(layers, lo, hi, x);
  size_t mid = lo + (hi - lo) / 2;
  // The halves are checkpoints themselves, so this level keeps only its own input.
  return autograd::checkpoint(
      [layers, lo, mid, hi, opts](const Tensor& in) {
        Tensor h = nested(layers, lo, mid, in, opts);
        return nested(layers, mid, hi, h, opts);
      },
      x, opts);
}

// The right spine of the halving tree (the last half, its last half, ...) runs without a checkpoint
// of its own; its left halves are nested checkpoints. Backward starts at the end, where the deepest
// point of the recursion already holds every spine input at once, so keeping them from the
// forward costs no extra peak memory, while checkpointing them would recompute N/2 + N/4 + ... = N
// layers just to rebuild those same inputs. After forward, log2(N) inputs (and the last layer's
// activations) are alive instead of one.
Tensor spine(const Layers& layers, size_t lo, size_t hi, const Tensor& x, const autograd::CheckpointOptions& opts) {
  if (hi - lo <= 1) return run_range(layers, lo, hi, x);
  size_t mid = lo + (hi - lo) / 2;
  return spine(layers, mid, hi, nested(layers, lo, mid, x, opts), opts);
}

}  // namespace

Tensor checkpoint_sequential(const std::vector<Layer>& layers, int64_t segments, const Tensor& input,
                             autograd::CheckpointOptions options) {
  GRAFT_CHECK(segments >= 1, "checkpoint_sequential: segments must be at least 1, got ", segments);
  size_t n = layers.size();
  if (n == 0) return input;
  auto shared = std::make_shared<const std::vector<Layer>>(layers);
  size_t seg = std::max<size_t>(1, (n + static_cast<size_t>(segments) - 1) / static_cast<size_t>(segments));
  Tensor x = input;
  size_t lo = 0;
  for (; lo + seg < n; lo += seg) {
    size_t hi = lo + seg;
    x = autograd::checkpoint([shared, lo, hi](const Tensor& in) { return run_range(shared, lo, hi, in); }, x,
                             options);
  }
  return run_range(shared, lo, n, x);  // the last segment's activations are consumed first by backward
}

Tensor checkpoint_nested(const std::vector<Layer>& layers, const Tensor& input, autograd::CheckpointOptions options) {
  return spine(std::make_shared<const std::vector<Layer>>(layers), 0, layers.size(), input, options);
}

}  // namespace graft::nn
