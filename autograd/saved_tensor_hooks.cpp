#include "autograd/saved_tensor_hooks.h"

#include "autograd/grad_mode.h"
#include "ops/ops.h"

namespace graft::autograd {

namespace {
thread_local std::optional<std::string> t_disabled_message;

// What SaveOnCpu keeps: the original device and a host tensor.
struct CpuPacked {
  Device device;
  Tensor host;
  bool pinned = false;
};
}  // namespace

SavedTensorsHooks::SavedTensorsHooks(PackHook pack, UnpackHook unpack)
    : SavedTensorsHooks(std::move(pack), std::move(unpack), /*check_unpacked_metadata=*/true, "hooks") {}

SavedTensorsHooks::SavedTensorsHooks(PackHook pack, UnpackHook unpack, bool check_unpacked_metadata,
                                     std::string kind, bool prefetchable) {
  if (t_disabled_message) throw Error(*t_disabled_message);
  GRAFT_CHECK(pack && unpack, "SavedTensorsHooks: both a pack and an unpack hook are required");
  push_saved_hooks(SavedHooksPair{std::make_shared<const PackHook>(std::move(pack)),
                                  std::make_shared<const UnpackHook>(std::move(unpack)), check_unpacked_metadata,
                                  std::move(kind), prefetchable});
}

SavedTensorsHooks::~SavedTensorsHooks() { pop_saved_hooks(); }

SaveOnCpu::SaveOnCpu(bool pin_memory)
    : SavedTensorsHooks(
          [pin_memory](const Tensor& t) -> Packed {
            if (t.is_cpu()) return CpuPacked{t.device(), t, false};
            return CpuPacked{t.device(), ops::to_device(t, kCPU, /*non_blocking=*/false, pin_memory), pin_memory};
          },
          [](const Packed& p) -> Tensor {
            const auto& c = std::any_cast<const CpuPacked&>(p);
            if (c.device.is_cpu()) return c.host;
            return ops::to_device(c.host, c.device, /*non_blocking=*/c.pinned);
          },
          /*check_unpacked_metadata=*/true, "save_on_cpu", /*prefetchable=*/true) {}

DisableSavedTensorsHooks::DisableSavedTensorsHooks(std::string error_message) {
  GRAFT_CHECK(current_saved_hooks() == nullptr,
              "DisableSavedTensorsHooks: cannot disable saved tensor hooks while a SavedTensorsHooks scope is "
              "active (", error_message, ")");
  previous_ = t_disabled_message;
  t_disabled_message = std::move(error_message);
}

DisableSavedTensorsHooks::~DisableSavedTensorsHooks() { t_disabled_message = previous_; }

AutogradTls capture_autograd_tls() {
  AutogradTls s;
  s.grad_enabled = is_grad_enabled();
  s.hooks = saved_hooks_stack();
  s.disabled_message = t_disabled_message;
  return s;
}

AutogradTlsGuard::AutogradTlsGuard(const AutogradTls& state) : saved_(capture_autograd_tls()) {
  set_grad_enabled(state.grad_enabled);
  set_saved_hooks_stack(state.hooks);
  t_disabled_message = state.disabled_message;
}

AutogradTlsGuard::~AutogradTlsGuard() {
  set_grad_enabled(saved_.grad_enabled);
  set_saved_hooks_stack(std::move(saved_.hooks));
  t_disabled_message = saved_.disabled_message;
}

}  // namespace graft::autograd
