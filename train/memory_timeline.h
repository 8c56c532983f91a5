#pragma once
// train::MemoryTimeline: before training, one step on the first batch in each mode the recipe
// names (plain; its --checkpoint mode; its memory-budget plan) under the allocation log, drawn as
// one chart (memory_timeline_chart.h). Parameters, gradients, the global generator and the loader's
// epoch are left as they were, so training then prints the digits it would without it. The budget
// mode plans before its logged step, so planning is not in the chart.
//
// It runs its steps on this process alone: add it before dist::DDPCallback (whose hooks would make
// those steps collective) and on rank 0 only.
#include <string>

#include "train/trainer_callback.h"

namespace graft::train {

class MemoryTimeline : public TrainerCallback {
 public:
  explicit MemoryTimeline(std::string path, std::FILE* out = stdout);
  void on_train_begin(TrainerState& state) override;

 private:
  std::string path_;
  std::FILE* out_;
};

}  // namespace graft::train
