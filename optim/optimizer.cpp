#include "optim/optimizer.h"

#include <cmath>

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/zero_grad.h"
#include "ops/fused_optim_plan.h"
#include "ops/ops.h"
#include "runtime/memory_format.h"

namespace graft::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  GRAFT_CHECK(lr >= 0, "Optimizer: invalid learning rate: ", lr);
  for (size_t i = 0; i < params_.size(); ++i) {
    GRAFT_CHECK(params_[i].defined(), "Optimizer: parameter ", i, " is undefined");
    GRAFT_CHECK(params_[i].is_leaf(), "Optimizer: can't optimize a non-leaf Tensor (parameter ", i, ")");
  }
}

void Optimizer::zero_grad(bool set_to_none) { autograd::zero_grads(params_, set_to_none); }

namespace {
// The gradient as a plain tensor (never part of a graph).
Tensor grad_of(const Tensor& p) {
  Tensor g = p.grad();
  if (g.defined() && g.grad_fn()) g = g.detach();
  return g;
}

// The fused kernels (ops/fused_optim.cpp, cuda/) take tensors dense in the parameter's layout
// (contiguous, or a channels-last weight's: its gradient has the same by the layout contract,
// autograd/accumulate_grad.cpp, and its state is made like it) that match the parameter (state:
// float32 for a 16-bit parameter); anything else (a strided or differently typed gradient) takes
// the op-by-op path, which computes the same update.
bool same_dense_layout(const Tensor& p, const Tensor& t) {
  return t.sizes() == p.sizes() && is_dense_like(t.sizes(), t.strides(), p.strides());
}
bool fusable(const Tensor& p, const Tensor& g) {
  return is_floating(p.dtype()) && is_non_overlapping_and_dense(p.sizes(), p.strides()) && same_dense_layout(p, g) &&
         g.dtype() == p.dtype() && g.device() == p.device() && g.data_ptr() != p.data_ptr();
}
bool fusable_state(const Tensor& p, const Tensor& s) {
  return !s.defined() || (same_dense_layout(p, s) && s.dtype() == kernels::fused_state_dtype(p.dtype()));
}

// A new state tensor for p: zeros (or uninitialised) like p, float32 for a 16-bit parameter, and
// in p's layout where p is dense (a channels-last weight's state is channels-last, so the fused
// kernels take it).
Tensor new_state(const Tensor& p, bool zero) {
  const DType dt = kernels::fused_state_dtype(p.dtype());
  if (!p.is_contiguous() && is_non_overlapping_and_dense(p.sizes(), p.strides())) {
    Tensor s = ops::empty_strided(p.sizes(), p.strides(), dt, p.device());
    return zero ? s.zero_() : s;
  }
  TensorOptions o = TensorOptions().dtype(dt);
  return zero ? graft::zeros_like(p, o) : graft::empty_like(p, o);
}

// The op-by-op update of a 16-bit parameter runs on float32 copies of the parameter and gradient
// (its state is float32) and writes the parameter back rounded once, as the fused kernel does.
struct FloatView {
  Tensor& p;
  Tensor work;
  explicit FloatView(Tensor& param)
      : p(param), work(is_reduced_floating(param.dtype()) ? ops::to_dtype(param, kFloat32) : param) {}
  Tensor grad(const Tensor& g) const {
    return work.is_same(p) || g.dtype() == work.dtype() ? g : ops::to_dtype(g, work.dtype());
  }
  void write_back() {
    if (!work.is_same(p)) ops::copy_(p, work);
  }
};
}  // namespace

SGD::SGD(std::vector<Tensor> params, double lr, double momentum_, double dampening_, double wd, bool nesterov_)
    : Optimizer(std::move(params), lr), momentum(momentum_), dampening(dampening_), weight_decay(wd),
      nesterov(nesterov_), momentum_buffer_(params_.size()) {
  GRAFT_CHECK(momentum >= 0, "SGD: invalid momentum value: ", momentum);
  GRAFT_CHECK(weight_decay >= 0, "SGD: invalid weight_decay value: ", weight_decay);
  GRAFT_CHECK(!nesterov || (momentum > 0 && dampening == 0), "SGD: nesterov momentum requires a momentum and zero dampening");
}

namespace {
int64_t float32_elements_bytes(const std::vector<Tensor>& params) {
  int64_t n = 0;
  for (const Tensor& p : params) n += p.numel();
  return n * 4;
}
}  // namespace

int64_t SGD::state_bytes() const { return momentum != 0 ? float32_elements_bytes(params_) : 0; }
int64_t Adam::state_bytes() const { return 2 * float32_elements_bytes(params_); }

