#pragma once
// Size2: a 2-D size argument that accepts one number for both dims or a pair: `3` or `{3, 5}`
// (libtorch's ExpandingArray<2>).
#include <cstdint>
#include <initializer_list>

#include "runtime/error.h"
#include "runtime/shape.h"

namespace graft::nn {

struct Size2 {
  Size2(int64_t v) : h(v), w(v) {}  // NOLINT(google-explicit-constructor)
  Size2(std::initializer_list<int64_t> v) {
    GRAFT_CHECK(v.size() == 1 || v.size() == 2, "Size2: expected 1 or 2 values, got ", v.size());
    h = *v.begin();
    w = *(v.end() - 1);
  }
  Shape shape() const { return {h, w}; }
  bool operator==(const Size2&) const = default;
  int64_t h = 0, w = 0;
};

}  // namespace graft::nn
