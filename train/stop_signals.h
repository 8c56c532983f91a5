#pragma once
// train::StopSignals: SIGINT and SIGTERM ask a run to stop at the next step boundary instead of
// killing it, so the run can write a checkpoint first (train/run_checkpoint.h).
//
// Invariants:
// 1. While one StopSignals object lives (at most one at a time), the first SIGINT or SIGTERM only
//    records its number; received() returns it. A second SIGINT ends the process at once with
//    exit status 130, as an impatient Ctrl-C expects. A second SIGTERM is recorded like the first.
// 2. The handler does only async-signal-safe work: a store to a lock-free atomic, or _exit.
// 3. The destructor puts back the handlers that were there before.
#include <csignal>

namespace graft::train {

class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  // The signal that asked to stop (SIGINT or SIGTERM), or 0.
  static int received();
  // The shell's exit status for a run that stopped on `signal`: 128 + signal (130, 143).
  static int exit_status(int signal) { return 128 + signal; }

 private:
  struct sigaction old_int_{}, old_term_{};
};

}  // namespace graft::train
