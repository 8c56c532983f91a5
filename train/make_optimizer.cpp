#include "train/make_optimizer.h"

#include "runtime/error.h"

namespace graft::train {

std::unique_ptr<optim::Optimizer> make_optimizer(const Recipe& recipe, std::vector<Tensor> parameters) {
  const double lr = recipe.lr;
  switch (recipe.optimizer) {
    case OptimizerKind::Sgd:
      return std::make_unique<optim::SGD>(std::move(parameters), lr, 0.9, 0, recipe.weight_decay.value_or(0));
    case OptimizerKind::Adam:
      return std::make_unique<optim::Adam>(std::move(parameters), lr, recipe.betas, 1e-8,
                                           recipe.weight_decay.value_or(0));
    case OptimizerKind::AdamW:
      return std::make_unique<optim::AdamW>(std::move(parameters), lr, recipe.betas, 1e-8,
                                            recipe.weight_decay.value_or(1e-2));
  }
  GRAFT_ERROR("train: unknown optimizer kind ", static_cast<int>(recipe.optimizer));
}

std::unique_ptr<optim::LRScheduler> make_scheduler(const Recipe& recipe, optim::Optimizer& optimizer,
                                                   int64_t steps_per_epoch, int64_t total_steps) {
  switch (recipe.schedule) {
    case Schedule::None: return nullptr;
    case Schedule::Step: return std::make_unique<optim::StepLR>(optimizer, steps_per_epoch, 0.1);
    case Schedule::Cosine: {
      const int64_t warmup = recipe.warmup_iters > 0 ? recipe.warmup_iters : recipe.warmup_epochs * steps_per_epoch;
      if (warmup > 0) return std::make_unique<optim::WarmupCosineLR>(optimizer, warmup, total_steps, recipe.min_lr);
      return std::make_unique<optim::CosineAnnealingLR>(optimizer, total_steps, recipe.min_lr);
    }
  }
  GRAFT_ERROR("train: unknown schedule ", static_cast<int>(recipe.schedule));
}

}  // namespace graft::train
