#pragma once
// train::ProgressBar: the epoch's progress on stderr. On a terminal one line redrawn each step
// ("epoch 1/3 [#####.....] 120/469 loss 0.4312 5120 samples/s ETA 4s"), ended at the epoch's
// end; elsewhere (a log, a pipe) a line every `every` steps and at the epoch's last step.
// Samples per second are this rank's; add it on rank 0 only.
#include <cstdint>
#include <cstdio>

#include "train/trainer_callback.h"

namespace graft::train {

class ProgressBar : public TrainerCallback {
 public:
  // `out` is a terminal: decided from the stream when not given.
  explicit ProgressBar(std::FILE* out = stderr, int64_t every = 100);
  ProgressBar(std::FILE* out, bool terminal, int64_t every);
  void on_step_end(TrainerState& state) override;
  void on_epoch_steps_end(TrainerState& state) override;

 private:
  std::FILE* out_;
  bool terminal_;
  int64_t every_;
};

}  // namespace graft::train
