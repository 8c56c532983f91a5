#pragma once
// train::OpProfile: an OpProfiler over the training steps (batches, forward, backward, optimizer),
// started at each epoch's beginning and stopped when its steps end, so evaluation is never counted;
// its table (calls, total and mean time per op, the time outside ops) is printed when training ends.
// The profiled steps pay the profiler's dispatch mode (about a microsecond per op call).
#include <cstdio>
#include <optional>

#include "runtime/op_profiler.h"
#include "train/trainer_callback.h"

namespace graft::train {

class OpProfile : public TrainerCallback {
 public:
  explicit OpProfile(std::FILE* out = stdout);
  void on_epoch_begin(TrainerState& state) override;
  void on_epoch_steps_end(TrainerState& state) override;
  void on_train_end(TrainerState& state) override;
  const OpProfiler& profiler() const { return profiler_; }

 private:
  std::FILE* out_;
  OpProfiler profiler_;
  std::optional<OpProfiler::Scope> scope_;
};

}  // namespace graft::train
