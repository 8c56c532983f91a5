#include "runtime/contention_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/parallel.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace graft {
namespace detail {

constexpr double kFirstProbe = 1.0, kMaxProbe = 8.0;

namespace {
constexpr double kWindow = 0.01;  // seconds
// Measured on 2 cores: idle windows wait under 5% (a few reach 15%); next to one busy process most
// wait over 30%.
constexpr double kWaitThreshold = 0.25;

bool policy_from_env() {
  const char* e = std::getenv("GRAFT_CONTENTION");
  return !(e && std::string(e) == "fixed");
}
}  // namespace

std::atomic<bool> g_contention_adapt{policy_from_env()};

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void set_omp_threads(int n) {
#ifdef _OPENMP
  omp_set_num_threads(n);
#else
  (void)n;
#endif
}

struct Monitor {
  int fd = -2;  // -2: not opened yet; -1: unavailable
  double t_last = 0;
  uint64_t wait_last = 0;
  bool single = false, probing = false;
  int over = 0;  // consecutive windows above the threshold
  double probe_at = 0, probe_interval = kFirstProbe;
  ContentionState state;

  ~Monitor() {
    if (fd >= 0) close(fd);
  }

  // Run-queue wait of this thread in ns, or false when unavailable.
  bool read_wait(uint64_t& wait) {
    if (fd == -2) fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[128];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return false;
    buf[n] = '\0';
    unsigned long long run = 0, w = 0;
    if (std::sscanf(buf, "%llu %llu", &run, &w) != 2) return false;
    wait = w;
    return true;
  }

  void restore() {
    single = false;
    state.single_threaded = false;
    set_omp_threads(get_num_threads());
  }

  void check() {
    double t = now_s();
    if (single) {
      if (t >= probe_at) {  // try the full count again for one window
        restore();
        probing = true;
        start_window(t);
      }
      return;
    }
    if (t - t_last < kWindow) return;
    uint64_t wait = 0;
    if (!read_wait(wait)) {
      g_contention_adapt.store(false, std::memory_order_relaxed);  // no signal: stay as configured
      return;
    }
    bool first = t_last == 0;
    double frac = first ? 0 : static_cast<double>(wait - wait_last) * 1e-9 / (t - t_last);
    t_last = t;
    wait_last = wait;
    if (first) return;
    state.wait_fraction = frac;
    over = frac > kWaitThreshold ? over + 1 : 0;
    if (over >= 2 && get_num_threads() > 1) {  // two windows in a row: one is a blip (a kworker)
      over = 0;
      probe_interval = probing ? std::min(probe_interval * 2, kMaxProbe) : kFirstProbe;
      probing = false;
      single = true;
      state.single_threaded = true;
      ++state.reductions;
      probe_at = t + probe_interval;
      set_omp_threads(1);
    } else if (probing) {
      probing = false;
      probe_interval = kFirstProbe;
    }
  }

  void start_window(double t) {
    uint64_t wait = 0;
    if (read_wait(wait)) {
      t_last = t;
      wait_last = wait;
    }
  }
};

Monitor& monitor() {
  thread_local Monitor m;
  return m;
}

}  // namespace

void contention_check() { monitor().check(); }

int contention_thread_cap() { return monitor().single ? 1 : 1 << 30; }

}  // namespace detail

void set_contention_policy(ContentionPolicy policy) {
  detail::g_contention_adapt.store(policy == ContentionPolicy::Adapt, std::memory_order_relaxed);
  auto& m = detail::monitor();
  if (policy == ContentionPolicy::Fixed && m.single) m.restore();
}

ContentionPolicy contention_policy() {
  return detail::g_contention_adapt.load(std::memory_order_relaxed) ? ContentionPolicy::Adapt : ContentionPolicy::Fixed;
}

ContentionState contention_state() { return detail::monitor().state; }

void reset_contention_monitor() {
  auto& m = detail::monitor();
  if (m.single) m.restore();
  m.probing = false;
  m.over = 0;
  m.probe_interval = detail::kFirstProbe;
  m.t_last = 0;
}

}  // namespace graft
