#pragma once
// train::RunCheckpoint: a Trainer callback that keeps a run resumable. It writes the run's whole
// state (train/run_state.h) as one crash-safe file (train/checkpoint_file.h) into a run directory
// every N steps, at each epoch's end, and when SIGINT or SIGTERM asks the run to stop.
//
//   DIR/checkpoint-00000300.safetensors   the state after global step 300
//   DIR/checkpoint-00000469.safetensors   the newest; `keep` files are kept (default 2)
//
// Invariants:
// 1. A save happens after the step's (or epoch's) other callbacks ran, so add this callback last:
//    what they printed and wrote up to that point is in the state, and a resumed run prints from
//    the next step on. A step save that falls on an epoch's last step is left to the epoch's end.
// 2. A failed save (a full disk, a directory gone or read-only) prints the error, which names the
//    directory, and the run goes on; the next interval tries again. No save leaves a partial file
//    under a checkpoint's name, and the older checkpoints stay until a newer one is complete.
// 3. After a complete save, all but the newest `keep` checkpoints are removed.
// 4. Signals (watch_signals): the first SIGINT/SIGTERM lets the current step finish, writes a
//    checkpoint and stops the run (state.interrupted: the epoch does not end); stop_signal() then
//    gives the signal, for the exit status 130/143. A second SIGINT exits at once. Under data
//    parallelism the ranks agree after every step (one small all-reduce) to stop at the same step.
//    A run that an earlier callback interrupts (state.interrupted) is checkpointed the same way.
// 5. Every rank must add it (the capture is a collective); only the one with `write` writes.
// 6. Test hook: GRAFT_TEST_KILL_AT_STEP=n raises SIGKILL in step n (after its backward, before the
//    optimizer step), so a kill test can stop a run at a chosen step without racing it.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "train/recipe.h"
#include "train/run_state.h"
#include "train/stop_signals.h"
#include "train/trainer_callback.h"

namespace graft::train {

struct RunCheckpointOptions {
  std::string dir;            // must exist
  int64_t save_every = 0;     // steps between saves; 0: only at epoch ends and on a signal
  int keep = 2;               // checkpoints kept
  Recipe::Flags job;          // the run's other flags that change its numbers, recorded with it
  bool write = true;          // false on data-parallel ranks other than 0
  bool watch_signals = true;  // invariant 4
  std::FILE* out = stdout;    // one line per save (null: quiet)
  std::FILE* err = stderr;    // failed saves (null: quiet)
};

class RunCheckpoint : public TrainerCallback {
 public:
  explicit RunCheckpoint(RunCheckpointOptions options);
  void on_before_optimizer_step(TrainerState& state) override;
  void on_step_end(TrainerState& state) override;
  void on_epoch_end(TrainerState& state) override;

  int stop_signal() const { return stop_signal_; }
  int64_t saves() const { return saves_; }
  uint64_t last_bytes() const { return last_bytes_; }
  double last_ms() const { return last_ms_; }

 private:
  void save(TrainerState& state);
  int agreed_signal(const TrainerState& state) const;

  RunCheckpointOptions options_;
  std::unique_ptr<StopSignals> signals_;
  int64_t kill_at_step_ = 0;
  int stop_signal_ = 0;
  int64_t saves_ = 0;
  uint64_t last_bytes_ = 0;
  double last_ms_ = 0;
};

// checkpoint-<8-digit step>.safetensors in `dir`.
std::string checkpoint_path(const std::string& dir, int64_t global_step);
// The run directory's checkpoints, newest (highest step) first.
std::vector<std::string> list_checkpoints(const std::string& dir);

struct LoadedCheckpoint {
  std::string path;
  RunState state;
  uint64_t bytes = 0;
  std::vector<std::string> rejected;  // "path: why" for each newer file that could not be used
};
// The newest checkpoint of `dir` that reads back whole. Each newer one that does not is reported
// on `log` ("... is not usable: <why>; falling back to <older>") and listed in `rejected`. No
// usable checkpoint at all is an Error listing every file and why.
LoadedCheckpoint load_latest_checkpoint(const std::string& dir, std::FILE* log = stderr);

}  // namespace graft::train
