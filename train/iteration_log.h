#pragma once
// train::IterationLog: an iteration-based run's progress (graft train --model gpt), one line every
// `every` iterations and at the last:
//   "iter 100/2000 loss 2.4361 lr 0.001 41230 tokens/s ETA 45s"
// and, after a step that evaluated (state.eval is fresh), "iter 500: val loss 1.9876, next-char
// accuracy 42.10%". Tokens per second are this rank's steps' (evaluation excluded); add it on
// rank 0 only.
#include <cstdint>
#include <cstdio>

#include "train/trainer_callback.h"

namespace graft::train {

class IterationLog : public TrainerCallback {
 public:
  // tokens_per_sample: the context length (a sample is one window).
  explicit IterationLog(int64_t tokens_per_sample, std::FILE* out = stdout, int64_t every = 100);
  void on_step_end(TrainerState& state) override;
  void on_train_end(TrainerState& state) override;

 private:
  int64_t tokens_per_sample_;
  std::FILE* out_;
  int64_t every_;
};

}  // namespace graft::train
