#pragma once
// train::EvaluateEachEpoch: evaluates the model on a labelled set after each epoch (evaluate.h:
// loss, accuracy, confusion matrix, sharded over the World's ranks and summed), and puts the result
// in state.eval for the callbacks added after it. It calls World::sum: add it on every rank.
#include <cstdint>

#include "runtime/tensor.h"
#include "train/trainer_callback.h"

namespace graft::train {

class EvaluateEachEpoch : public TrainerCallback {
 public:
  EvaluateEachEpoch(Tensor images, Tensor labels, int64_t num_classes = 10, int64_t batch_size = 1000);
  void on_epoch_end(TrainerState& state) override;

 private:
  Tensor images_, labels_;
  int64_t num_classes_, batch_size_;
};

}  // namespace graft::train
