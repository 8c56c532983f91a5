#pragma once
// Tensor printing in PyTorch's format. The autograd layer appends its own suffix
// (requires_grad=True / grad_fn=<...>) through set_print_suffix_hook, since ops/ cannot know it.
#include <string>

#include "runtime/tensor.h"

namespace graft {

using PrintSuffixHook = std::string (*)(const Tensor&);
void set_print_suffix_hook(PrintSuffixHook hook);

}  // namespace graft
