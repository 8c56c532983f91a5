#pragma once
// train::Trainer: the training loop of `graft train`, for any classifier and DataLoader.
//
// The loop, per step: inputs = prepare_inputs(batch.images), targets = batch.labels on the device;
// loss = loss_fn(forward(inputs), targets) (under SaveOnCpu when the recipe asks); zero_grad;
// backward; with recipe.grad_clip, clip_grad_norm_ (after unscale_ under a loss scaler, so before
// on_before_optimizer_step: a callback there sees clipped, unscaled gradients); optimizer step;
// scheduler step. Per epoch: the loader's epoch is set, the allocator's
// peak is reset, and after the last step the time, the peak and the loss summed over the World's
// ranks go into the state. The callbacks' hooks run around these (trainer_callback.h); a run with
// none pays one empty loop per hook.
//
// Invariants:
// 1. The same recipe, seed, model and loader give the same digits with any callbacks that only
//    read (the progress bar, logs, CSV, chart, profile, graph) and any checkpointing mode.
// 2. The Trainer builds from the recipe what the options do not give: the optimizer on the model's
//    parameters and the schedule on that optimizer, over the run's steps (epochs x the first
//    epoch's batches, or max_steps when that is fewer). A scheduler given drives the optimizer given.
// 3. The model is moved to the recipe's device (channels-last on the CPU) when the Trainer is built;
//    checkpointing and memory budgets need a model with stages.
// 4. fit() runs once.
// 5. resume(state) before fit() continues the run a checkpoint recorded (train/run_state.h): fit()
//    then starts at the recorded epoch and step (finishing that epoch's end hooks if only they
//    were left) and every step, printed loss and evaluation from there on is the one the run that
//    never stopped has. Build the trainer as the run was built (recipe, model kind, data, world).
#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "data/data_loader.h"
#include "models/model.h"
#include "train/recipe.h"
#include "train/run_state.h"
#include "train/trainer_callback.h"
#include "train/trainer_state.h"
#include "train/world.h"

namespace graft::train {

struct TrainerOptions {
  std::unique_ptr<optim::Optimizer> optimizer{};  // null: the recipe's, on the model's parameters
  std::unique_ptr<optim::LRScheduler> scheduler{};  // null: the recipe's (it must drive `optimizer` if given)
  World world{};                                  // a world of one unless given (dist::training_world())
  int64_t max_steps = 0;                          // > 0: end after this many steps
  std::function<Tensor(const Tensor& output, const Tensor& target)> loss{};  // empty: cross_entropy
  std::function<Tensor(const Tensor& images)> prepare_inputs{};  // empty: recipe.prepare_inputs
  bool set_grads_to_none = true;                  // zero_grad(set_to_none)
};

class Trainer {
 public:
  Trainer(models::Model model, data::DataLoader& loader, Recipe recipe, TrainerOptions options = {});
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  void add_callback(std::shared_ptr<TrainerCallback> callback);
  // Continues the run `state` recorded (invariant 5); call after add_callback, before fit().
  void resume(const RunState& state);
  // Trains for the recipe's epochs (or max_steps), calling the callbacks' hooks.
  void fit();

  const TrainerState& state() const { return state_; }
  const Recipe& recipe() const { return recipe_; }
  optim::Optimizer& optimizer() { return *optimizer_; }
  optim::LRScheduler* scheduler() { return scheduler_.get(); }

 private:
  using Clock = std::chrono::steady_clock;
  using Hook = void (TrainerCallback::*)(TrainerState&);
  void notify(Hook hook);
  void run_epoch(int64_t epoch, bool continuing);
  void run_step(data::Batch batch, Clock::time_point epoch_start);
  void finish_epoch(Clock::time_point epoch_start);

  Recipe recipe_;
  models::Model model_;
  data::DataLoader& loader_;
  World world_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::unique_ptr<optim::LRScheduler> scheduler_;
  std::unique_ptr<optim::GradScaler> scaler_;  // fp16 precision only
  std::shared_ptr<nn::AutoCheckpoint> budget_;
  bool set_grads_to_none_;
  bool ran_ = false;
  std::vector<std::shared_ptr<TrainerCallback>> callbacks_;
  TrainerState state_;
};

}  // namespace graft::train
