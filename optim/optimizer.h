#pragma once
// graft::optim: SGD, Adam and AdamW, with PyTorch's update formulas (the learning-rate schedulers
// that drive them are in optim/lr_scheduler.h; loss scaling for float16 in optim/grad_scaler.h).
// Updates run in place under NoGradGuard; parameters whose grad is undefined are skipped.
// Each parameter is updated by one fused kernel (ops::fused_adam_ / fused_sgd_: one pass over
// parameter, gradient and state instead of ~7 ops); `fused = false` takes the op-by-op path.
//
// Invariants:
// 1. Adam/AdamW: on the CPU the fused and op-by-op paths give the same bits; on CUDA they agree to
//    rounding (nvcc contracts to FMA).
// 2. SGD's fused kernel rounds each `x + a*y` once (a fused multiply-add), as PyTorch's CPU and
//    CUDA kernels do, so SGD's float32 parameters follow PyTorch's bits (the GradScaler fixture
//    checks them); the op-by-op path rounds the product first, so it agrees to rounding.
// 3. bfloat16 and float16 parameters keep float32 state (exp_avg, exp_avg_sq, momentum_buffer):
//    each step loads the parameter to float, updates it in float and rounds it once. This is a
//    deliberate difference from PyTorch, whose optimizers keep state in the parameter's dtype:
//    a 16-bit second moment underflows (bfloat16 keeps 8 bits of mantissa, float16 flushes
//    below 6e-8), and float32 state costs 4 (SGD) or 8 (Adam) bytes per parameter.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/tensor.h"

namespace graft::optim {

// An optimizer's training state as a value, for checkpoints and exact resume:
//   kind     "sgd", "adam" or "adamw" (load_state_dict refuses another optimizer's state);
//   values   "lr", the hyperparameters ("momentum", "betas.0", "eps", ...), "param_count", and
//            "state.<i>.step" (Adam's step counts: integers, exact in a double up to 2^53);
//   tensors  "state.<i>.exp_avg", "state.<i>.exp_avg_sq", "state.<i>.momentum_buffer" for each
//            parameter i that has state (float32 for 16-bit parameters, invariant 3).
// state_dict() copies the tensors (later steps never change a saved state); load_state_dict()
// copies them back onto each parameter's device, so both sides stay independent.
struct OptimizerState {
  std::string kind;
  std::map<std::string, double> values;
  std::map<std::string, Tensor> tensors;
};

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
  // The state that makes the next step() exactly what it would have been (see OptimizerState).
  // load_state_dict checks the kind, the parameter count and every state tensor's shape and dtype
  // against the parameters, naming the key, before it changes anything.
  virtual OptimizerState state_dict() const = 0;
  virtual void load_state_dict(const OptimizerState& state) = 0;
  // The bytes its state holds once it has stepped (float32 per parameter element and state
  // tensor, invariant 3): what a memory budget for the whole step must leave it.
  virtual int64_t state_bytes() const { return 0; }

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
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  int64_t state_bytes() const override;  // a momentum buffer when momentum != 0
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
  OptimizerState state_dict() const override;
  void load_state_dict(const OptimizerState& state) override;
  int64_t state_bytes() const override;  // exp_avg and exp_avg_sq
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

}  // namespace graft::optim
