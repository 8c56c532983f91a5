#pragma once
// The optimizer and learning-rate schedule a Recipe names, built on given parameters.
#include <memory>
#include <vector>

#include "optim/lr_scheduler.h"
#include "optim/optimizer.h"
#include "train/recipe.h"

namespace graft::train {

// sgd: momentum 0.9; adam and adamw: betas (0.9, 0.999), eps 1e-8; weight decay the recipe's, or
// the optimizer's own when unset (0; 0.01 for adamw).
std::unique_ptr<optim::Optimizer> make_optimizer(const Recipe& recipe, std::vector<Tensor> parameters);

// Stepped once per optimizer step. cosine: to 0 over `total_steps` (after a linear warmup of
// warmup_epochs x steps_per_epoch steps when the recipe asks for one); step: x0.1 every epoch;
// none: nullptr (a constant lr).
std::unique_ptr<optim::LRScheduler> make_scheduler(const Recipe& recipe, optim::Optimizer& optimizer,
                                                   int64_t steps_per_epoch, int64_t total_steps);

}  // namespace graft::train
