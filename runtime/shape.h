#pragma once
// Shape and stride arithmetic shared by views, the elementwise iterator and error messages.
#include <cstdint>
#include <string>
#include <vector>

namespace graft {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& sizes);
// Row-major strides for `sizes` (in elements).
Shape contiguous_strides(const Shape& sizes);
// "[2, 3]"
std::string shape_str(const Shape& s);
// Wraps a possibly negative dim into [0, ndim); throws naming `op` when out of range.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// NumPy broadcasting of two shapes; throws naming `op` when they are incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// True when a tensor with these sizes/strides is laid out row-major without gaps.
bool is_contiguous_layout(const Shape& sizes, const Shape& strides);

}  // namespace graft
