#pragma once
// Grad mode and InferenceMode: whether ops record autograd history. Thread-local, so a NoGradGuard
// in one thread never changes what another thread records; the engine captures the caller's mode
// into each graph task (backward with create_graph runs with grad mode on).
//
// Invariants:
// 1. An op records history (a node, saved tensors, a view's link to its base, a rebased history
//    after an in-place write) only when is_recording_enabled(): grad mode on and not inside an
//    enabled InferenceMode. Every recording decision reads it, never is_grad_enabled() alone.
// 2. is_grad_enabled() is the grad-mode flag as libtorch's GradMode::is_enabled(): InferenceMode
//    turns it off, and an EnableGradGuard inside InferenceMode turns it back on. Ops still record
//    nothing there, because libtorch's InferenceMode excludes the autograd dispatch keys whatever
//    grad mode says (invariant 1).
// 3. is_recording_enabled() is one flag, recomputed by set_grad_enabled from both modes. That holds
//    because the inference flag changes only inside InferenceMode, which calls set_grad_enabled
//    after each change (entering and leaving), so the two never disagree when an op runs.
#include "runtime/storage.h"

namespace graft::autograd {

bool is_grad_enabled();
void set_grad_enabled(bool enabled);
// Whether an op run now records autograd history (invariant 1).
bool is_recording_enabled();

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

// InferenceMode (c10::InferenceMode): grad mode off, nothing recorded even where grad mode is turned
// back on (invariant 1), and every tensor allocated inside is an inference tensor: no autograd
// metadata, no version counter. Outside the scope such a tensor can be read by any op, but an
// in-place write to it, requires_grad_(true), or saving it for backward (any op recording a graph
// that needs it) throws. InferenceMode(false) turns both off inside an enabled scope (grad mode
// on), as libtorch's.
class InferenceMode {
 public:
  explicit InferenceMode(bool enabled = true) : prev_grad_(is_grad_enabled()), prev_inference_(is_inference_mode_enabled()) {
    set_inference_mode_enabled(enabled);
    set_grad_enabled(!enabled);
  }
  ~InferenceMode() {
    set_inference_mode_enabled(prev_inference_);
    set_grad_enabled(prev_grad_);
  }
  InferenceMode(const InferenceMode&) = delete;
  InferenceMode& operator=(const InferenceMode&) = delete;

 private:
  bool prev_grad_, prev_inference_;
};

}  // namespace graft::autograd

namespace graft {
using autograd::InferenceMode;
using autograd::EnableGradGuard;
using autograd::is_grad_enabled;
using autograd::NoGradGuard;
}  // namespace graft
