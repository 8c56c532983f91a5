#include "runtime/parallel.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "runtime/contention_monitor.h"

namespace graft {

namespace {
std::atomic<int> g_threads{0};
}

namespace {
int configured_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n > 0) return n;
#ifdef _OPENMP
  n = omp_get_max_threads();
#else
  n = 1;
#endif
  g_threads.store(n, std::memory_order_relaxed);
  return n;
}
}  // namespace

int get_num_threads() { return std::min(configured_threads(), detail::contention_thread_cap()); }

void set_num_threads(int n) {
  g_threads.store(n < 1 ? 1 : n, std::memory_order_relaxed);
#ifdef _OPENMP
  omp_set_num_threads(std::min(n < 1 ? 1 : n, detail::contention_thread_cap()));
#endif
}

bool in_parallel_region() {
#ifdef _OPENMP
  return omp_in_parallel();
#else
  return false;
#endif
}

}  // namespace graft
