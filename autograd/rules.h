#pragma once
// What the derivative rules share (they live in functional_*.cpp, next to the public function that
// records each). A rule is a plain function
//   variable_list d_op(OpNode& n, OpSaved& s, const variable_list& g)
// where OpSaved is the rule's own struct of what the forward kept (see op_node.h), returning the
// gradient of each forward input, written with the differentiable public ops so that
// create_graph=true gives exact higher-order gradients. Where a fused kernel is faster, rules use it
// only when grad mode is off (no higher-order graph is being built).
#include <algorithm>

#include "autograd/autograd_meta.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/op_node.h"
#include "autograd/view_nodes.h"
#include "ops/ops.h"

namespace graft::autograd::rules {

// True while backward builds a higher-order graph.
inline bool building_graph() { return is_recording_enabled(); }

// Sorted, wrapped reduction dims (empty = all dims).
inline Shape reduced_dims(const Shape& dims, int64_t ndim) {
  Shape out;
  if (dims.empty()) {
    for (int64_t d = 0; d < ndim; ++d) out.push_back(d);
    return out;
  }
  for (int64_t d : dims) out.push_back(wrap_dim(d, ndim, "reduction"));
  std::sort(out.begin(), out.end());
  return out;
}

// Re-inserts the reduced dims (as size 1) into a reduction's gradient so it broadcasts over the input.
inline Tensor unsqueeze_reduced(Tensor g, const Shape& dims, int64_t ndim, bool keepdim) {
  if (keepdim || ndim == 0) return g;
  for (int64_t d : reduced_dims(dims, ndim)) g = graft::unsqueeze(g, d);
  return g;
}

inline int64_t reduced_count(const Shape& sizes, const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : reduced_dims(dims, static_cast<int64_t>(sizes.size()))) n *= sizes[d];
  return n;
}

inline Tensor zeros_of(const TensorMeta& in) { return graft::zeros(in.shape, TensorOptions{}.dtype(in.dtype).device(in.device)); }

}  // namespace graft::autograd::rules
