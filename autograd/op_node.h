#pragma once
// OpNode: the backward node of a built-in op. One class for every op: the op's derivative is a
// plain function (a row of the table in derivatives*.cpp), and what it needs from the forward is
// kept in `saved` (tensors, through SavedVariable) and a few plain fields.
#include <string>
#include <vector>

#include "autograd/node.h"
#include "autograd/saved_variable.h"

namespace graft::autograd {

class OpNode;
// grads: gradients of the op's outputs (all defined). Returns one gradient per op input (undefined
// where !n.needs(i)).
using BackwardFn = variable_list (*)(OpNode& n, const variable_list& grads);

struct InputInfo {
  Shape shape;
  DType dtype = kFloat32;
  Device device;
};

class OpNode final : public Node {
 public:
  OpNode(const char* name, BackwardFn fn) : name_(name), fn_(fn) {}
  std::string name() const override { return name_; }
  variable_list apply(variable_list&& grads) override { return fn_(*this, grads); }
  void release_variables() override;
  std::vector<const SavedVariable*> saved_variables() const override {
    std::vector<const SavedVariable*> out;
    for (const auto& s : saved_) out.push_back(&s);
    return out;
  }

  // In a rule: whether the gradient of forward input i is wanted by the running backward.
  bool needs(size_t i) const;
  // At record time: whether forward input i takes part in autograd at all.
  bool has_edge(size_t i) const { return i < next_edges_.size() && next_edges_[i].is_valid(); }
  // Saved tensors, in the order they were saved.
  Tensor saved_tensor(size_t i);
  void save(const Tensor& t, bool is_output = false) { saved_.emplace_back(t, is_output, this); }

  std::vector<InputInfo> inputs;  // shape/dtype/device of each forward input
  Shape ints;                      // op arguments the derivative needs (dims, sizes, ...)
  Shape ints2;
  double real = 0, real2 = 0;
  std::string str;
  bool flag = false;

 private:
  const char* name_;
  BackwardFn fn_;
  std::vector<SavedVariable> saved_;
};

// Creates the node when grad mode is on and any input requires grad; null otherwise (the op then
// records nothing). Edges follow the order of `inputs`.
std::shared_ptr<OpNode> record_op(const char* name, BackwardFn fn, std::initializer_list<const Tensor*> inputs);
std::shared_ptr<OpNode> record_op(const char* name, BackwardFn fn, const std::vector<Tensor>& inputs);
// Makes `out` an output of `node` (out-of-place ops).
void set_output(const std::shared_ptr<OpNode>& node, const Tensor& out);
// In-place ops: checks before the kernel runs that `self` may be written.
void check_inplace(const Tensor& self, const char* op);

}  // namespace graft::autograd
