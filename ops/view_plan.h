#pragma once
// The shape arithmetic of views that more than the view kernels need (ops/view.cpp): reshape and
// flatten decide their target shape with it, both in ops:: and in graft:: (autograd/).
#include <optional>

#include "runtime/shape.h"

namespace graft::kernels {

// `shape` with its one -1 resolved against numel; throws naming `op` and the shape viewed `from`.
Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from);
// The strides that view a tensor of (sizes, strides) as `target`, or nullopt when no view can
// (a dim that spans two non-contiguous pieces): reshape then copies.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& target);
// The shape of flatten(start_dim, end_dim): a 0-d tensor becomes [1].
Shape flatten_shape(const Shape& sizes, int64_t start_dim, int64_t end_dim);

}  // namespace graft::kernels
