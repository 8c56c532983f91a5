#include "train/trainer.h"

#include <algorithm>
#include <optional>

#include "autograd/autocast.h"
#include "autograd/compress_saved.h"
#include "autograd/functional.h"
#include "autograd/saved_tensor_hooks.h"
#include "nn/clip_grad.h"
#include "runtime/allocator.h"
#include "runtime/error.h"
#include "train/make_optimizer.h"
#include "train/staged_forward.h"

namespace graft::train {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Trainer::Trainer(models::Model model, data::DataLoader& loader, Recipe recipe, TrainerOptions options)
    : recipe_(std::move(recipe)), model_(std::move(model)), loader_(loader), world_(std::move(options.world)),
      set_grads_to_none_(options.set_grads_to_none) {
  recipe_.validate();
  GRAFT_CHECK(model_.module != nullptr, "Trainer: no model");
  GRAFT_CHECK(options.max_steps >= 0, "Trainer: max_steps must be at least 0, got ", options.max_steps);
  GRAFT_CHECK(!options.scheduler || options.optimizer,
              "Trainer: a scheduler was given without its optimizer; give both (the scheduler drives that optimizer)");
  const bool checkpointed = recipe_.checkpoint != Checkpointing::None || recipe_.memory_budget.has_value();
  GRAFT_CHECK(!checkpointed || model_.stages, "train: --checkpoint and --memory-budget need a model with stages "
              "(a Sequential, or models::Model{module, stages})");
  models::place_on(*model_.module, recipe_.device);
  optimizer_ = options.optimizer ? std::move(options.optimizer) : make_optimizer(recipe_, model_.module->parameters());
  if (recipe_.memory_budget) {
    // --compress with a budget: candidates for the plan, which compresses only where it must.
    nn::BudgetOptions bo;
    if (recipe_.compress_auto) bo.codecs = {autograd::SavedCodec::kBf16, autograd::SavedCodec::kInt8};
    else if (recipe_.compress != autograd::SavedCodec::kNone) bo.codecs = {recipe_.compress};
    // The whole step within the budget: the optimizer's state (made by the first step, held by
    // every later one) and the prepared batch are planned around.
    bo.outside_bytes = optimizer_->state_bytes();
    bo.input_in_budget = true;
    budget_ = std::make_shared<nn::AutoCheckpoint>(model_.stages, recipe_.memory_budget->bytes, bo);
  }
  const int64_t per_epoch = loader_.num_batches(), planned = recipe_.epochs * per_epoch;
  const int64_t total = options.max_steps > 0 ? std::min(options.max_steps, planned) : planned;
  scheduler_ = options.scheduler ? std::move(options.scheduler) : make_scheduler(recipe_, *optimizer_, per_epoch, total);

  TrainerState& s = state_;
  s.recipe = &recipe_;
  s.device = recipe_.device;
  s.model = model_.module;
  s.stages = model_.stages;
  s.forward = model_.stages ? std::make_shared<StagedForward>(model_, budget_, recipe_.checkpoint) : model_.module;
  s.budget = budget_.get();
  s.optimizer = optimizer_.get();
  s.scheduler = scheduler_.get();
  if (recipe_.precision == Precision::Fp16) scaler_ = std::make_unique<optim::GradScaler>();
  s.scaler = scaler_.get();
  s.loader = &loader_;
  s.world = &world_;
  s.prepare_inputs = options.prepare_inputs ? std::move(options.prepare_inputs)
                                            : [r = &recipe_](const Tensor& images) { return r->prepare_inputs(images); };
  s.loss_fn = options.loss ? std::move(options.loss)
                           : [](const Tensor& output, const Tensor& target) { return cross_entropy(output, target); };
  s.epochs = recipe_.epochs;
  s.max_steps = options.max_steps;
  s.callbacks = &callbacks_;
}

void Trainer::resume(const RunState& state) {
  GRAFT_CHECK(!ran_, "Trainer::resume: fit() has already run; build a new trainer and resume it");
  restore_run_state(state, state_);
}

void Trainer::add_callback(std::shared_ptr<TrainerCallback> callback) {
  GRAFT_CHECK(callback != nullptr, "Trainer::add_callback: null callback");
  callbacks_.push_back(std::move(callback));
}

void Trainer::notify(Hook hook) {
  for (const auto& c : callbacks_) ((*c).*hook)(state_);
}

void Trainer::fit() {
  GRAFT_CHECK(!ran_, "Trainer::fit: this trainer has already run; build a new one");
  ran_ = true;
  state_.base_cpu_bytes = memory_stats(kCPU).allocated_bytes;
  notify(&TrainerCallback::on_train_begin);
  TrainerState& s = state_;
  // A resumed run re-enters its epoch where the checkpoint left it (the loader is already there),
  // or starts the next one when that epoch had ended.
  const bool mid_epoch = s.resumed && !s.epoch_over;
  const int64_t first = s.resumed ? s.epoch + (s.epoch_over ? 1 : 0) : 0;
  if (s.resumed && s.max_steps > 0 && s.global_step >= s.max_steps) s.stop = true;
  for (int64_t epoch = first; epoch < s.epochs && !s.stop; ++epoch) run_epoch(epoch, mid_epoch && epoch == first);
  notify(&TrainerCallback::on_train_end);
}

void Trainer::run_epoch(int64_t epoch, bool continuing) {
  TrainerState& s = state_;
  // A continued epoch's clock starts where the checkpoint's stopped (its steps' time so far).
  const auto start = Clock::now() - (continuing ? std::chrono::duration_cast<Clock::duration>(
                                                      std::chrono::duration<double>(s.epoch_seconds))
                                                : Clock::duration::zero());
  s.epoch = epoch;
  s.epoch_over = false;
  if (!continuing) {
    s.step = 0;
    s.epoch_loss_sum = 0;
    s.epoch_samples = 0;
    loader_.set_epoch(epoch);
  }
  s.steps_per_epoch = loader_.num_batches();
  reset_peak_memory_stats(kCPU);
  if (s.device.is_cuda()) reset_peak_memory_stats(s.device);
  notify(&TrainerCallback::on_epoch_begin);
  while (!s.stop) {
    auto batch = loader_.next();
    if (!batch) break;
    run_step(std::move(*batch), start);
  }
  if (!s.interrupted) finish_epoch(start);
}

void Trainer::run_step(data::Batch batch, Clock::time_point epoch_start) {
  TrainerState& s = state_;
  Tensor x = s.prepare_inputs(batch.images), y = batch.labels.to(s.device);
  s.batch_samples = batch.labels.size(0);
  // The loader's copy is not needed once prepared: the step holds one input batch, as the memory
  // budget counts it (BudgetOptions::input_in_budget).
  batch.images = Tensor();
  notify(&TrainerCallback::on_step_begin);
  // Before the forward, not after it: freed gradients (set_to_none) are then not held through the
  // forward, and the memory plan's step has no gradients until its backward makes them.
  optimizer_->zero_grad(set_grads_to_none_);
  {
    std::optional<autograd::SaveOnCpu> keep_on_cpu;
    if (recipe_.save_on_cpu) keep_on_cpu.emplace(s.device.is_cuda());
    // Never with SaveOnCpu (Recipe::validate): one hook pair packs each tensor.
    std::optional<autograd::CompressSaved> compress;
    if (recipe_.compress != autograd::SavedCodec::kNone && !budget_)
      compress.emplace(autograd::CompressOptions{.codec = recipe_.compress, .seed = recipe_.seed});
    // Mixed precision: the forward and the loss under autocast; backward runs each op in the
    // dtype its forward used, and the float32 parameters get float32 gradients.
    std::optional<autocast::AutocastGuard> mixed;
    if (recipe_.precision != Precision::Fp32) mixed.emplace(s.device, autocast_dtype(recipe_.precision));
    s.loss = s.loss_fn((*s.forward)(x), y);
  }
  notify(&TrainerCallback::on_before_backward);
  if (scaler_) scaler_->scale(s.loss).backward();
  else s.loss.backward();
  if (recipe_.grad_clip > 0) {  // the true gradients' norm: unscaled first under a loss scaler
    if (scaler_) scaler_->unscale_(*optimizer_);
    nn::utils::clip_grad_norm_(optimizer_->parameters(), recipe_.grad_clip);
  }
  notify(&TrainerCallback::on_before_optimizer_step);
  if (scaler_) {
    scaler_->step(*optimizer_);  // skipped when a gradient is inf or NaN
    scaler_->update();
  } else {
    optimizer_->step();
  }
  if (scheduler_) scheduler_->step();
  s.step_loss = s.loss.item<float>();
  s.epoch_loss_sum += s.step_loss * static_cast<double>(s.batch_samples);
  s.epoch_samples += s.batch_samples;
  ++s.step;
  ++s.global_step;
  s.epoch_seconds = seconds_since(epoch_start);
  if (s.max_steps > 0 && s.global_step >= s.max_steps) s.stop = true;
  notify(&TrainerCallback::on_step_end);
  s.loss = Tensor();
}

void Trainer::finish_epoch(Clock::time_point epoch_start) {
  TrainerState& s = state_;
  s.epoch_seconds = seconds_since(epoch_start);
  s.epoch_over = true;
  s.peak_cpu_bytes = std::max(s.peak_cpu_bytes, memory_stats(kCPU).peak_allocated_bytes);
  if (s.device.is_cuda()) s.peak_device_bytes = std::max(s.peak_device_bytes, memory_stats(s.device).peak_allocated_bytes);
  notify(&TrainerCallback::on_epoch_steps_end);
  std::vector<double> sums{s.epoch_loss_sum, static_cast<double>(s.epoch_samples)};
  world_.sum(sums);  // the train loss over every rank's samples
  s.train_loss = sums[1] > 0 ? sums[0] / sums[1] : 0;
  s.train_samples = static_cast<int64_t>(sums[1]);
  notify(&TrainerCallback::on_epoch_end);
  ++s.epochs_done;
}

}  // namespace graft::train
