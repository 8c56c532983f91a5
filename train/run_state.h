#pragma once
// train::RunState: everything that decides a training run's next step, taken between two steps,
// as tensors plus JSON text: what a run checkpoint (train/run_checkpoint.h) writes and reads.
//
// What it holds, and why each part is needed for an exact resume:
//   tensors "model/<name>"       the model's state dict (parameters and buffers)
//   tensors "optimizer/<key>"    the optimizer's state tensors (moments, momentum buffers) as kept,
//                                float32 for 16-bit parameters: rounding them would change the steps
//   "optimizer", "scheduler", "scaler"   their exact numbers (step counts, lr, loss scale)
//   "rng"                        every default generator's (seed, offset): dropout's next mask
//   "loader"                     the epoch and, per rank, the samples taken (data::DataLoader
//                                invariant 6): the next batch, not a replayed or reshuffled one
//   "progress"                   epoch, step, global step, and per rank the epoch's running loss sum
//                                and samples (exact, so the epoch's printed train loss, summed over
//                                the ranks, is the uninterrupted run's)
//   "recipe", "job"              the flags that produced the run, to refuse a resume that changes them
//   "callbacks"                  each resumable callback's text (TrainerCallback::save_state)
//
// Invariants:
// 1. capture then restore on a Trainer built from the same recipe, model kind, data and world
//    size makes its next step bit for bit the step the captured run would have taken.
// 2. Numbers go into JSON exactly: integers as integers, doubles in nlohmann's shortest round-trip
//    form, and a non-finite double (a NaN loss) as the string "nan", "inf" or "-inf".
// 3. capture_run_state is a collective under data parallelism (each rank's loader position, loss
//    sum and sample count go into its slot of lists summed over the ranks), so every rank calls it
//    at the same step; only rank 0 need write. restore gives each rank its own slot back.
// 4. restore_run_state checks the world size and every part before changing anything it can check
//    cheaply; a failed model or optimizer load names the key.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "runtime/tensor.h"
#include "train/recipe.h"
#include "train/trainer_state.h"

namespace graft::train {

struct RunState {
  std::map<std::string, Tensor> tensors;
  std::string state;  // JSON text
};

// Where a RunState stands and what made it, read without building a Trainer.
struct RunStateSummary {
  Recipe::Flags recipe;  // Recipe::to_flags() of the run
  Recipe::Flags job;     // the run's other flags that change its numbers (e.g. --train-samples)
  int world_size = 1;
  int64_t epoch = 0, step = 0, global_step = 0, steps_per_epoch = 0, save_every = 0;
  bool epoch_over = false;
};

// `job` and `save_every` are recorded as given (RunStateSummary hands them back).
RunState capture_run_state(const TrainerState& s, const Recipe::Flags& job, int64_t save_every);
void restore_run_state(const RunState& r, TrainerState& s);
RunStateSummary summarize_run_state(const std::string& state);

// The recipe a resumed run trains with: the run's own, with the flags given on the resuming
// command line checked against it. --epochs may change (the run is extended or shortened; a
// sentence saying so goes into `changes`); any other given flag must equal the run's value, and
// every one that does not is listed in one Error ("--lr 0.01 (the run has 0.001)").
Recipe resume_recipe(const RunStateSummary& run, const Recipe::Flags& given, std::vector<std::string>* changes);

}  // namespace graft::train
