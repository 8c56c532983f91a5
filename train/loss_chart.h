#pragma once
// train::LossChart: a self-contained SVG of the training loss per step (left axis) and the test
// accuracy after each epoch's evaluation (right axis), with round ticks, a grid, dashed epoch
// boundaries and a legend; written when training ends. Write it on rank 0 only.
#include <string>
#include <vector>

#include "train/trainer_callback.h"

namespace graft::train {

class LossChart : public TrainerCallback {
 public:
  explicit LossChart(std::string path);
  void on_step_end(TrainerState& state) override;
  void on_epoch_end(TrainerState& state) override;
  void on_train_end(TrainerState& state) override;
  // A resumed run's chart has the points from before its checkpoint too.
  std::string state_key() const override { return "loss_chart"; }
  std::string save_state() override;
  void load_state(const std::string& state) override;

 private:
  std::string path_;
  std::vector<double> step_losses_, accuracies_;
};

// The chart itself: `step_loss` per step, `accuracy` per epoch (the steps split evenly over them).
void write_loss_chart(const std::string& path, const std::vector<double>& step_loss,
                      const std::vector<double>& accuracy);

}  // namespace graft::train
