#include "train/evaluate_each_epoch.h"

#include "train/evaluate.h"
#include "train/trainer_state.h"

namespace graft::train {

EvaluateEachEpoch::EvaluateEachEpoch(Tensor images, Tensor labels, int64_t num_classes, int64_t batch_size)
    : images_(std::move(images)), labels_(std::move(labels)), num_classes_(num_classes), batch_size_(batch_size) {}

void EvaluateEachEpoch::on_epoch_end(TrainerState& s) {
  EvalOptions o{.device = s.device, .prepare_inputs = s.prepare_inputs, .num_classes = num_classes_,
                .batch_size = batch_size_, .world = *s.world};
  if (s.recipe->precision != Precision::Fp32) o.autocast = autocast_dtype(s.recipe->precision);
  s.eval = evaluate(*s.model, images_, labels_, o);
  s.eval_step = s.global_step;
}

}  // namespace graft::train
