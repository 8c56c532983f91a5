#pragma once
// parallel_for: split [begin, end) into chunks over the OpenMP pool, but only when the range is
// larger than `grain`. Tiny ops (the common case in an autograd graph) run inline on the calling
// thread and never pay for waking threads.
#include <algorithm>
#include <cstdint>

#ifdef _OPENMP
#include <omp.h>
#endif

namespace graft {

// Elements per task below which work stays on one thread. Chosen so one chunk costs well over the
// ~2-5 us it takes to wake the pool.
inline constexpr int64_t kGrainSize = 32768;

// The grain for items that each cost `work_per_item` units (elements, multiply-adds): enough items
// that a share is kGrainSize units, and at least one.
inline int64_t grain_for(int64_t work_per_item) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, work_per_item));
}

// The threads an op started on the calling thread may use: set_num_threads()'s count, or 1 while
// the contention monitor sees other processes keeping this thread waiting (contention_monitor.h).
int get_num_threads();
void set_num_threads(int n);
bool in_parallel_region();

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  int64_t n = end - begin;
  if (n <= 0) return;
#ifdef _OPENMP
  int nthreads = n > grain ? get_num_threads() : 1;
  if (nthreads > 1 && !in_parallel_region()) {
    int64_t chunks = std::min<int64_t>(nthreads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(static_cast<int>(chunks))
    {
      int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      int64_t per = (n + nt - 1) / nt;
      int64_t b = begin + t * per, e = std::min(end, b + per);
      if (b < e) f(b, e);
    }
    return;
  }
#endif
  f(begin, end);
}

}  // namespace graft
