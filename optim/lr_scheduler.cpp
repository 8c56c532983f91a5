#include "optim/lr_scheduler.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "runtime/error.h"

namespace graft::optim {

LRScheduler::LRScheduler(Optimizer& opt) : optimizer_(opt), base_lr_(opt.lr()) {}

std::map<std::string, double> LRScheduler::state_dict() const {
  return {{"last_epoch", static_cast<double>(last_epoch_)}, {"base_lr", base_lr_}};
}

void LRScheduler::load_state_dict(const std::map<std::string, double>& s) {
  auto get = [&](const char* key) {
    auto it = s.find(key);
    GRAFT_CHECK(it != s.end(), "LRScheduler.load_state_dict: the state has no value '", key, "'");
    return it->second;
  };
  const double e = get("last_epoch"), b = get("base_lr");
  GRAFT_CHECK(e >= 0 && e == static_cast<double>(static_cast<int64_t>(e)), "LRScheduler.load_state_dict: ",
              "'last_epoch' must be a whole number of at least 0, got ", e);
  last_epoch_ = static_cast<int64_t>(e);
  base_lr_ = b;
  optimizer_.set_lr(lr_at(last_epoch_));
}

void LRScheduler::step() {
  ++last_epoch_;
  optimizer_.set_lr(lr_at(last_epoch_));
}

StepLR::StepLR(Optimizer& opt, int64_t step_size_, double gamma_)
    : LRScheduler(opt), step_size(step_size_), gamma(gamma_) {
  GRAFT_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
}

double StepLR::lr_at(int64_t epoch) const {
  return base_lr_ * std::pow(gamma, static_cast<double>(epoch / step_size));
}

CosineAnnealingLR::CosineAnnealingLR(Optimizer& opt, int64_t t_max, double eta_min_)
    : LRScheduler(opt), T_max(t_max), eta_min(eta_min_) {
  GRAFT_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
}

double CosineAnnealingLR::lr_at(int64_t epoch) const {
  return eta_min + (base_lr_ - eta_min) * (1 + std::cos(std::numbers::pi * static_cast<double>(epoch) /
                                                        static_cast<double>(T_max))) / 2;
}

WarmupCosineLR::WarmupCosineLR(Optimizer& opt, int64_t warmup, int64_t total, double eta_min_)
    : LRScheduler(opt), warmup_steps(warmup), total_steps(total), eta_min(eta_min_) {
  GRAFT_CHECK(warmup >= 0 && total > warmup, "WarmupCosineLR: need 0 <= warmup_steps < total_steps, got warmup_steps=",
              warmup, ", total_steps=", total);
  optimizer_.set_lr(lr_at(0));
}

double WarmupCosineLR::lr_at(int64_t epoch) const {
  double k = static_cast<double>(epoch + 1), w = static_cast<double>(warmup_steps);
  if (k <= w) return base_lr_ * k / w;
  return eta_min + (base_lr_ - eta_min) *
                       (1 + std::cos(std::numbers::pi * std::min(1.0, (k - w) / static_cast<double>(total_steps - warmup_steps)))) / 2;
}

}  // namespace graft::optim
