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
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

using variable_list = std::vector<Tensor>;
class Node;

struct Edge {
  std::shared_ptr<Node> function;
  uint32_t input_nr = 0;
  bool is_valid() const { return function != nullptr; }
};

// Shape/dtype/device of a forward output, to validate the gradient that flows back into it.
struct InputMetadata {
  Shape shape;
  DType dtype = kFloat32;
  Device device;
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

  const std::vector<Edge>& next_edges() const { return next_edges_; }
  std::vector<Edge>& mutable_next_edges() { return next_edges_; }
  const Edge& next_edge(size_t i) const { return next_edges_[i]; }
  size_t num_outputs() const { return next_edges_.size(); }

  uint32_t add_input_metadata(const Tensor& t);
  const InputMetadata& input_metadata(size_t i) const { return input_metadata_[i]; }
  size_t num_inputs() const { return input_metadata_.size(); }

  uint64_t sequence_nr() const { return sequence_nr_; }

  // Tensor hooks on forward output `output_nr` (registered through Tensor::register_hook).
  std::shared_ptr<TensorHook> add_tensor_pre_hook(uint32_t output_nr, std::function<Tensor(const Tensor&)> fn);
  // retain_grad(): after the pre-hooks, store the gradient of output `output_nr` into `tensor`.
  void add_retains_grad_hook(uint32_t output_nr, std::weak_ptr<TensorImpl> tensor);
  // Post hooks run after apply with (grads of inputs, grads of outputs).
  using PostHook = std::function<void(const variable_list& grad_inputs, const variable_list& grad_outputs)>;
  std::shared_ptr<PostHook> add_post_hook(PostHook fn);

  // Runs pre-hooks and retain-grad hooks on the incoming grads (used by the engine).
  void run_pre_hooks(variable_list& grads);
  void run_post_hooks(const variable_list& grad_inputs, const variable_list& grad_outputs);
  bool has_post_hooks() const { return !post_hooks_.empty(); }
  bool has_pre_hooks() const { return !pre_hooks_.empty() || !retains_grad_.empty(); }

 protected:
  std::vector<Edge> next_edges_;
  std::vector<InputMetadata> input_metadata_;

 private:
  uint64_t sequence_nr_;
  std::vector<std::pair<uint32_t, std::shared_ptr<TensorHook>>> pre_hooks_;
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retains_grad_;
  std::vector<std::shared_ptr<PostHook>> post_hooks_;
};

}  // namespace graft::autograd
