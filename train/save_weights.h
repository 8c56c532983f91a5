#pragma once
// train::SaveWeights: when training ends, moves the model to the CPU and writes its state dict as
// safetensors (nn::save), which `graft eval --load` and nn::load read. Write it on rank 0 only.
#include <cstdio>
#include <map>
#include <string>

#include "train/trainer_callback.h"

namespace graft::train {

class SaveWeights : public TrainerCallback {
 public:
  // `metadata` goes into the file with the weights (nn::save).
  explicit SaveWeights(std::string path, std::FILE* out = stdout, std::map<std::string, std::string> metadata = {});
  void on_train_end(TrainerState& state) override;

 private:
  std::string path_;
  std::FILE* out_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace graft::train
