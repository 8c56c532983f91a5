#pragma once
// ContentionMonitor: keeps multi-threaded ops fast on a shared machine.
//
// OpenMP splits every parallel op statically over its threads and waits at a barrier for the
// slowest. When another process keeps a core busy, the thread sharing that core gets half of it,
// so every parallel region takes about twice as long, and the spin-waiting of the others steals
// more time still: a step ran 3-4x slower next to one busy process on 2 cores (10-100x next to a
// build). One thread on the free core is never that slow. So the thread that dispatches ops
// watches how long the kernel keeps it waiting for a CPU, and runs ops on one thread while that
// is high.
//
// Invariants:
// 1. The signal is the dispatching thread's run-queue wait (/proc/thread-self/schedstat): time it
//    was runnable but not running, over windows of at least 10 ms. Blocking on I/O or sleeping is
//    not waiting, so a loader pause never looks like contention. Where procfs lacks schedstat the
//    monitor stays off.
// 2. Above 25% waiting in two windows in a row, the thread's op thread count becomes 1 (graft's parallel_for and oneDNN
//    through omp_set_num_threads, both per thread). It probes the full count again after 1 s,
//    doubling the interval up to 8 s while the contention lasts; a probe window without waiting
//    restores it for good. The count never exceeds set_num_threads().
// 3. The hot path is one thread-local increment per dispatched op; the clock is read every 64 ops
//    and schedstat at most once per window.
// 4. Thread-local: each thread that dispatches ops has its own state; nothing is shared.
#include <atomic>
#include <cstdint>

namespace graft {

enum class ContentionPolicy {
  Adapt,  // the default: one thread while other processes keep this one waiting (above)
  Fixed,  // always set_num_threads() threads (GRAFT_CONTENTION=fixed in the environment)
};
void set_contention_policy(ContentionPolicy policy);
ContentionPolicy contention_policy();

struct ContentionState {
  bool single_threaded = false;  // ops on this thread run on one thread now
  int64_t reductions = 0;        // times this thread went to one thread
  double wait_fraction = 0;      // run-queue wait over the last window (0..1)
};
ContentionState contention_state();  // of the calling thread
// Back to set_num_threads() threads with a fresh window (the count of reductions is kept), e.g.
// between benchmark phases, so one phase's state does not leak into the next.
void reset_contention_monitor();

namespace detail {
extern std::atomic<bool> g_contention_adapt;
void contention_check();
// Called by the dispatcher once per op.
inline void contention_tick() {
  thread_local uint32_t ops = 0;
  if ((++ops & 63) == 0 && g_contention_adapt.load(std::memory_order_relaxed)) contention_check();
}
// 1 while the calling thread runs single-threaded (see above), else a large number.
int contention_thread_cap();
}  // namespace detail

}  // namespace graft
