#pragma once
// train::ConsoleLog: what `graft train` prints on stdout while it trains. Each new memory-budget
// plan as it is made (its table), a line per epoch ("epoch 1: train loss 0.4662, test loss 0.4139,
// test accuracy 85.18%, 0.8 s", the test figures when an evaluation ran after that epoch's last
// step), and at the end the training steps' peak memory above what existed before the first step
// (the data set and the model), next to what the plans predicted.
#include <cstdint>
#include <cstdio>

#include "train/trainer_callback.h"

namespace graft::train {

class ConsoleLog : public TrainerCallback {
 public:
  explicit ConsoleLog(std::FILE* out = stdout);
  void on_before_backward(TrainerState& state) override;
  void on_epoch_end(TrainerState& state) override;
  void on_train_end(TrainerState& state) override;

 private:
  std::FILE* out_;
  int plans_printed_ = 0;
  int64_t predicted_peak_ = 0;  // the largest of the plans' predictions (one plan per batch shape)
};

}  // namespace graft::train
