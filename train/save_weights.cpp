#include "train/save_weights.h"

#include "nn/serialize.h"
#include "train/trainer_state.h"

namespace graft::train {

SaveWeights::SaveWeights(std::string path, std::FILE* out, std::map<std::string, std::string> metadata)
    : path_(std::move(path)), out_(out), metadata_(std::move(metadata)) {}

void SaveWeights::on_train_end(TrainerState& s) {
  if (s.interrupted) {  // these are not the trained weights; the run's checkpoint has them
    std::fprintf(out_, "not writing %s: the run stopped before its end\n", path_.c_str());
    return;
  }
  s.model->to(kCPU);
  nn::save(*s.model, path_, metadata_);
  std::fprintf(out_, "saved %s\n", path_.c_str());
}

}  // namespace graft::train