void SGD::step() {
  NoGradGuard ng;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor d = grad_of(p);
    if (!d.defined()) continue;
    if (fused && fusable(p, d) && (momentum == 0 || fusable_state(p, momentum_buffer_[i]))) {
      bool first = momentum != 0 && !momentum_buffer_[i].defined();
      if (first) momentum_buffer_[i] = new_state(p, false);
      ops::fused_sgd_(p, momentum_buffer_[i], d,
                      {lr_, momentum, dampening, weight_decay, nesterov, first});
      continue;
    }
    FloatView pv(p);
    d = pv.grad(d);
    if (weight_decay != 0) d = ops::add(d, pv.work, weight_decay);
    if (momentum != 0) {
      Tensor& buf = momentum_buffer_[i];
      if (!buf.defined()) {
        buf = ops::clone(d);
      } else {
        ops::mul_(buf, momentum);
        ops::add_(buf, d, 1 - dampening);
      }
      d = nesterov ? ops::add(d, buf, momentum) : buf;
    }
    ops::add_(pv.work, d, -lr_);
    pv.write_back();
  }
}

Adam::Adam(std::vector<Tensor> params, double lr, std::pair<double, double> b, double e, double wd)
    : Adam(std::move(params), lr, b, e, wd, false) {}

Adam::Adam(std::vector<Tensor> params, double lr, std::pair<double, double> b, double e, double wd, bool decoupled)
    : Optimizer(std::move(params), lr), betas(b), eps(e), weight_decay(wd), decoupled_(decoupled),
      step_(params_.size(), 0), exp_avg_(params_.size()), exp_avg_sq_(params_.size()) {
  GRAFT_CHECK(eps >= 0, "Adam: invalid epsilon value: ", eps);
  GRAFT_CHECK(b.first >= 0 && b.first < 1, "Adam: invalid beta parameter at index 0: ", b.first);
  GRAFT_CHECK(b.second >= 0 && b.second < 1, "Adam: invalid beta parameter at index 1: ", b.second);
  GRAFT_CHECK(wd >= 0, "Adam: invalid weight_decay value: ", wd);
}

void Adam::step() {
  NoGradGuard ng;
  const auto [beta1, beta2] = betas;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor& p = params_[i];
    Tensor g = grad_of(p);
    if (!g.defined()) continue;
    if (!exp_avg_[i].defined()) {
      exp_avg_[i] = new_state(p, true);
      exp_avg_sq_[i] = new_state(p, true);
    }
    int64_t t = ++step_[i];
    double bc1 = 1 - std::pow(beta1, static_cast<double>(t));
    double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
    if (fused && fusable(p, g) && fusable_state(p, exp_avg_[i]) && fusable_state(p, exp_avg_sq_[i])) {
      ops::fused_adam_(p, exp_avg_[i], exp_avg_sq_[i], g, {lr_, beta1, beta2, weight_decay, eps, bc1, bc2, decoupled_});
      continue;
    }
    FloatView pv(p);
    g = pv.grad(g);
    if (weight_decay != 0) {
      if (decoupled_)
        ops::mul_(pv.work, 1 - lr_ * weight_decay);
      else
        g = ops::add(g, pv.work, weight_decay);
    }
    ops::lerp_(exp_avg_[i], g, 1 - beta1);
    ops::mul_(exp_avg_sq_[i], beta2);
    ops::addcmul_(exp_avg_sq_[i], g, g, 1 - beta2);
    Tensor denom = ops::sqrt(exp_avg_sq_[i]);
    ops::div_(denom, std::sqrt(bc2));
    ops::add_(denom, eps);
    ops::addcdiv_(pv.work, exp_avg_[i], denom, -lr_ / bc1);
    pv.write_back();
  }
}

AdamW::AdamW(std::vector<Tensor> params, double lr, std::pair<double, double> b, double e, double wd)
    : Adam(std::move(params), lr, b, e, wd, true) {}

// ---- state_dict / load_state_dict ----

