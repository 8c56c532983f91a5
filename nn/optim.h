#pragma once
// graft::optim: SGD, Adam, AdamW and learning-rate schedulers, with PyTorch's update formulas.
// Updates run in place under NoGradGuard; parameters whose grad is undefined are skipped.
// Each parameter is updated by one fused kernel (ops::fused_adam_ / fused_sgd_: one pass over
// parameter, gradient and state instead of ~7 ops); `fused = false` takes the op-by-op path. On the
// CPU both give the same bits; on CUDA they agree to rounding (nvcc contracts to FMA).
#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace graft::optim {

class Optimizer {
 public:
  Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  virtual void step() = 0;
  // set_to_none: grads become undefined; otherwise they are zeroed in place.
  void zero_grad(bool set_to_none = true);

  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }
  const std::vector<Tensor>& parameters() const { return params_; }

  bool fused = true;  // PyTorch's fused=: one kernel per parameter where the tensors allow it

 protected:
  std::vector<Tensor> params_;
  double lr_;
};

// PyTorch's SGD: d = g + wd*p; buf = d (first step) else momentum*buf + (1-dampening)*d;
// d = nesterov ? d + momentum*buf : buf; p -= lr*d.
class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double dampening = 0, double weight_decay = 0,
      bool nesterov = false);
  void step() override;
  double momentum, dampening, weight_decay;
  bool nesterov;

 private:
  std::vector<Tensor> momentum_buffer_;
};

// Adam (L2 weight decay added to the gradient) and AdamW (decoupled: p *= 1 - lr*wd before the step).
class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
       double eps = 1e-8, double weight_decay = 0);
  void step() override;
  std::pair<double, double> betas;
  double eps, weight_decay;

 protected:
  Adam(std::vector<Tensor> params, double lr, std::pair<double, double> betas, double eps, double weight_decay,
       bool decoupled);
  bool decoupled_ = false;
  std::vector<int64_t> step_;
  std::vector<Tensor> exp_avg_, exp_avg_sq_;
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, std::pair<double, double> betas = {0.9, 0.999},
        double eps = 1e-8, double weight_decay = 1e-2);
};

// Schedulers set the optimizer's lr from the epoch counter; step() advances it by one.
class LRScheduler {
 public:
  explicit LRScheduler(Optimizer& optimizer);
  virtual ~LRScheduler() = default;
  void step();
  int64_t last_epoch() const { return last_epoch_; }
  double get_last_lr() const { return optimizer_.lr(); }
  double base_lr() const { return base_lr_; }

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
