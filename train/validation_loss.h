#pragma once
// train::ValidationLoss: a language model's validation loss during training (graft train --model
// gpt): the mean cross-entropy per token over `windows` random windows of the validation ids,
// every `every` iterations and after the last, stored in state.eval (loss; accuracy is the
// fraction of next characters the argmax predicts; samples counts tokens).
//
// The windows of the evaluation after global step g are random_draws(n - T, windows, seed, g): a
// function of the step alone, so a resumed run evaluates on the windows the uninterrupted run
// did, and evaluating never draws from the generator training uses. It runs in eval mode
// without gradients, in batches of `batch` windows, and puts the training flag back.
#include <cstdint>
#include <functional>
#include <vector>

#include "nn/module.h"
#include "runtime/tensor.h"
#include "train/evaluate.h"
#include "train/trainer_callback.h"

namespace graft::train {

struct ValidationLossOptions {
  int64_t context = 64;
  int64_t windows = 200;
  int64_t every = 500;  // 0: after the last iteration only
  int64_t batch = 50;
  uint64_t seed = 0;
};

// The mean cross-entropy per token of `model` (a language model: [b, T] ids -> [b, T, V] logits)
// over the windows of `ids` starting at `starts`, in eval mode without gradients, `batch` windows
// at a time; `prepare` moves or converts a batch of ids for the model (nullptr: to `device`). The
// training flag is put back.
EvalResult windows_loss(nn::Module& model, const Tensor& ids, const std::vector<int64_t>& starts, int64_t context,
                        int64_t batch, Device device, const std::function<Tensor(const Tensor&)>& prepare = nullptr);
// Every whole window of `ids` side by side, 0, T, 2T, ... (the last must have its next character):
// the deterministic "whole split" evaluation of graft eval --model gpt.
std::vector<int64_t> tiling_starts(int64_t num_ids, int64_t context);

class ValidationLoss : public TrainerCallback {
 public:
  ValidationLoss(Tensor val_ids, ValidationLossOptions options);
  void on_step_end(TrainerState& state) override;
  // The evaluation itself (also for a C++ user between runs).
  EvalResult evaluate(TrainerState& state, int64_t global_step) const;

 private:
  Tensor ids_;
  ValidationLossOptions options_;
};

}  // namespace graft::train