namespace {

std::string state_key(size_t i, const char* name) { return "state." + std::to_string(i) + "." + name; }

// A detached copy: the saved state must not follow later in-place steps.
Tensor snapshot(const Tensor& t) {
  NoGradGuard ng;
  return ops::clone(t.detach());
}

double value_of(const OptimizerState& s, const std::string& key, const char* who) {
  auto it = s.values.find(key);
  GRAFT_CHECK(it != s.values.end(), who, ".load_state_dict: the state has no value '", key, "'");
  return it->second;
}

// The state tensors of parameter i: present as a group or not at all, each shaped like the
// parameter with the dtype its state takes (float32 for 16-bit parameters), checked before use.
std::vector<Tensor> state_tensors(const OptimizerState& s, size_t i, const Tensor& p,
                                  std::initializer_list<const char*> names, const char* who) {
  std::vector<Tensor> out;
  size_t found = 0;
  for (const char* n : names) found += s.tensors.count(state_key(i, n));
  if (found == 0) return out;
  const DType want = is_reduced_floating(p.dtype()) ? kFloat32 : p.dtype();
  for (const char* n : names) {
    const std::string key = state_key(i, n);
    auto it = s.tensors.find(key);
    GRAFT_CHECK(it != s.tensors.end(), who, ".load_state_dict: parameter ", i, " has some state but no '", key, "'");
    const Tensor& t = it->second;
    GRAFT_CHECK(t.defined() && t.sizes() == p.sizes(), who, ".load_state_dict: '", key, "' has shape ",
                t.defined() ? shape_str(t.sizes()) : std::string("(undefined)"), " but parameter ", i, " has shape ",
                shape_str(p.sizes()));
    GRAFT_CHECK(t.dtype() == want || (t.dtype() == p.dtype()), who, ".load_state_dict: '", key, "' is ", t.dtype(),
                "; parameter ", i, " (", p.dtype(), ") keeps its state in ", want);
    out.push_back(t);
  }
  return out;
}

Tensor restored(const Tensor& t, const Tensor& p) {
  NoGradGuard ng;
  const DType want = is_reduced_floating(p.dtype()) ? kFloat32 : p.dtype();
  return ops::clone(t.detach().to(p.device()).to(want));
}

void check_kind(const OptimizerState& s, const std::string& kind, size_t params, const char* who) {
  GRAFT_CHECK(s.kind == kind, who, ".load_state_dict: the state is of a '", s.kind.empty() ? "(none)" : s.kind,
              "' optimizer, this one is '", kind, "'");
  const double n = value_of(s, "param_count", who);
  GRAFT_CHECK(n == static_cast<double>(params), who, ".load_state_dict: the state holds ", n,
              " parameters, this optimizer has ", params);
}

}  // namespace

OptimizerState SGD::state_dict() const {
  OptimizerState s{"sgd", {{"lr", lr_}, {"momentum", momentum}, {"dampening", dampening}, {"weight_decay", weight_decay},
                           {"nesterov", nesterov ? 1.0 : 0.0}, {"param_count", static_cast<double>(params_.size())}},
                   {}};
  for (size_t i = 0; i < params_.size(); ++i)
    if (momentum_buffer_[i].defined()) s.tensors[state_key(i, "momentum_buffer")] = snapshot(momentum_buffer_[i]);
  return s;
}

void SGD::load_state_dict(const OptimizerState& s) {
  check_kind(s, "sgd", params_.size(), "SGD");
  std::vector<Tensor> bufs(params_.size());
  for (size_t i = 0; i < params_.size(); ++i) {
    auto t = state_tensors(s, i, params_[i], {"momentum_buffer"}, "SGD");
    if (!t.empty()) bufs[i] = restored(t[0], params_[i]);
  }
  // Everything checked: now change the optimizer.
  lr_ = value_of(s, "lr", "SGD");
  momentum = value_of(s, "momentum", "SGD");
  dampening = value_of(s, "dampening", "SGD");
  weight_decay = value_of(s, "weight_decay", "SGD");
  nesterov = value_of(s, "nesterov", "SGD") != 0;
  momentum_buffer_ = std::move(bufs);
}

OptimizerState Adam::state_dict() const {
  OptimizerState s{decoupled_ ? "adamw" : "adam",
                   {{"lr", lr_}, {"betas.0", betas.first}, {"betas.1", betas.second}, {"eps", eps},
                    {"weight_decay", weight_decay}, {"param_count", static_cast<double>(params_.size())}},
                   {}};
  for (size_t i = 0; i < params_.size(); ++i) {
    if (!exp_avg_[i].defined()) continue;
    s.values[state_key(i, "step")] = static_cast<double>(step_[i]);
    s.tensors[state_key(i, "exp_avg")] = snapshot(exp_avg_[i]);
    s.tensors[state_key(i, "exp_avg_sq")] = snapshot(exp_avg_sq_[i]);
  }
  return s;
}

void Adam::load_state_dict(const OptimizerState& s) {
  const char* who = decoupled_ ? "AdamW" : "Adam";
  check_kind(s, decoupled_ ? "adamw" : "adam", params_.size(), who);
  std::vector<Tensor> m(params_.size()), v(params_.size());
  std::vector<int64_t> steps(params_.size(), 0);
  for (size_t i = 0; i < params_.size(); ++i) {
    auto t = state_tensors(s, i, params_[i], {"exp_avg", "exp_avg_sq"}, who);
    if (t.empty()) continue;
    const double st = value_of(s, state_key(i, "step"), who);
    GRAFT_CHECK(st >= 1 && st == static_cast<double>(static_cast<int64_t>(st)), who, ".load_state_dict: '",
                state_key(i, "step"), "' must be a whole number of at least 1, got ", st);
    m[i] = restored(t[0], params_[i]);
    v[i] = restored(t[1], params_[i]);
    steps[i] = static_cast<int64_t>(st);
  }
  lr_ = value_of(s, "lr", who);
  betas = {value_of(s, "betas.0", who), value_of(s, "betas.1", who)};
  eps = value_of(s, "eps", who);
  weight_decay = value_of(s, "weight_decay", who);
  exp_avg_ = std::move(m);
  exp_avg_sq_ = std::move(v);
  step_ = std::move(steps);
}

}  // namespace graft::optim
