#include "runtime/memory_log.h"

#include <chrono>
#include <mutex>

#include "runtime/error.h"

namespace graft {

namespace detail {
std::atomic<bool> g_memory_log_on{false};
}  // namespace detail

namespace {

struct Log {
  std::mutex mu;
  bool running = false;
  Device device;
  std::chrono::steady_clock::time_point t0;
  int64_t bytes = 0;
  std::vector<MemoryEvent> events;
};
Log& log() {
  static Log* l = new Log();  // leaked: storages may die after main returns
  return *l;
}
thread_local const std::string* t_current_op = nullptr;

}  // namespace

void memory_log_start(Device device) {
  Log& l = log();
  std::lock_guard<std::mutex> g(l.mu);
  GRAFT_CHECK(!l.running, "memory_log_start: a memory log is already running (on ", l.device, ")");
  l.running = true;
  l.device = device;
  l.t0 = std::chrono::steady_clock::now();
  l.bytes = 0;
  l.events.clear();
  detail::g_memory_log_on.store(true, std::memory_order_relaxed);
}

std::vector<MemoryEvent> memory_log_stop() {
  Log& l = log();
  std::lock_guard<std::mutex> g(l.mu);
  GRAFT_CHECK(l.running, "memory_log_stop: no memory log is running");
  detail::g_memory_log_on.store(false, std::memory_order_relaxed);
  l.running = false;
  return std::move(l.events);
}

namespace detail {

void memory_log_record(Device device, int64_t delta) {
  Log& l = log();
  std::lock_guard<std::mutex> g(l.mu);
  if (!l.running || device != l.device) return;
  l.bytes += delta;
  double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - l.t0).count();
  l.events.push_back({t, delta, l.bytes, t_current_op ? *t_current_op : std::string()});
}

void MemoryLogOpScope::enter(const std::string& op) {
  active_ = true;
  previous_ = t_current_op;
  t_current_op = &op;
}
void MemoryLogOpScope::leave() { t_current_op = previous_; }

}  // namespace detail

}  // namespace graft
