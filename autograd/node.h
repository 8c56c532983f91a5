#pragma once
// Node: one step of the backward graph; Edge: where a node sends each gradient it produces.
//
// Invariants:
// - A node is created once per recorded op and owned by shared_ptrs from the tensors it produced
//   (their grad_fn) and from the edges of later nodes. Edges point backwards only (to the nodes of
//   the op's inputs), so the graph is a DAG and shared ownership never forms a cycle. A node's
//   saved outputs are stored without their grad_fn (see SavedVariable) for the same reason.
// - next_edges()[i] is where the gradient for the op's forward input i goes; an edge with a null
//   function means "no gradient needed for that input".
// - input_metadata(j) describes forward output j (the node's backward input j): the engine checks
//   and, for broadcast shapes, reduces every incoming gradient against it.
// - sequence_nr increases with creation order (per thread); among ready nodes the engine runs the
//   most recently created first, like PyTorch, which keeps memory low on chains.
// - Hooks run in PyTorch's order around apply(): tensor hooks of each output (in registration
//   order, for a leaf its tensor hooks), then retain_grad, then the capture of grad() inputs, then
//   node pre-hooks, apply (for a leaf: accumulation, then post-accumulate-grad hooks), then node
//   post hooks. Tensor hooks see undefined gradients too (an output of a node that ran but got no
//   gradient), as libtorch's C++ pre-hooks do: a hook receives an undefined Tensor and returns
//   undefined to keep it. retain_grad skips undefined gradients.
// - Hooks are owned by the node; a HookHandle only empties the hook's slot, so removing a hook
//   while a backward runs is safe and a handle never keeps a node alive.
#include <any>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/tensor.h"
#include "runtime/tensor_meta.h"

namespace graft::autograd {

using variable_list = std::vector<Tensor>;
class Node;
class SavedVariable;
struct ForwardTrace;

struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool is_valid() const { return function != nullptr; }
};

// A tensor hook as stored on a node: fn(grad) -> replacement grad or undefined to keep it.
// Removal empties `fn` (the shared_ptr lets HookHandle reach it without owning the node).
struct TensorHook {
  std::function<Tensor(const Tensor&)> fn;
};

class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  virtual std::string name() const = 0;
  // Gradients of the forward outputs in, gradients of the forward inputs out (one per next edge).
  virtual variable_list apply(variable_list&& grads) = 0;
  // Frees saved tensors once the node ran and the graph is not kept.
  virtual void release_variables() {}
  // Whether apply() of a multi-output node gets zeros (true) or undefined tensors for outputs that
  // received no gradient.
  virtual bool materialize_grads() const { return true; }
  // The tensors this node saved for backward, in order (graph export, debugging).
  virtual std::vector<const SavedVariable*> saved_variables() const { return {}; }
  // The leaf this node accumulates into when it is a leaf's sink (AccumulateGrad); null for every
  // other node. The engine asks this instead of testing node types: backward(inputs=) accepts only
  // such edges, and accumulate=true runs them where grad() would capture.
  virtual const Tensor* accumulated_leaf() const { return nullptr; }
  // Direct accumulation (see accumulate_grad.h): a rule whose gradient for this node is a fresh
  // product offers to write it into the destination itself. A sink that allows it calls add(dest)
  // and returns true; the default, and any node that must see the gradient as a tensor, declines.
  virtual bool accumulate_directly(const std::function<void(Tensor& dest)>& add) {
    (void)add;
    return false;
  }

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  const Edge& next_edge(size_t i) const { return next_edges_[i]; }
  size_t num_outputs() const { return next_edges_.size(); }

  uint32_t add_input_metadata(const Tensor& t);
  const TensorMeta& input_metadata(size_t i) const { return input_metadata_[i]; }
  size_t num_inputs() const { return input_metadata_.size(); }

  uint64_t sequence_nr() const { return sequence_nr_; }
  // The forward call's stack when the node was created under anomaly mode; null otherwise.
  const std::shared_ptr<const ForwardTrace>& forward_trace() const { return forward_trace_; }

  // Tensor hooks on forward output `output_nr` (registered through Tensor::register_hook).
  std::shared_ptr<TensorHook> add_tensor_pre_hook(uint32_t output_nr, std::function<Tensor(const Tensor&)> fn);
  // retain_grad(): after the tensor hooks, store the gradient of output `output_nr` into `tensor`.
  void add_retains_grad_hook(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor);

  // Node hooks, as torch.autograd.graph.Node.register_hook / register_prehook. grad_inputs are the
  // gradients the node computed for its forward inputs (one per next edge), grad_outputs the ones
  // it received for its forward outputs. A hook that returns a vector replaces them.
  using NodeHook = std::function<std::optional<variable_list>(const variable_list& grad_inputs,
                                                              const variable_list& grad_outputs)>;
  using NodePreHook = std::function<std::optional<variable_list>(const variable_list& grad_outputs)>;
  HookHandle register_hook(NodeHook fn);
  HookHandle register_prehook(NodePreHook fn);

  // Free-form per-node storage for user code (torch's Node.metadata).
  std::unordered_map<std::string, std::any>& metadata() { return metadata_; }

  // Runs tensor hooks and retain-grad hooks on the incoming grads (the engine, also for grad()'s
  // captures). Virtual: a leaf's accumulator runs the leaf's own hooks.
  virtual void run_tensor_pre_hooks(variable_list& grads);
  void run_pre_hooks(variable_list& grads);  // node pre-hooks
  void run_post_hooks(variable_list& grad_inputs, const variable_list& grad_outputs);
  bool has_post_hooks() const { return !post_hooks_.empty(); }
  bool has_node_pre_hooks() const { return !node_pre_hooks_.empty(); }
  virtual bool has_pre_hooks() const { return !pre_hooks_.empty() || !retains_grad_.empty() || !node_pre_hooks_.empty(); }

 protected:
  std::vector<Edge> next_edges_;
  std::vector<TensorMeta> input_metadata_;  // shape/dtype/device of each forward output

 private:
  uint64_t sequence_nr_;
  std::shared_ptr<const ForwardTrace> forward_trace_;
  std::vector<std::pair<uint32_t, std::shared_ptr<TensorHook>>> pre_hooks_;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retains_grad_;
  std::vector<std::shared_ptr<NodePreHook>> node_pre_hooks_;
  std::vector<std::shared_ptr<NodeHook>> post_hooks_;
  std::unordered_map<std::string, std::any> metadata_;
};

}  // namespace graft::autograd
