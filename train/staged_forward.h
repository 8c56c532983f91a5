#pragma once
// train::StagedForward: a model's forward as one module, run through its stages plainly, under
// activation checkpointing, or under a memory-budget plan. The trainer steps (and DDP wraps) this
// module; it registers the model as its child "model", so its parameters are the model's, in the
// model's order, and a step through it gives the same digits whatever the mode (recomputation is
// exact).
#include <memory>

#include "models/model.h"
#include "nn/checkpoint_plan.h"
#include "nn/module.h"
#include "nn/sequential.h"
#include "train/recipe.h"

namespace graft::train {

// The stages' function on `x`: plainly, as round(sqrt(N)) checkpointed segments, or nested halving.
Tensor run_stages(nn::Sequential& stages, const Tensor& x, Checkpointing mode);

class StagedForward : public nn::Module {
 public:
  // `budget` (may be null) runs the stages under its plan, instead of `mode`.
  StagedForward(const models::Model& model, std::shared_ptr<nn::AutoCheckpoint> budget, Checkpointing mode);
  Tensor forward(const Tensor& x) override;
  std::string name() const override { return "StagedForward"; }

 private:
  std::shared_ptr<nn::Sequential> stages_;
  std::shared_ptr<nn::AutoCheckpoint> budget_;
  Checkpointing mode_;
};

}  // namespace graft::train
