#include "autograd/grad_mode.h"

namespace graft::autograd {

namespace {
thread_local bool t_grad_enabled = true;
}

bool is_grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool enabled) { t_grad_enabled = enabled; }
bool is_recording_enabled() { return t_grad_enabled && !is_inference_mode_enabled(); }

}  // namespace graft::autograd
