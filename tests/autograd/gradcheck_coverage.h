#pragma once
// What the gradcheck suites actually differentiate, collected from the dispatcher.
//
// GRADCHECK / GRADGRADCHECK run their check under a GradcheckRecorder, which notes every op
// dispatched with grad mode on and a tensor argument that requires grad: the ops of the function
// being differentiated (and, in gradgradcheck, of its backward). gradcheck's own bookkeeping (its
// finite-difference perturbations run under no_grad, its one-hot grad_outputs require no grad)
// does not count. test_gradcheck_coverage.cpp, linked last into the same executable, compares the
// set with the op registry.
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "graft.h"
#include "support/stack_args.h"

namespace graft::test {

inline std::set<std::string>& gradchecked_ops() {
  static std::set<std::string> ops;
  return ops;
}
inline int& gradcheck_calls() {
  static int n = 0;
  return n;
}

class GradcheckRecorder final : public DispatchMode {
 public:
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (autograd::is_grad_enabled() && any_tensor_arg(args, [](const Tensor& t) { return t.requires_grad(); }))
      gradchecked_ops().insert(op.schema.full_name());
    return next(args);
  }
};

// Runs `check` (a gradcheck call) with the recorder on the dispatch-mode stack.
template <class F>
bool recorded_check(F&& check) {
  ++gradcheck_calls();
  GradcheckRecorder rec;
  DispatchModeGuard guard(&rec);
  return check();
}

}  // namespace graft::test

// Runs gradcheck with a name in the failure message; the ops it differentiates count as covered.
#define GRADCHECK(what, ...)                                                                 \
  do {                                                                                       \
    INFO(what);                                                                              \
    CHECK(::graft::test::recorded_check([&] { return gradcheck(__VA_ARGS__); }));            \
  } while (0)
#define GRADGRADCHECK(what, ...)                                                             \
  do {                                                                                       \
    INFO(what);                                                                              \
    CHECK(::graft::test::recorded_check([&] { return gradgradcheck(__VA_ARGS__); }));        \
  } while (0)
