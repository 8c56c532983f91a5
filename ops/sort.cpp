// topk on the CPU. Checks and geometry: ops/sort_plan.h.
//
// Each row is copied into a buffer of (value, index) pairs, the value in math::opmath_t (the type
// itself, float for bfloat16/float16: exact), and selected with the standard algorithms under the
// order "a before b": a > b for largest (a < b for smallest), NaN counting as larger than every
// number. The order only compares values, so which of several equal values come first is decided
// by the algorithms' moves. That is the tie rule, and it is PyTorch's on the CPU (ATen's topk
// loop, torch 2.x, whose wheels use the same libstdc++ algorithms), pinned against torch by
// tests/ops/test_sort.cpp:
//   - k * 64 <= len: std::partial_sort of the first k (heap select, then heap sort);
//   - otherwise:     std::nth_element at k - 1, then, when sorted, std::sort of the first k - 1
//                    (the k-th is already in place).
// So ties are deterministic (the same row always gives the same indices) but not ordered by
// index: [1, 3, 3, 2, 3, 1] with k = 3 gives indices [2, 4, 1]. The order is the standard
// library's (libstdc++, as graft's builds); another one (libc++) may order ties otherwise, which
// the pinned cases would report. With sorted = false the second
// path returns the k selected in nth_element's order. CUDA's kernel orders ties by index
// instead (cuda/kernels/sort.cu); the values agree on both devices, only tied indices may not.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/math/device_math.h"
#include "ops/sort_plan.h"
#include "runtime/parallel.h"

namespace graft::kernels {
namespace {

template <class A>
inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return std::isnan(v);
  else return false;
}

// Selects the best k of q (every element of one row) into q[0, k): see the top of the file.
template <class A>
void select_best(std::vector<std::pair<A, int64_t>>& q, int64_t k, bool largest, bool sorted) {
  using E = std::pair<A, int64_t>;
  auto run = [&](auto before) {
    if (k * 64 <= static_cast<int64_t>(q.size())) {
      std::partial_sort(q.begin(), q.begin() + k, q.end(), before);
      return;
    }
    std::nth_element(q.begin(), q.begin() + (k - 1), q.end(), before);
    if (sorted) std::sort(q.begin(), q.begin() + (k - 1), before);
  };
  if (largest)
    run([](const E& a, const E& b) { return (is_nan(a.first) && !is_nan(b.first)) || a.first > b.first; });
  else
    run([](const E& a, const E& b) { return (!is_nan(a.first) && is_nan(b.first)) || a.first < b.first; });
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

std::vector<Tensor> topk_cpu(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  const TopkPlan p = plan_topk(x, k, dim);
  Tensor values = new_tensor(p.out_sizes, x.dtype(), x.device());
  Tensor indices = new_tensor(p.out_sizes, kInt64, x.device());
  const int64_t rows = p.outer * p.inner;
  if (p.k == 0 || rows == 0) return {values, indices};
  Tensor xc = contiguous_cpu(x);
  dispatch_all_dtypes(x.dtype(), "topk", [&]<class T>() {
    using A = math::opmath_t<T>;
    const T* src = static_cast<const T*>(xc.data_ptr());
    T* vout = static_cast<T*>(values.data_ptr());
    int64_t* iout = static_cast<int64_t*>(indices.data_ptr());
    const int64_t len = p.len, inner = p.inner, kk = p.k;
    int64_t grain = grain_for(len);
    parallel_for(0, rows, grain, [&](int64_t b, int64_t e) {
      std::vector<std::pair<A, int64_t>> q(static_cast<size_t>(len));
      for (int64_t r = b; r < e; ++r) {
        const int64_t o = r / inner, i = r % inner;
        const T* row = src + o * len * inner + i;
        for (int64_t j = 0; j < len; ++j) q[j] = {static_cast<A>(row[j * inner]), j};
        select_best(q, kk, largest, sorted);
        const int64_t out = o * kk * inner + i;
        for (int64_t j = 0; j < kk; ++j) {
          vout[out + j * inner] = row[q[j].second * inner];  // the element itself, not its widened copy
          iout[out + j * inner] = q[j].second;
        }
      }
    });
  });
  return {values, indices};
}

}  // namespace graft::kernels
