#include "train/staged_forward.h"

#include <cmath>

#include "nn/checkpoint_helpers.h"
#include "runtime/error.h"

namespace graft::train {

Tensor run_stages(nn::Sequential& stages, const Tensor& x, Checkpointing mode) {
  if (mode == Checkpointing::None) return stages(x);
  std::vector<nn::Layer> layers;
  for (const auto& m : stages) layers.push_back([m](const Tensor& h) { return (*m)(h); });
  if (mode == Checkpointing::Sqrt)
    return nn::checkpoint_sequential(layers, std::max<int64_t>(1, std::lround(std::sqrt(layers.size()))), x);
  return nn::checkpoint_nested(layers, x);
}

StagedForward::StagedForward(const models::Model& model, std::shared_ptr<nn::AutoCheckpoint> budget,
                             Checkpointing mode)
    : stages_(model.stages), budget_(std::move(budget)), mode_(mode) {
  GRAFT_CHECK(stages_ != nullptr, "train: StagedForward needs a model with stages");
  register_module("model", model.module);
}

Tensor StagedForward::forward(const Tensor& x) { return budget_ ? (*budget_)(x) : run_stages(*stages_, x, mode_); }

}  // namespace graft::train
