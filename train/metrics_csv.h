#pragma once
// train::MetricsCsv: per-step and per-epoch figures as CSV, one row each, in this header's columns:
//   kind,epoch,step,loss,test_loss,test_accuracy,samples_per_s,seconds
// A step row has the step's loss (test columns empty); an epoch row the epoch's mean train loss
// over every rank, the evaluation after it (empty when none ran) and the epoch's steps' time.
// The file is created (and the header written) when the callback is built, so a path that cannot
// be written fails before training. Write it on rank 0 only.
#include <fstream>
#include <string>

#include "train/trainer_callback.h"

namespace graft::train {

class MetricsCsv : public TrainerCallback {
 public:
  explicit MetricsCsv(const std::string& path);
  void on_step_end(TrainerState& state) override;
  void on_epoch_end(TrainerState& state) override;
  // A resumed run's file holds the rows written up to its checkpoint, then continues.
  std::string state_key() const override { return "metrics_csv"; }
  std::string save_state() override;
  void load_state(const std::string& state) override;

 private:
  std::string path_;
  std::ofstream file_;
};

}  // namespace graft::train
