#pragma once
// train::TrainerCallback: code that runs at fixed points of a Trainer's loop.
//
// Every hook has an empty default, so a callback overrides only what it needs. The Trainer calls
// each hook on every callback in the order they were added, at these points and no others:
//
//   on_train_begin
//   for each epoch:
//     on_epoch_begin
//     for each batch: on_step_begin, on_before_backward, on_before_optimizer_step, on_step_end
//     on_epoch_steps_end, on_epoch_end
//   on_train_end
//
// Order matters within a hook: a callback that fills the state (an evaluation) must be added
// before the ones that report it (a log, a CSV). Hooks run on every rank of a data-parallel run;
// a hook that calls a collective (World::sum, DDP) must be added on every rank.
#include <string>

namespace graft::train {

struct TrainerState;

class TrainerCallback {
 public:
  virtual ~TrainerCallback() = default;
  // Model, optimizer and loader are ready and nothing has run. A callback may replace
  // state.forward here; the loop calls the replacement.
  virtual void on_train_begin(TrainerState&) {}
  virtual void on_epoch_begin(TrainerState&) {}
  // A batch is in hand; nothing of the step is computed.
  virtual void on_step_begin(TrainerState&) {}
  // state.loss holds the loss with its graph; it may be read or replaced.
  virtual void on_before_backward(TrainerState&) {}
  // The gradients are in .grad and the optimizer has not stepped (clip or unscale them here).
  virtual void on_before_optimizer_step(TrainerState&) {}
  // The step is done: the optimizer and schedule stepped, state.step_loss and the counters are
  // updated. Set state.stop to end the run after this step.
  virtual void on_step_end(TrainerState&) {}
  // The epoch's steps are over and nothing else has run: stop per-epoch instruments (profilers,
  // progress bars) here, so what follows is not counted as training.
  virtual void on_epoch_steps_end(TrainerState&) {}
  // The epoch's figures are final (state.train_loss over every rank): evaluate and report here.
  virtual void on_epoch_end(TrainerState&) {}
  virtual void on_train_end(TrainerState&) {}

  // Resumable output. A callback whose output must continue across a resumed run (a CSV's rows, a
  // chart's points) names its part of a run checkpoint with a non-empty key, returns its state as
  // text when the checkpoint is taken, and gets that text back before a resumed fit() starts. A
  // checkpoint without the key (the callback is new to the run) leaves the callback as built.
  virtual std::string state_key() const { return {}; }
  virtual std::string save_state() { return {}; }
  virtual void load_state(const std::string& /*state*/) {}
};

}  // namespace graft::train
