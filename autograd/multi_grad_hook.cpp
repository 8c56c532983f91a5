#include "autograd/multi_grad_hook.h"

#include <memory>
#include <mutex>

#include "autograd/accumulate_grad.h"
#include "autograd/autograd_meta.h"
#include "autograd/engine.h"

namespace graft::autograd {

namespace {

// Shared by the per-tensor hooks of one registration; immutable after construction.
struct Registration {
  std::function<void(const std::vector<Tensor>&)> fn;
  MultiGradMode mode;
  // Per tensor: its grad_fn (non-leaves) or the leaf itself, whose accumulator is looked up per task
  // (the graph owns accumulators). Both weak: the hooks live on these nodes, so strong references
  // here would form a cycle.
  std::vector<std::weak_ptr<Node>> grad_fns;
  std::vector<std::weak_ptr<TensorImpl>> leaves;
  std::vector<bool> tracked;

  std::shared_ptr<Node> node(size_t i) const {
    if (!tracked[i]) return nullptr;
    if (auto fn = grad_fns[i].lock()) return fn;
    if (auto impl = leaves[i].lock()) return grad_accumulator(Tensor(impl));
    return nullptr;
  }
};

// The per-graph-task state, kept in the task's slot for this registration.
struct TaskState final : GraphTaskState {
  std::mutex mu;
  bool initialised = false, fired = false;
  size_t expected = 0, arrived = 0;
  std::vector<Tensor> grads;
  std::vector<bool> seen;  // a tensor that got no gradient from a node that ran arrives undefined
};

void on_grad(const std::shared_ptr<Registration>& reg, size_t index, const Tensor& grad) {
  GraphTask* task = current_graph_task();
  if (!task) return;
  TaskState* st = &graph_task_state<TaskState>(task, reg.get());
  std::vector<Tensor> call;
  {
    std::lock_guard<std::mutex> lock(st->mu);
    if (st->fired) return;
    if (reg->mode == MultiGradMode::Any) {
      st->fired = true;
      call = {grad};
    } else {
      if (!st->initialised) {
        st->initialised = true;
        st->grads.resize(reg->tracked.size());
        st->seen.assign(reg->tracked.size(), false);
        for (size_t i = 0; i < reg->tracked.size(); ++i) {
          auto n = reg->node(i);
          st->expected += n && will_engine_execute_node(n) ? 1 : 0;
        }
      }
      if (!st->seen[index]) ++st->arrived;
      st->seen[index] = true;
      st->grads[index] = grad;
      if (st->arrived < st->expected) return;
      st->fired = true;
      call = st->grads;
    }
  }
  reg->fn(call);
}

}  // namespace

HookHandle register_multi_grad_hook(const std::vector<Tensor>& tensors,
                                    std::function<void(const std::vector<Tensor>& grads)> fn, MultiGradMode mode) {
  GRAFT_CHECK(fn != nullptr, "register_multi_grad_hook: the hook function is empty");
  auto reg = std::make_shared<Registration>();
  reg->fn = std::move(fn);
  reg->mode = mode;
  std::vector<HookHandle> handles;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    bool rg = t.defined() && t.requires_grad();
    GRAFT_CHECK(rg || mode == MultiGradMode::Any, "register_multi_grad_hook: tensor ", i, " (", describe(t),
                ") does not require grad; in All mode every tensor must require grad");
    reg->tracked.push_back(rg);
    auto fn_node = rg ? grad_fn_of(t) : nullptr;
    reg->grad_fns.push_back(fn_node);
    reg->leaves.push_back(rg && !fn_node ? std::weak_ptr<TensorImpl>(t.impl_ptr()) : std::weak_ptr<TensorImpl>());
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (!reg->tracked[i]) continue;
    handles.push_back(tensors[i].register_hook([reg, i](const Tensor& g) {
      on_grad(reg, i, g);
      return Tensor();
    }));
  }
  return HookHandle([handles]() mutable {
    for (auto& h : handles) h.remove();
  });
}

}  // namespace graft::autograd
