#include "train/stop_signals.h"

#include <unistd.h>

#include <atomic>

#include "runtime/error.h"

namespace graft::train {

namespace {

std::atomic<int> g_received{0};
std::atomic<bool> g_sigint_seen{false};
std::atomic<bool> g_installed{false};
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free atomic");

void on_signal(int sig) {
  if (sig == SIGINT && g_sigint_seen.exchange(true)) _exit(StopSignals::exit_status(SIGINT));
  int none = 0;
  g_received.compare_exchange_strong(none, sig);  // the first signal decides the exit status
}

}  // namespace

StopSignals::StopSignals() {
  GRAFT_CHECK(!g_installed.exchange(true), "StopSignals: another StopSignals is alive");
  g_received.store(0);
  g_sigint_seen.store(false);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
  g_installed.store(false);
}

int StopSignals::received() { return g_received.load(); }

}  // namespace graft::train
