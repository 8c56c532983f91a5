// autograd::to_dot: the backward graph as Graphviz DOT, with saved tensors and leaf names.
#include <catch2/catch.hpp>

#include <string>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {
size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}
}  // namespace

TEST_CASE("to_dot shows nodes, saved tensors with bytes, and named leaves") {
  Tensor x = randn({4, 8});
  Tensor w = randn({8, 3}).requires_grad_(), b = zeros({3}).requires_grad_();
  Tensor y = (x.matmul(w) + b).tanh().sum();
  std::string dot = to_dot({y}, {{"fc.weight", w}, {"fc.bias", b}});
  INFO(dot);
  CHECK(dot.rfind("digraph graft_backward {", 0) == 0);
  CHECK_THAT(dot, Catch::Contains("SumBackward") && Catch::Contains("TanhBackward") && Catch::Contains("AddBackward"));
  CHECK_THAT(dot, Catch::Contains("fc.weight [8, 3] float32") && Catch::Contains("fc.bias [3] float32"));
  CHECK_THAT(dot, Catch::Contains("[4, 3] float32 48 B (saved)"));  // tanh's output
  CHECK_THAT(dot, Catch::Contains("[4, 8] float32 128 B (saved)"));  // x, saved by the matmul for w's gradient
  CHECK(count(dot, "AccumulateGrad") == 2);
  CHECK(dot.back() == '\n');
  y.backward();
  CHECK_THAT(to_dot({y}), Catch::Contains("(freed)"));
}

TEST_CASE("to_dot marks checkpointed and SaveOnCpu tensors and never recomputes") {
  Tensor x = randn({2, 4}).requires_grad_();
  int calls = 0;
  Tensor h = checkpoint([&](const Tensor& in) {
    ++calls;
    return in.exp().sin();
  }, x);
  Tensor out;
  {
    SaveOnCpu keep;
    out = (h * h).sum();
  }
  std::string dot = to_dot({out});
  INFO(dot);
  CHECK(calls == 1);
  CHECK(count(dot, "(checkpointed)") == 2);                // exp's output and sin's input
  CHECK(count(dot, "(save_on_cpu, kept on cpu)") == 2);    // both operands of h * h
  CHECK_THAT(dot, Catch::Contains("leaf [2, 4] float32"));  // an unnamed leaf
  out.backward();
  CHECK(calls == 2);  // the backward recomputed once; the export did not
}

TEST_CASE("to_dot rejects an undefined root") {
  CHECK_THROWS_WITH(to_dot({Tensor()}), Catch::Contains("to_dot: root 0 is undefined"));
}
