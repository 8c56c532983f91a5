#include "train/save_weights.h"

#include "nn/serialize.h"
#include "train/trainer_state.h"

namespace graft::train {

SaveWeights::SaveWeights(std::string path, std::FILE* out) : path_(std::move(path)), out_(out) {}

void SaveWeights::on_train_end(TrainerState& s) {
  s.model->to(kCPU);
  nn::save(*s.model, path_);
  std::fprintf(out_, "saved %s\n", path_.c_str());
}

}  // namespace graft::train
