#pragma once
// The device-independent half of topk: the argument checks and their messages, the wrapped dim,
// the output shape, and the geometry both devices iterate in. ops/sort.cpp (CPU) and
// cuda/sort_cuda.cpp supply only the selection.
//
// Geometry: x, made contiguous, is [outer, len, inner] around `dim`; each of the outer * inner
// rows (row r = o * inner + i) selects k of its len elements, and the outputs are contiguous
// [outer, k, inner] (out_sizes: x's shape with k at `dim`), so element j of row r sits at
// o * k * inner + j * inner + i. A 0-d x is one row of one element with a 0-d result.
#include <cstdint>

#include "runtime/tensor.h"

namespace graft::kernels {

struct TopkPlan {
  int64_t dim = 0;  // wrapped (0 for a 0-d input)
  int64_t k = 0;
  int64_t outer = 1, len = 1, inner = 1;
  Shape out_sizes;
};

// Checks x (defined, not bool), dim (in range; -1 and 0 for a 0-d x) and k (0 <= k <= the size
// at dim, 0 or 1 for a 0-d x). A 0-d x has k = 1 in the plan whatever k was: PyTorch returns
// the element itself for k = 0 too.
TopkPlan plan_topk(const Tensor& x, int64_t k, int64_t dim);

}  // namespace graft::kernels
