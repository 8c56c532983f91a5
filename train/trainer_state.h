#pragma once
// train::TrainerState: what a Trainer's callbacks read (and the few things they may change).
//
// The Trainer owns it and fills it before each hook. Callbacks may write:
// - `forward` in on_train_begin (wrap it: DDP does); the loop calls what is there afterwards.
// - `loss` in on_before_backward (a loss scaler replaces it); backward runs on what is there.
// - `stop`, anywhere: the run ends after the current step (or epoch); the epoch's end hooks and
//   on_train_end still run, so writers finish their files.
// - `interrupted` with `stop`, in on_step_end (a signal, train/run_checkpoint.h): the run ends
//   after this step without ending the epoch (no on_epoch_steps_end / on_epoch_end: the epoch is
//   not over, and a resumed run finishes it); on_train_end still runs.
// - `eval` / `eval_step`: what an evaluation callback found, for the callbacks after it.
// Everything else is the Trainer's record of the run and is overwritten by it.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "data/data_loader.h"
#include "nn/checkpoint_plan.h"
#include "nn/module.h"
#include "nn/sequential.h"
#include "optim/grad_scaler.h"
#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/evaluate.h"
#include "train/recipe.h"
#include "train/world.h"

namespace graft::train {

class TrainerCallback;

struct TrainerState {
  // ---- The run (set when the Trainer is built) ----
  const Recipe* recipe = nullptr;
  Device device = kCPU;
  std::shared_ptr<nn::Module> model;       // owns the parameters: save, evaluate, move through it
  std::shared_ptr<nn::Sequential> stages;  // the model's checkpointable units, or null
  std::shared_ptr<nn::Module> forward;     // what a step calls (the model, or its StagedForward)
  nn::AutoCheckpoint* budget = nullptr;    // the memory-budget planner, when the recipe has a budget
  optim::Optimizer* optimizer = nullptr;
  optim::LRScheduler* scheduler = nullptr;  // null: a constant learning rate
  // fp16 precision: the loss scaler. A callback that reads or clips gradients in
  // on_before_optimizer_step calls scaler->unscale_(*optimizer) first, as with PyTorch's.
  optim::GradScaler* scaler = nullptr;
  data::DataLoader* loader = nullptr;
  const World* world = nullptr;
  std::function<Tensor(const Tensor& images)> prepare_inputs;  // a batch's inputs as the model takes them
  std::function<Tensor(const Tensor& output, const Tensor& target)> loss_fn;
  const std::vector<std::shared_ptr<TrainerCallback>>* callbacks = nullptr;  // the Trainer's, in order

  // ---- Where the run is ----
  int64_t epochs = 0;           // the epochs the run plans
  int64_t max_steps = 0;        // > 0: the run ends after this many steps if the epochs last longer
  int64_t epoch = 0;            // the current epoch, from 0
  int64_t epochs_done = 0;      // epochs whose on_epoch_end has run
  int64_t steps_per_epoch = 0;  // batches in the current epoch
  int64_t step = 0;             // steps done in the current epoch
  int64_t global_step = 0;      // steps done in the run
  bool stop = false;
  bool interrupted = false;     // the run was cut short mid-epoch (see the top)
  bool epoch_over = false;      // the current epoch's steps are done (from on_epoch_steps_end on)
  bool resumed = false;         // the run continues a checkpoint (Trainer::resume)

  // ---- The current step ----
  Tensor loss;                 // from the forward until on_step_end returns, then released
  double step_loss = 0;        // loss.item(), at on_step_end
  int64_t batch_samples = 0;   // samples in this rank's batch

  // ---- The current epoch on this rank (running; final at on_epoch_steps_end) ----
  double epoch_loss_sum = 0;   // sum of the step losses weighted by their batch sizes
  int64_t epoch_samples = 0;
  double epoch_seconds = 0;    // since the epoch began; at its end, its steps' time (evaluation excluded)

  // ---- The epoch over every rank (at on_epoch_end) ----
  double train_loss = 0;       // mean loss per sample
  int64_t train_samples = 0;

  // ---- The latest evaluation, and the global step it followed (-1: none yet) ----
  std::optional<EvalResult> eval;
  int64_t eval_step = -1;

  // ---- Memory of the training steps (evaluation excluded), in bytes ----
  int64_t base_cpu_bytes = 0;     // allocated when fit() began: the data set, model, optimizer
  int64_t peak_cpu_bytes = 0;     // the highest peak of any epoch's steps so far
  int64_t peak_device_bytes = 0;  // the same on a CUDA device (0 on the CPU)

  // An evaluation taken after the current step (not a stale one from an earlier epoch).
  const EvalResult* fresh_eval() const { return eval && eval_step == global_step ? &*eval : nullptr; }
};

}  // namespace graft::train
