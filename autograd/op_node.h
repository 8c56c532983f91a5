#pragma once
// OpNode: the backward node of a built-in op. One node type for every op: the op's derivative is a
// plain function (a rule in functional_*.cpp), and what the rule needs from the forward is a small
// struct of its own (`Saved`), so a rule reads `s.dim` or `n.unpack(s.weight)`, never a positional
// slot.
//
// Invariants:
// 1. Every tensor a rule keeps is a SavedVariable member of its Saved struct, stored there by
//    OpNode::save, which also lists it in saved_. So release_variables(), saved_variables() (graph
//    export, hooks) and the "backward twice" error see exactly the tensors the rule can read.
// 2. The Saved struct is a member of RuleNode<Saved>, which lives in one heap block from
//    make_shared until the node dies and is never moved, so the pointers in saved_ stay valid for
//    the node's whole life.
// 3. inputs[i] is the metadata of forward input i and next_edges()[i] its edge: both follow the
//    order the op passed its inputs to record_op (undefined inputs keep their slot, with no edge).
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/saved_variable.h"

namespace graft::autograd {

class OpNode : public Node {
 public:
  std::string name() const override { return name_; }
  void release_variables() override;
  std::vector<const SavedVariable*> saved_variables() const override {
    return std::vector<const SavedVariable*>(saved_.begin(), saved_.end());
  }

  // In a rule: whether the gradient of forward input i is wanted by the running backward.
  bool needs(size_t i) const;
  // At record time: whether forward input i takes part in autograd at all.
  bool has_edge(size_t i) const { return i < next_edges_.size() && next_edges_[i].is_valid(); }
  // At record time: keeps `t` in `slot`, a SavedVariable member of this node's Saved struct.
  // is_output: `t` is an output of this node (kept without a strong self-reference). tolerance:
  // what the rule needs of the values (SaveTolerance; `compress:` in the op's declaration).
  void save(SavedVariable& slot, const Tensor& t, bool is_output = false,
            SaveTolerance tolerance = SaveTolerance::kExact);
  // In a rule: the tensor kept in `slot`, with its history re-attached under create_graph.
  Tensor unpack(const SavedVariable& slot);

  std::vector<TensorMeta> inputs;  // shape/dtype/device of each forward input

 protected:
  explicit OpNode(const char* name) : name_(name) {}

 private:
  const char* name_;
  std::vector<SavedVariable*> saved_;
};

// A rule: gradients of the op's outputs (all defined) -> one gradient per op input (undefined where
// !n.needs(i)). `s` is what the forward saved for it.
template <class Saved>
using Rule = variable_list (*)(OpNode& n, Saved& s, const variable_list& grads);

template <class Saved>
class RuleNode final : public OpNode {
 public:
  RuleNode(const char* name, Rule<Saved> rule) : OpNode(name), rule_(rule) {}
  variable_list apply(variable_list&& grads) override { return rule_(*this, saved, grads); }

  Saved saved;

 private:
  Rule<Saved> rule_;
};

// The Saved struct of rules that need nothing from the forward.
struct NoSaved {};

namespace detail {
// Whether grad mode is on and any of the inputs requires grad (otherwise an op records nothing).
bool should_record(const Tensor* const* inputs, size_t n);
bool should_record(const std::vector<Tensor>& inputs);
// Sets the node's edges and input metadata, in input order.
void attach_inputs(OpNode& node, const Tensor* const* inputs, size_t n);
void attach_inputs(OpNode& node, const std::vector<Tensor>& inputs);
}  // namespace detail

// Creates the node when grad mode is on and any input requires grad; null otherwise (the op then
// records nothing). Edges follow the order of `inputs`.
template <class Saved>
std::shared_ptr<RuleNode<Saved>> record_op(const char* name, Rule<Saved> rule,
                                           std::initializer_list<const Tensor*> inputs) {
  if (!detail::should_record(inputs.begin(), inputs.size())) return nullptr;
  auto node = std::make_shared<RuleNode<Saved>>(name, rule);
  detail::attach_inputs(*node, inputs.begin(), inputs.size());
  return node;
}
template <class Saved>
std::shared_ptr<RuleNode<Saved>> record_op(const char* name, Rule<Saved> rule, const std::vector<Tensor>& inputs) {
  if (!detail::should_record(inputs)) return nullptr;
  auto node = std::make_shared<RuleNode<Saved>>(name, rule);
  detail::attach_inputs(*node, inputs);
  return node;
}

// Makes `out` an output of `node` (out-of-place ops).
void set_output(const std::shared_ptr<Node>& node, const Tensor& out);
// In-place ops: checks before the kernel runs that `self` may be written.
void check_inplace(const Tensor& self, const char* op);

}  // namespace graft::autograd
