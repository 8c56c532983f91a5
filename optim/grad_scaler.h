#pragma once
// graft::optim::GradScaler: dynamic loss scaling for float16 training, torch.amp.GradScaler in C++.
//
//   optim::GradScaler scaler;                  // init_scale 2^16, growth x2 every 2000 clean steps
//   scaler.scale(loss).backward();             // gradients of loss * scale
//   scaler.unscale_(opt);                      // optional: before clipping, once per step
//   scaler.step(opt);                          // skipped when a gradient has an inf or NaN
//   scaler.update();                           // backoff x0.5 on a skipped step, growth after
//                                              // growth_interval clean steps in a row
//
// Invariants:
// 1. The scale (float32) and growth tracker (int32) are 0-d tensors on the device of the first
//    loss scale() sees, created then (before that get_scale() is init_scale, as PyTorch). update()
//    changes them with ops::_amp_update_scale_ on that device: on CUDA they never visit the host.
// 2. unscale_ runs ops::_amp_non_finite_check_and_unscale_ over every gradient of the optimizer:
//    one pass per gradient multiplies it by float32(1 / scale) (computed in double, as PyTorch) and
//    raises its device's found_inf. step() reads the found_infs once (the only host sync) and calls
//    the optimizer's step only if all are 0. Gradients are unscaled even on a skipped step.
// 3. Per optimizer, a step goes Ready -> (unscale_) Unscaled -> (step) Stepped, and update()
//    returns every optimizer to Ready: unscale_ twice, unscale_ after step, or step twice between
//    updates is an error with PyTorch's words. update() needs at least one unscaled optimizer.
// 4. enabled = false is a pass-through: scale returns the loss, step calls opt.step(), unscale_,
//    update and load_state_dict do nothing, get_scale() is 1 and state_dict() is empty.
// 5. As PyTorch, float16 gradients (float16 parameters) are refused by unscale_: keep parameters
//    float32 under autocast. bfloat16 and float32 gradients are unscaled.
// 6. state_dict() has PyTorch's keys: scale, growth_factor, backoff_factor, growth_interval,
//    _growth_tracker (numbers as doubles; the two integers are exact).
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "optim/optimizer.h"
#include "runtime/tensor.h"

namespace graft::optim {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;   // > 1
  double backoff_factor = 0.5;  // < 1
  int64_t growth_interval = 2000;
  bool enabled = true;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (differentiable; float32 scale, so a float16 loss gives a float32 result).
  Tensor scale(const Tensor& loss);
  // Divides the optimizer's gradients by the scale in place and records inf/NaN (invariant 2).
  void unscale_(Optimizer& optimizer);
  // Unscales if unscale_ was not called this step, then steps the optimizer unless a gradient had
  // an inf or NaN. Returns whether the optimizer stepped.
  bool step(Optimizer& optimizer);
  // The dynamic update of the scale from this step's found_infs (invariant 1).
  void update();
  // Sets the scale to new_scale (the growth tracker is kept, as PyTorch).
  void update(double new_scale);

  double get_scale() const;
  int64_t get_growth_tracker() const;
  double get_growth_factor() const { return growth_factor_; }
  double get_backoff_factor() const { return backoff_factor_; }
  int64_t get_growth_interval() const { return growth_interval_; }
  bool is_enabled() const { return enabled_; }

  std::map<std::string, double> state_dict() const;
  void load_state_dict(const std::map<std::string, double>& state);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct OptimizerState {
    Stage stage = Stage::Ready;
    std::vector<std::pair<Device, Tensor>> found_inf;  // one float32 0-d tensor per gradient device
  };
  void check_initialised(const char* fn) const;

  bool enabled_;
  double init_scale_, growth_factor_, backoff_factor_;
  int64_t growth_interval_;
  int64_t init_growth_tracker_ = 0;
  Tensor scale_, growth_tracker_;
  std::map<const Optimizer*, OptimizerState> per_optimizer_;
};

}  // namespace graft::optim
