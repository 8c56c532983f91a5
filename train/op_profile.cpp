#include "train/op_profile.h"

#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

OpProfile::OpProfile(std::FILE* out) : out_(out) { GRAFT_CHECK(out != nullptr, "OpProfile: no stream"); }

void OpProfile::on_epoch_begin(TrainerState&) { scope_.emplace(profiler_); }

void OpProfile::on_epoch_steps_end(TrainerState&) { scope_.reset(); }

void OpProfile::on_train_end(TrainerState& s) {
  std::fprintf(out_,
               "\nops of the training steps (batches, forward, backward, optimizer; evaluation excluded), %lld "
               "epoch(s):\n%s\n",
               static_cast<long long>(s.epochs_done), profiler_.table().c_str());
}

}  // namespace graft::train
