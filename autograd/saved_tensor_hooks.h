#pragma once
// Saved-tensor hooks (graph.h in the reference): pack/unpack pairs applied to every tensor an op
// saves for backward, SaveOnCpu, and a scope that forbids hooks.
//
// The hook stack is thread-local. The innermost pair alive when a tensor is saved packs it, and
// the unpack hook of that same pair runs whenever backward needs the tensor, whatever hooks are
// alive then (the pair is captured inside the SavedVariable).
//
// Threads: a thread the engine or the user starts does NOT inherit the stack. Code that wants the
// caller's hooks in another thread captures them with capture_autograd_tls() and installs them
// there with AutogradTlsGuard. Each graph task captures the state of the thread that started the
// backward and runs its nodes under it, so tensors saved during a create_graph backward see the
// hooks of the backward's caller.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "autograd/saved_variable.h"

namespace graft::autograd {

class SavedTensorsHooks {
 public:
  SavedTensorsHooks(PackHook pack, UnpackHook unpack);
  // For graph features built on hooks. `check_unpacked_metadata = false` skips the engine's
  // shape/dtype/device check on the unpack result (checkpoint checks it itself); `kind` names
  // the feature in graph exports ("checkpoint", "save_on_cpu"). `prefetchable` lets the engine run
  // `unpack` ahead of time on its prefetch thread (unpack_prefetch.h): say so only when unpack is a
  // pure, thread-safe function of the packed value.
  SavedTensorsHooks(PackHook pack, UnpackHook unpack, bool check_unpacked_metadata, std::string kind,
                    bool prefetchable = false);
  virtual ~SavedTensorsHooks();
  SavedTensorsHooks(const SavedTensorsHooks&) = delete;
  SavedTensorsHooks& operator=(const SavedTensorsHooks&) = delete;
};

// Saves tensors on the CPU: a CUDA tensor is packed as (device, host copy), pinned when asked, and
// copied back (non_blocking when pinned) on unpack. A CPU tensor is kept as it is, with no copy.
class SaveOnCpu : public SavedTensorsHooks {
 public:
  explicit SaveOnCpu(bool pin_memory = false);
};

// While alive, constructing any SavedTensorsHooks throws graft::Error(error_message). Constructing
// it while hooks are active throws as well. Nested scopes keep the innermost message and restore
// the outer one on exit.
class DisableSavedTensorsHooks {
 public:
  explicit DisableSavedTensorsHooks(std::string error_message);
  ~DisableSavedTensorsHooks();
  DisableSavedTensorsHooks(const DisableSavedTensorsHooks&) = delete;
  DisableSavedTensorsHooks& operator=(const DisableSavedTensorsHooks&) = delete;

 private:
  std::optional<std::string> previous_;
};

// The thread-local autograd state a graph task (or a user thread) carries: grad mode, the saved
// tensor hook stack and the disabled-hooks message.
struct AutogradTls {
  bool grad_enabled = true;
  std::vector<SavedHooksPair> hooks;
  std::optional<std::string> disabled_message;
};
AutogradTls capture_autograd_tls();
// Installs a captured state for the guard's lifetime, restoring the thread's own on exit.
class AutogradTlsGuard {
 public:
  explicit AutogradTlsGuard(const AutogradTls& state);
  ~AutogradTlsGuard();
  AutogradTlsGuard(const AutogradTlsGuard&) = delete;
  AutogradTlsGuard& operator=(const AutogradTlsGuard&) = delete;

 private:
  AutogradTls saved_;
};

}  // namespace graft::autograd
