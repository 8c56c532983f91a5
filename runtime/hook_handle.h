#pragma once
// HookHandle: removes a registered hook. remove() is idempotent, and destroying a handle does not
// remove the hook (as torch's RemovableHandle), so `t.register_hook(f);` keeps f registered.
#include <functional>
#include <memory>

namespace graft {

class HookHandle {
 public:
  HookHandle() = default;
  explicit HookHandle(std::function<void()> remover)
      : state_(std::make_shared<std::function<void()>>(std::move(remover))) {}
  void remove() {
    if (state_ && *state_) {
      auto f = std::move(*state_);
      *state_ = nullptr;
      f();
    }
  }

 private:
  std::shared_ptr<std::function<void()>> state_;
};

}  // namespace graft
