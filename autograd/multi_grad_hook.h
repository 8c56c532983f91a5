#pragma once
// register_multi_grad_hook: one callback over the gradients of several tensors, per graph task.
//
// All: fn runs once per graph task, after every tensor whose gradient the engine will compute in
//      that task has received it; the others are passed as undefined tensors. Which tensors count
//      is decided per task from will_engine_execute_node, and the bookkeeping lives in the graph
//      task itself (not in the hook object), so concurrent backwards on several threads and a
//      backward nested inside another's hook each get their own count. It is freed with the task,
//      also when some gradients never arrive.
// Any: fn runs once per graph task, with the first gradient that arrives (a 1-element vector).
#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

enum class MultiGradMode { All, Any };

HookHandle register_multi_grad_hook(const std::vector<Tensor>& tensors,
                                    std::function<void(const std::vector<Tensor>& grads)> fn,
                                    MultiGradMode mode = MultiGradMode::All);

}  // namespace graft::autograd
