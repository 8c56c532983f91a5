#include "runtime/dispatcher.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "runtime/contention_monitor.h"
#include "runtime/memory_log.h"

namespace graft {

namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<Op>> ops;
};
Registry& registry() {
  static Registry* r = new Registry();  // leaked: Op references must outlive static destructors
  return *r;
}

struct ModeState {
  std::vector<DispatchMode*> stack;
  int visible = -1;  // while a mode runs: how many modes below it are visible; -1 = all
};
thread_local ModeState t_modes;

int visible_modes() {
  return t_modes.visible < 0 ? static_cast<int>(t_modes.stack.size()) : t_modes.visible;
}

// Runs mode number `level - 1` (0-based) with only the modes below it visible.
OpResult run_level(const Op& op, Stack& args, int level) {
  if (level == 0) return dispatch_kernel(op, args);
  DispatchMode* mode = t_modes.stack[level - 1];
  int saved = t_modes.visible;
  t_modes.visible = level - 1;
  struct Restore {
    int v;
    ~Restore() { t_modes.visible = v; }
  } restore{saved};
  return mode->on_op(op, args, DispatchNext(op, level - 1));
}

void collect_device(const IValue& v, const Op& op, Device& dev, bool& found, bool& any_cuda, bool& mixed,
                    Device& other) {
  auto see = [&](const Tensor& t) {
    if (!t.defined()) return;
    Device d = t.device();
    if (d.is_cuda()) any_cuda = true;
    if (!found) {
      dev = d;
      found = true;
    } else if (d != dev && !mixed) {
      mixed = true;
      other = d;
    }
  };
  if (auto* t = std::get_if<Tensor>(&v)) see(*t);
  else if (auto* l = std::get_if<std::vector<Tensor>>(&v)) for (const auto& t : *l) see(t);
  (void)op;
}

std::string describe_args(const Stack& args) {
  std::string out;
  for (const auto& v : args) {
    if (auto* t = std::get_if<Tensor>(&v); t && t->defined()) out += (out.empty() ? "" : ", ") + describe(*t);
  }
  return out;
}

}  // namespace

OpResult DispatchNext::operator()(Stack& args) const { return run_level(op_, args, level_); }

DispatchModeGuard::DispatchModeGuard(DispatchMode* mode) : mode_(mode) {
  GRAFT_CHECK(t_modes.visible < 0, "DispatchModeGuard: cannot push a dispatch mode from inside a mode's handler");
  t_modes.stack.push_back(mode);
}

DispatchModeGuard::~DispatchModeGuard() {
  auto& st = t_modes.stack;
  auto it = std::find(st.rbegin(), st.rend(), mode_);
  if (it != st.rend()) st.erase(std::next(it).base());
}

int dispatch_mode_depth() { return visible_modes(); }

Op& op_handle(const std::string& full_name) {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  auto& slot = r.ops[full_name];
  if (!slot) {
    slot = std::make_unique<Op>();
    slot->schema.name = full_name;
  }
  return *slot;
}

Op& define_op(const std::string& schema_text, bool cross_device) {
  OpSchema s = OpSchema::parse(schema_text);
  s.cross_device = cross_device;
  Op& op = op_handle(s.full_name());
  GRAFT_CHECK(!op.has_schema, "dispatcher: op '", s.full_name(), "' is registered twice");
  op.schema = std::move(s);
  op.has_schema = true;
  return op;
}

void register_kernel(const std::string& full_name, DeviceType device, BoxedKernel kernel) {
  Op& op = op_handle(full_name);
  op.kernels[static_cast<int>(device)] = kernel;
}

std::vector<const Op*> registered_ops() {
  Registry& r = registry();
  std::lock_guard<std::mutex> g(r.mu);
  std::vector<const Op*> out;
  for (auto& [name, op] : r.ops) out.push_back(op.get());
  return out;
}

OpResult dispatch(const Op& op, Stack& args) {
  if (t_modes.stack.empty()) [[likely]]
    return dispatch_kernel(op, args);
  return run_level(op, args, visible_modes());
}

OpResult dispatch_kernel(const Op& op, Stack& args) {
  detail::MemoryLogOpScope log_scope(op.schema.name);
  detail::contention_tick();
  Device dev(DeviceType::CPU), other;
  bool found = false, any_cuda = false, mixed = false;
  for (const auto& v : args) collect_device(v, op, dev, found, any_cuda, mixed, other);
  if (!found) {
    for (const auto& v : args)
      if (auto* d = std::get_if<Device>(&v)) {
        dev = *d;
        break;
      }
  }
  if (mixed) {
    GRAFT_CHECK(op.schema.cross_device, op.schema.full_name(),
                ": expected all tensors to be on the same device, but found at least two devices, ", dev, " and ",
                other, " (arguments: ", describe_args(args), ")");
    if (any_cuda) dev = Device(DeviceType::CUDA);
  }
  // A transfer's target device is an argument, not a tensor (`_to_copy(cpu_tensor, ..., cuda:0)`):
  // only the CUDA kernel can reach device memory, so a CUDA target picks it as a CUDA tensor would.
  if (op.schema.cross_device && !dev.is_cuda()) {
    for (const auto& v : args)
      if (auto* d = std::get_if<Device>(&v); d && d->is_cuda()) dev = *d;
  }
  BoxedKernel k = op.kernels[static_cast<int>(dev.type)];
  if (!k) [[unlikely]] {
    GRAFT_CHECK(op.has_schema, "dispatcher: unknown op '", op.schema.name, "'");
    GRAFT_ERROR(op.schema.full_name(), ": no kernel for device ", dev,
                dev.is_cuda() ? " (graft was built without CUDA or the CUDA backend is not loaded)" : "",
                " (arguments: ", describe_args(args), ")");
  }
  // Written args are captured before the kernel: a mode or kernel may replace the Stack entries.
  const auto& written = op.schema.written_args;
  Tensor w0;
  if (!written.empty()) {
    w0 = std::get<Tensor>(args[written[0]]);
    for (size_t i : written) {
      const Tensor& t = std::get<Tensor>(args[i]);
      GRAFT_CHECK(!t.defined() || !t.impl()->storage()->is_inference() || is_inference_mode_enabled(),
                  op.schema.full_name(), ": Inplace update to inference tensor outside InferenceMode is not allowed. "
                  "You can make a clone to get a normal tensor before doing inplace update. (argument ", i, ": ",
                  describe(t), ")");
    }
  }
  OpResult out = k(args);
  if (!written.empty()) {
    w0.impl()->bump_version();
    for (size_t i = 1; i < written.size(); ++i) {
      const Tensor& t = std::get<Tensor>(args[written[i]]);
      if (t.defined()) t.impl()->bump_version();
    }
  }
  return out;
}

}  // namespace graft
