#pragma once
// The engine: runs the backward graph of one backward()/grad() call as a GraphTask.
//
// Invariants:
// - Everything a backward needs lives in its GraphTask (dependency counts, input buffers,
//   exec_info, captured grads), so backwards on different threads never share mutable state and
//   need no global lock. Nodes are shared only when graphs are; a node's hooks and saved variables
//   are read, not written, during a run, except release after the node ran without keep_graph.
// - A node runs once all its inputs arrived (its dependency count reached 0), in the calling thread,
//   most recent node first among the ready ones.
// - With exec_info non-empty (grad(), or backward with inputs=), only nodes on a path to a requested
//   input run; gradients for requested inputs are captured where they enter those inputs.
// - current_graph_task_id() identifies the task while its nodes and hooks run (-1 outside); nested
//   backwards (a backward inside a hook or a checkpoint's recomputation) get their own id and
//   restore the outer one when they finish.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

#include "autograd/node.h"

namespace graft::autograd {

struct GraphTask;

// Runs the graph from `roots` with `root_grads`. `outputs` (may be empty) are edges whose
// gradients are captured and returned; when `accumulate_grad` is false, leaves listed in `outputs`
// are captured instead of accumulated.
variable_list run_backward(const std::vector<Edge>& roots, variable_list root_grads, bool keep_graph,
                           bool create_graph, const std::vector<Edge>& outputs, bool accumulate_grad);

void backward(const std::vector<Tensor>& tensors, const std::vector<Tensor>& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<Tensor>& inputs = {});
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);

// Where a gradient for a tensor enters the graph: (grad_fn, output_nr) for a non-leaf, (the leaf's
// AccumulateGrad, 0) for a leaf. It names a value rather than a tensor, so grad() with edges gives
// the gradient with respect to a tensor's value before an in-place op rebased its history.
struct GradientEdge {
  std::shared_ptr<Node> node;
  uint32_t output_nr = 0;
};
GradientEdge get_gradient_edge(const Tensor& t);
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<GradientEdge>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, std::optional<bool> retain_graph = std::nullopt,
                         bool create_graph = false, bool allow_unused = false);
// backward from gradient edges (torch.autograd.backward with GradientEdge outputs): one gradient per
// root edge, shaped like that node's output. `inputs` edges restrict the backward to them; they
// must be leaves' accumulators (a non-leaf edge names no tensor whose .grad could receive it: use
// grad() for those).
void backward(const std::vector<GradientEdge>& roots, const std::vector<Tensor>& grad_tensors,
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
              const std::vector<GradientEdge>& inputs = {});
// Bumps the version counter of each tensor, as an in-place op would (for code that writes a
// tensor's memory outside graft's ops).
void increment_version(const std::vector<Tensor>& tensors);

int64_t current_graph_task_id();

// While alive, each backward()/grad() this thread starts (not the ones nested inside those) takes
// the gradient of a requested input whose node it does not otherwise run as it arrives, without
// running that input's tensor hooks. For a node that hands such gradients on through its own edges
// (autograd/checkpoint_rows.h: one inner grad() per slice of the batch): the hooks then run once,
// on what its consumer receives, and not once more per inner backward.
class CaptureBeforeHooksGuard {
 public:
  CaptureBeforeHooksGuard();
  ~CaptureBeforeHooksGuard();
  CaptureBeforeHooksGuard(const CaptureBeforeHooksGuard&) = delete;
  CaptureBeforeHooksGuard& operator=(const CaptureBeforeHooksGuard&) = delete;

 private:
  bool prev_;
};
// Runs `fn` when the graph task running on this thread has run its last node (torch's
// Variable._execution_engine.queue_callback): callbacks run in the order queued, on the task's
// thread, still inside the task (current_graph_task_id() is its id, grad mode is create_graph's),
// and a callback may queue more. A task that throws runs none of them. Outside a backward it throws.
void queue_callback(std::function<void()> fn);
bool will_engine_execute_node(const std::shared_ptr<Node>& node);
// Makes will_engine_execute_node(node) true for the rest of the running task, without scheduling
// the node. CopySlices uses it: the in-place op's node it runs has the view's old history as its
// first edge, which the task never visits, but the op's rule must still compute that gradient
// whenever the base's gradient is wanted.
void mark_node_needed(const std::shared_ptr<Node>& node);
// True when the task running on this thread will run `sink` with the gradient it receives: the
// node is on a requested path (or every node runs) and no gradient is captured there.
bool task_runs_without_capture(Node* sink);
// The graph task running on this thread (null outside a backward); for graph features.
GraphTask* current_graph_task();
// True when the task was given no `inputs` (a plain backward()): every node reachable from its
// roots runs, so a rule needs the gradient of each valid edge without asking per edge.
bool runs_every_reachable_node(const GraphTask* task);
// True when the task keeps its graph (retain_graph): a node holding graphs of its own
// (checkpoint_rows without recomputation) then keeps them for the next backward too.
bool keeps_graph(const GraphTask* task);
// Per-task state of a graph feature (multi-grad hooks, checkpoint), keyed by an owner pointer: it
// lives exactly as long as the task, so nothing of one backward leaks into the next.
struct GraphTaskState {
  virtual ~GraphTaskState() = default;
};
std::unique_ptr<GraphTaskState>& graph_task_slot(GraphTask* task, const void* owner);
// The owner's state of type T in `task`, made on first use. One owner keeps one type.
template <class T>
T& graph_task_state(GraphTask* task, const void* owner) {
  static_assert(std::is_base_of_v<GraphTaskState, T>);
  std::unique_ptr<GraphTaskState>& slot = graph_task_slot(task, owner);
  if (!slot) slot = std::make_unique<T>();
  T* state = dynamic_cast<T*>(slot.get());
  GRAFT_CHECK(state != nullptr, "graph task: internal error: one owner's state has two types");
  return *state;
}

}  // namespace graft::autograd
