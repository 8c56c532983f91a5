#include "optim/grad_scaler.h"

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::optim {

GradScaler::GradScaler(GradScalerOptions o)
    : enabled_(o.enabled), init_scale_(o.init_scale), growth_factor_(o.growth_factor),
      backoff_factor_(o.backoff_factor), growth_interval_(o.growth_interval) {
  if (!enabled_) return;
  GRAFT_CHECK(growth_factor_ > 1.0, "GradScaler: the growth factor must be > 1.0, got ", growth_factor_);
  GRAFT_CHECK(backoff_factor_ < 1.0, "GradScaler: the backoff factor must be < 1.0, got ", backoff_factor_);
  GRAFT_CHECK(growth_interval_ >= 1, "GradScaler: the growth interval must be >= 1, got ", growth_interval_);
}

void GradScaler::check_initialised(const char* fn) const {
  GRAFT_CHECK(scale_.defined(), "GradScaler: attempted ", fn,
              " but the scale is not initialised; this may indicate the script did not use scaler.scale(loss) "
              "earlier in the iteration");
}

Tensor GradScaler::scale(const Tensor& loss) {
  if (!enabled_) return loss;
  GRAFT_CHECK(loss.defined(), "GradScaler::scale: the loss is undefined");
  if (!scale_.defined()) {
    NoGradGuard ng;
    scale_ = ops::full({}, init_scale_, kFloat32, loss.device());
    growth_tracker_ = ops::full({}, init_growth_tracker_, kInt32, loss.device());
  }
  return graft::mul(loss, ops::to_device(scale_, loss.device()));
}

void GradScaler::unscale_(Optimizer& optimizer) {
  if (!enabled_) return;
  check_initialised("unscale_()");
  OptimizerState& st = per_optimizer_[&optimizer];
  GRAFT_CHECK(st.stage != Stage::Unscaled,
              "GradScaler: unscale_() has already been called on this optimizer since the last update().");
  GRAFT_CHECK(st.stage != Stage::Stepped, "GradScaler: unscale_() is being called after step().");
  NoGradGuard ng;
  // float32(1 / scale), the reciprocal taken in double as PyTorch, on the scale's device.
  const Tensor inv_scale = ops::to_dtype(ops::reciprocal(ops::to_dtype(scale_, kFloat64)), kFloat32);
  std::vector<std::pair<Device, Tensor>> inv_per_device;
  st.found_inf.clear();
  const auto& params = optimizer.parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    Tensor g = params[i].grad();
    if (!g.defined()) continue;
    GRAFT_CHECK(g.dtype() != kFloat16, "GradScaler: attempting to unscale FP16 gradients (parameter ", i, ": ",
                describe(g), "); keep the parameters float32 under autocast");
    const Device dev = g.device();
    size_t k = 0;
    while (k < st.found_inf.size() && st.found_inf[k].first != dev) ++k;
    if (k == st.found_inf.size()) {
      st.found_inf.emplace_back(dev, ops::zeros({}, kFloat32, dev));
      inv_per_device.emplace_back(dev, ops::to_device(inv_scale, dev));
    }
    ops::_amp_non_finite_check_and_unscale_(g, st.found_inf[k].second, inv_per_device[k].second);
  }
  st.stage = Stage::Unscaled;
}

bool GradScaler::step(Optimizer& optimizer) {
  if (!enabled_) {
    optimizer.step();
    return true;
  }
  check_initialised("step()");
  GRAFT_CHECK(per_optimizer_[&optimizer].stage != Stage::Stepped,
              "GradScaler: step() has already been called since the last update().");
  if (per_optimizer_[&optimizer].stage == Stage::Ready) unscale_(optimizer);
  OptimizerState& st = per_optimizer_[&optimizer];
  GRAFT_CHECK(!st.found_inf.empty(), "GradScaler: no inf checks were recorded for this optimizer (no parameter has "
              "a gradient)");
  float found = 0;
  for (const auto& [dev, f] : st.found_inf) found += f.item<float>();
  const bool stepped = found == 0;
  if (stepped) optimizer.step();
  st.stage = Stage::Stepped;
  return stepped;
}

void GradScaler::update() {
  if (!enabled_) return;
  check_initialised("update()");
  NoGradGuard ng;
  Tensor combined;
  for (const auto& [opt, st] : per_optimizer_)
    for (const auto& [dev, f] : st.found_inf) {
      Tensor here = ops::to_device(f, scale_.device());
      combined = combined.defined() ? ops::add(combined, here) : here;
    }
  GRAFT_CHECK(combined.defined(), "GradScaler: no inf checks were recorded prior to update()");
  ops::_amp_update_scale_(scale_, growth_tracker_, combined, growth_factor_, backoff_factor_, growth_interval_);
  per_optimizer_.clear();
}

void GradScaler::update(double new_scale) {
  if (!enabled_) return;
  check_initialised("update()");
  NoGradGuard ng;
  ops::fill_(scale_, new_scale);
  per_optimizer_.clear();
}

double GradScaler::get_scale() const {
  if (!enabled_) return 1.0;
  return scale_.defined() ? static_cast<double>(scale_.item<float>()) : init_scale_;
}

int64_t GradScaler::get_growth_tracker() const {
  if (!enabled_) return 0;
  return growth_tracker_.defined() ? ops::to_dtype(growth_tracker_, kInt64).item<int64_t>() : init_growth_tracker_;
}

std::map<std::string, double> GradScaler::state_dict() const {
  if (!enabled_) return {};
  return {{"scale", get_scale()},
          {"growth_factor", growth_factor_},
          {"backoff_factor", backoff_factor_},
          {"growth_interval", static_cast<double>(growth_interval_)},
          {"_growth_tracker", static_cast<double>(get_growth_tracker())}};
}

void GradScaler::load_state_dict(const std::map<std::string, double>& state) {
  if (!enabled_) return;
  GRAFT_CHECK(!state.empty(), "GradScaler::load_state_dict: the source state dict is empty, possibly because it was "
              "saved from a disabled instance of GradScaler");
  auto get = [&](const char* key) {
    auto it = state.find(key);
    GRAFT_CHECK(it != state.end(), "GradScaler::load_state_dict: missing key '", key, "'");
    return it->second;
  };
  const double scale = get("scale"), growth = get("growth_factor"), backoff = get("backoff_factor");
  const double interval = get("growth_interval"), tracker = get("_growth_tracker");
  GRAFT_CHECK(growth > 1.0 && backoff < 1.0 && interval >= 1 && tracker >= 0,
              "GradScaler::load_state_dict: invalid state (growth_factor ", growth, ", backoff_factor ", backoff,
              ", growth_interval ", interval, ", _growth_tracker ", tracker, ")");
  init_scale_ = scale;
  growth_factor_ = growth;
  backoff_factor_ = backoff;
  growth_interval_ = static_cast<int64_t>(interval);
  init_growth_tracker_ = static_cast<int64_t>(tracker);
  NoGradGuard ng;
  if (scale_.defined()) ops::fill_(scale_, scale);
  if (growth_tracker_.defined()) ops::fill_(growth_tracker_, init_growth_tracker_);
}

}  // namespace graft::optim
