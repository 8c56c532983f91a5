#include "runtime/memory_format.h"

#include <algorithm>
#include <array>
#include <vector>

#include "runtime/error.h"

namespace graft {

const char* memory_format_name(MemoryFormat f) {
  switch (f) {
    case MemoryFormat::Contiguous: return "Contiguous";
    case MemoryFormat::ChannelsLast: return "ChannelsLast";
    case MemoryFormat::Preserve: return "Preserve";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, MemoryFormat f) { return os << memory_format_name(f); }

Shape channels_last_strides(const Shape& sizes) {
  GRAFT_CHECK(sizes.size() == 4, "channels_last: the format needs a 4-D tensor, got ", shape_str(sizes));
  int64_t c = std::max<int64_t>(sizes[1], 1), w = std::max<int64_t>(sizes[3], 1), h = std::max<int64_t>(sizes[2], 1);
  return Shape{c * w * h, 1, c * w, c};
}

bool is_channels_last_contiguous(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != 4) return false;
  int64_t expected = 1;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 0) return true;
    if (sizes[d] == 1) continue;
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

bool strides_like_channels_last(const Shape& sizes, const Shape& strides) {
  if (sizes.size() != 4) return false;
  int64_t min = 0;
  for (int d : {1, 3, 2, 0}) {
    if (sizes[d] == 0) return false;
    if (strides[d] < min) return false;
    // N's stride equal to C's means every other dim is 1 wide: no order to tell, so Contiguous.
    if (d == 0 && min == strides[1]) return false;
    min = strides[d];
    if (sizes[d] > 1) min *= sizes[d];
  }
  return true;
}

bool is_non_overlapping_and_dense(const Shape& sizes, const Shape& strides) {
  size_t n = sizes.size();
  if (n > 25) return false;
  std::array<int, 25> perm{};
  int m = 0;
  for (size_t d = 0; d < n; ++d) {
    if (sizes[d] == 0) return true;
    if (sizes[d] != 1) perm[m++] = static_cast<int>(d);
  }
  std::sort(perm.begin(), perm.begin() + m, [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (int i = 0; i < m; ++i) {
    if (strides[perm[i]] != expected) return false;
    expected *= sizes[perm[i]];
  }
  return true;
}

bool is_dense_like(const Shape& sizes, const Shape& strides, const Shape& like) {
  if (strides.size() != sizes.size() || like.size() != sizes.size() || !is_non_overlapping_and_dense(sizes, strides))
    return false;
  for (size_t d = 0; d < sizes.size(); ++d)
    if (sizes[d] != 1 && strides[d] != like[d]) return false;
  return true;
}

Shape preserve_format_strides(const Shape& sizes, const Shape& strides) {
  if (std::any_of(strides.begin(), strides.end(), [](int64_t s) { return s < 0; })) return contiguous_strides(sizes);
  if (is_non_overlapping_and_dense(sizes, strides)) return strides;
  const size_t n = sizes.size();
  std::vector<size_t> inner_first(n);  // dims innermost first, from the row-major order
  for (size_t i = 0; i < n; ++i) inner_first[i] = n - 1 - i;
  auto goes_outside = [&](size_t a, size_t b) {  // +1: a belongs outside b; -1: inside; 0: either
    if (strides[a] == 0 || strides[b] == 0) return 0;
    if (strides[a] != strides[b]) return strides[a] > strides[b] ? 1 : -1;
    return sizes[a] > sizes[b] ? 1 : 0;
  };
  // An insertion sort: the comparison is not a strict weak order (0-stride dims are "either"), and
  // each dim moves inward only past the dims it must.
  for (size_t i = 1; i < n; ++i)
    for (size_t j = i; j > 0; --j) {
      const int c = goes_outside(inner_first[j - 1], inner_first[j]);
      if (c < 0) break;
      if (c > 0) std::swap(inner_first[j - 1], inner_first[j]);
    }
  Shape out(n);
  int64_t running = 1;
  for (size_t d : inner_first) {
    out[d] = running;
    running *= std::max<int64_t>(sizes[d], 1);
  }
  return out;
}

}  // namespace graft
