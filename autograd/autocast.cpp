#include "autograd/autocast.h"

#include <map>
#include <utility>

#include "autograd/autocast_policies.h"
#include "autograd/autograd_meta.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"

namespace graft::autocast {

namespace {

struct CacheEntry {
  Tensor source;  // kept alive so its address cannot be reused by another tensor while cached
  int64_t version = 0;
  Tensor cast;
  bool recorded = false;  // the cast has history (made while recording)
};

struct Tls {
  AutocastState state;
  int suspended = 0;      // > 0 inside the body of an op autocast acted on (invariant 3)
  int enabled_scopes = 0;  // open guards that enable some device type (the cache's lifetime)
  bool any = false;        // state.any_enabled(), kept in step so active() is one read
  std::map<std::pair<const TensorImpl*, DType>, CacheEntry> cache;
};

thread_local Tls t;

void set_state(const AutocastState& s) {
  t.state = s;
  t.any = s.any_enabled();
}

void open_scope() { ++t.enabled_scopes; }
void close_scope() {
  if (--t.enabled_scopes == 0) t.cache.clear();
}

size_t idx(DeviceType d) { return static_cast<size_t>(d); }

bool eligible(const Tensor& x, DeviceType device) {
  return x.defined() && is_floating(x.dtype()) && x.dtype() != DType::Float64 && x.device().type == device;
}

bool cacheable(const Tensor& x, DeviceType device, DType to) {
  if (t.enabled_scopes == 0 || to != t.state.dtype[idx(device)] || x.dtype() != DType::Float32) return false;
  auto* m = autograd::get_meta(x);
  return m && m->requires_grad_ && !m->grad_fn_ && !m->is_view_;
}

Tensor cast_to(const Tensor& x, DType to) { return graft::_to_copy(x, to, x.device(), false, false); }

Tensor cached_cast(const Tensor& x, DeviceType device, DType to) {
  if (!cacheable(x, device, to)) return cast_to(x, to);
  const bool recording = autograd::is_recording_enabled();
  auto key = std::make_pair(static_cast<const TensorImpl*>(x.impl()), to);
  auto it = t.cache.find(key);
  if (it != t.cache.end() && it->second.version == x.version() && (it->second.recorded || !recording))
    return it->second.cast;
  Tensor c = cast_to(x, to);
  t.cache[key] = CacheEntry{x, x.version(), c, recording};
  return c;
}

}  // namespace

bool AutocastState::any_enabled() const {
  for (bool e : enabled)
    if (e) return true;
  return false;
}

AutocastGuard::AutocastGuard(Device device, DType dtype, bool enabled)
    : type_(device.type), prev_enabled_(t.state.enabled[idx(device.type)]), prev_dtype_(t.state.dtype[idx(device.type)]),
      opens_scope_(enabled) {
  GRAFT_CHECK(dtype == DType::BFloat16 || dtype == DType::Float16, "AutocastGuard: autocast on ", device,
              " runs ops in bfloat16 or float16, got ", dtype_name(dtype));
  AutocastState s = t.state;
  s.enabled[idx(type_)] = enabled;
  s.dtype[idx(type_)] = dtype;
  set_state(s);
  if (opens_scope_) open_scope();
}

AutocastGuard::AutocastGuard(Device device, bool enabled)
    : AutocastGuard(device, t.state.dtype[idx(device.type)], enabled) {}

AutocastGuard::~AutocastGuard() {
  AutocastState s = t.state;
  s.enabled[idx(type_)] = prev_enabled_;
  s.dtype[idx(type_)] = prev_dtype_;
  set_state(s);
  if (opens_scope_) close_scope();
}

bool is_autocast_enabled(DeviceType type) { return t.state.enabled[idx(type)]; }
DType get_autocast_dtype(DeviceType type) { return t.state.dtype[idx(type)]; }

AutocastState current_state() { return t.state; }

AutocastStateGuard::AutocastStateGuard(const AutocastState& state)
    : prev_(t.state), opens_scope_(state.any_enabled()) {
  set_state(state);
  if (opens_scope_) open_scope();
}

AutocastStateGuard::~AutocastStateGuard() {
  set_state(prev_);
  if (opens_scope_) close_scope();
}

const char* cast_policy_name(CastPolicy p) {
  switch (p) {
    case CastPolicy::None: return "none";
    case CastPolicy::Lower: return "lower";
    case CastPolicy::Fp32: return "fp32";
    case CastPolicy::Promote: return "promote";
  }
  return "?";
}

std::optional<OpPolicy> op_policy(std::string_view name) {
  std::optional<OpPolicy> found;
  bool plain = name.find('.') == std::string_view::npos;
  for (const NamedPolicy& p : policies::kAll) {
    std::string_view n = p.name;
    bool match = n == name || (plain && n.substr(0, n.find('.')) == name);
    if (!match) continue;
    if (n == name) return p.policy;
    if (found && (found->cpu != p.policy.cpu || found->cuda != p.policy.cuda))
      GRAFT_ERROR("autocast::op_policy: the overloads of ", name, " have different policies; ask for one by its "
                  "full name (e.g. ", n, ")");
    found = p.policy;
  }
  return found;
}

std::vector<NamedPolicy> op_policies() {
  std::vector<NamedPolicy> out;
  for (const NamedPolicy& p : policies::kAll)
    if (p.policy.cpu != CastPolicy::None || p.policy.cuda != CastPolicy::None) out.push_back(p);
  return out;
}

std::optional<DType> cast_dtype(CastPolicy policy, DType lower, const std::vector<DType>& floating_inputs,
                                std::string_view op) {
  switch (policy) {
    case CastPolicy::None: return std::nullopt;
    case CastPolicy::Lower: return lower;
    case CastPolicy::Fp32: return DType::Float32;
    case CastPolicy::Promote: break;
  }
  // PyTorch's prioritize(): float64 is ignored (never cast), float32 wins over the lower type.
  DType to = lower;
  for (DType d : floating_inputs) {
    if (!is_floating(d) || d == DType::Float64) continue;
    if (d == DType::Float32 || to == DType::Float32) {
      to = DType::Float32;
    } else {
      GRAFT_CHECK(d == lower, op, ": under ", dtype_name(lower), " autocast its inputs are ", dtype_name(d), " and ",
                  dtype_name(lower), ", which autocast does not promote (as PyTorch); cast them to one type first");
    }
  }
  return to;
}

size_t cast_cache_size() { return t.cache.size(); }

namespace detail {

bool active() { return t.any && t.suspended == 0; }

OpCast::OpCast(const char* op, OpPolicy policy, std::initializer_list<const Tensor*> tensors) {
  decide(op, policy, std::vector<const Tensor*>(tensors));
}

OpCast::OpCast(const char* op, OpPolicy policy, const std::vector<Tensor>& list,
               std::initializer_list<const Tensor*> tensors) {
  std::vector<const Tensor*> all;
  all.reserve(list.size() + tensors.size());
  for (const Tensor& x : list) all.push_back(&x);
  all.insert(all.end(), tensors.begin(), tensors.end());
  decide(op, policy, all);
}

void OpCast::decide(const char* op, OpPolicy policy, const std::vector<const Tensor*>& tensors) {
  // The op runs on its first defined tensor's device (mixed devices are the op's own error).
  const Tensor* first = nullptr;
  for (const Tensor* x : tensors)
    if (x->defined()) {
      first = x;
      break;
    }
  if (!first) return;
  device_ = first->device().type;
  CastPolicy p = policy.on(device_);
  if (p == CastPolicy::None || !t.state.enabled[idx(device_)]) return;
  std::vector<DType> dtypes;
  if (p == CastPolicy::Promote)
    for (const Tensor* x : tensors)
      if (eligible(*x, device_)) dtypes.push_back(x->dtype());
  to_ = *cast_dtype(p, t.state.dtype[idx(device_)], dtypes, op);
  acting_ = true;
  ++t.suspended;
}

OpCast::~OpCast() {
  if (acting_) --t.suspended;
}

Tensor OpCast::operator()(const Tensor& x) const {
  if (!eligible(x, device_) || x.dtype() == to_) return x;
  return cached_cast(x, device_, to_);
}

std::vector<Tensor> OpCast::operator()(const std::vector<Tensor>& ts) const {
  std::vector<Tensor> out;
  out.reserve(ts.size());
  for (const Tensor& x : ts) out.push_back((*this)(x));
  return out;
}

}  // namespace detail
}  // namespace graft::autocast
