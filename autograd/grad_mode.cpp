#include "autograd/grad_mode.h"

namespace graft::autograd {

namespace {
thread_local bool t_grad_enabled = true;
// grad mode && !inference mode, kept by set_grad_enabled (invariant 3), so the check every op
// makes is one thread-local read.
thread_local bool t_recording = true;
}  // namespace

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) {
  t_grad_enabled = enabled;
  t_recording = enabled && !is_inference_mode_enabled();
}
bool is_recording_enabled() { return t_recording; }

}  // namespace graft::autograd
