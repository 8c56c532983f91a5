#pragma once
// Grad mode: whether ops record autograd history. Thread-local, so a NoGradGuard in one thread
// never changes what another thread records; the engine captures the caller's mode into each
// graph task (backward with create_graph runs with grad mode on).
namespace graft::autograd {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);

struct NoGradGuard {
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

struct EnableGradGuard {
  EnableGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev_); }
  EnableGradGuard(const EnableGradGuard&) = delete;
  EnableGradGuard& operator=(const EnableGradGuard&) = delete;

 private:
  bool prev_;
};

struct GradModeGuard {
  explicit GradModeGuard(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~GradModeGuard() { set_grad_enabled(prev_); }
  GradModeGuard(const GradModeGuard&) = delete;
  GradModeGuard& operator=(const GradModeGuard&) = delete;

 private:
  bool prev_;
};

}  // namespace graft::autograd

namespace graft {
using autograd::EnableGradGuard;
using autograd::is_grad_enabled;
using autograd::NoGradGuard;
}  // namespace graft
