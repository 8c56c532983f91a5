#pragma once
// graft::optim: learning-rate schedulers, with PyTorch's formulas. A scheduler writes the
// optimizer's lr from its own counter (last_epoch, PyTorch's name, whatever it counts): graft train
// steps it once per optimizer step, so its periods are in steps.
#include <cstdint>
#include <map>
#include <string>

#include "optim/optimizer.h"

namespace graft::optim {

// Schedulers set the optimizer's lr from the epoch counter; step() advances it by one.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  double get_last_lr() const { return optimizer_.lr(); }
  double base_lr() const { return base_lr_; }
  // {"last_epoch", "base_lr"}: with the optimizer's own state, what the next step() needs. Loading
  // also sets the optimizer's lr to the restored epoch's (as after that many steps).
  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 protected:
  virtual double lr_at(int64_t epoch) const = 0;
  Optimizer& optimizer_;
  double base_lr_;
  int64_t last_epoch_ = 0;
};

// lr = base_lr * gamma^(epoch / step_size)
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);
  int64_t step_size;
  double gamma;

 protected:
  double lr_at(int64_t epoch) const override;
};

// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0);
  int64_t T_max;
  double eta_min;

 protected:
  double lr_at(int64_t epoch) const override;
};

// Linear warmup, then cosine to eta_min: step e (from 0) runs at
//   base_lr * (e + 1) / warmup                                          for e < warmup,
//   eta_min + (base_lr - eta_min) * (1 + cos(pi * (e + 1 - warmup) / (total - warmup))) / 2   after,
// so no step runs at lr 0 and the last reaches eta_min (PyTorch: SequentialLR of LinearLR and
// CosineAnnealingLR). The constructor sets step 0's lr.
class WarmupCosineLR : public LRScheduler {
 public:
  WarmupCosineLR(Optimizer& optimizer, int64_t warmup_steps, int64_t total_steps, double eta_min = 0);
  int64_t warmup_steps, total_steps;
  double eta_min;

 protected:
  double lr_at(int64_t epoch) const override;
};

}  // namespace graft::optim
