#pragma once
// The allocation event log: every storage allocated or freed on one device while the log runs,
// with the op the dispatcher was running on that thread, for memory timelines
// (`graft train --memory-timeline`).
//
//   memory_log_start(kCPU);
//   step();                                     // forward + backward
//   std::vector<MemoryEvent> ev = memory_log_stop();
//
// Invariants:
// 1. Off by default. When off, a storage's birth and death and an op dispatch each pay one relaxed
//    atomic load, nothing else.
// 2. Events are appended under one lock in the order they happen; `bytes` is the running total of
//    the deltas since the start (storages alive before the start and freed during the log make it
//    go below zero: it measures what the logged work added).
// 3. `op` is the innermost op dispatched on the allocating or freeing thread ("" outside ops, e.g.
//    when autograd drops a saved tensor). Op names live as long as the registry, i.e. forever.
// 4. One log at a time: starting a second one while one runs throws graft::Error.
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace graft {

struct MemoryEvent {
  double t_ms = 0;     // since the start
  int64_t delta = 0;   // + allocated, - freed
  int64_t bytes = 0;   // running total since the start
  std::string op;      // the op that was running ("" when none)
};

void memory_log_start(Device device);
std::vector<MemoryEvent> memory_log_stop();

namespace detail {
extern std::atomic<bool> g_memory_log_on;
void memory_log_record(Device device, int64_t delta);
// The dispatcher marks the op it runs, so allocations inside it can be attributed.
class MemoryLogOpScope {
 public:
  explicit MemoryLogOpScope(const std::string& op) {
    if (g_memory_log_on.load(std::memory_order_relaxed)) enter(op);
  }
  ~MemoryLogOpScope() {
    if (active_) leave();
  }
  MemoryLogOpScope(const MemoryLogOpScope&) = delete;
  MemoryLogOpScope& operator=(const MemoryLogOpScope&) = delete;

 private:
  void enter(const std::string& op);
  void leave();
  bool active_ = false;
  const std::string* previous_ = nullptr;
};
}  // namespace detail

}  // namespace graft
