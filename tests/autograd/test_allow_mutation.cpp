// AllowMutationOnSavedTensors (API.md "graph features"): in-place writes to saved tensors (or any
// alias of them) clone the saved value first, so backward sees the value at save time.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {

const int64_t kN = 6;

Tensor leaf() { return (arange(static_cast<double>(kN), dtype(kFloat64)) * 0.25 + 0.5).requires_grad_(); }
std::vector<double> vals(const Tensor& t) { return t.to_vector<double>(); }
int64_t cpu_allocated() { return memory_stats(kCPU).allocated_bytes; }

// Counts the clone ops that reach it. Installed before AllowMutationOnSavedTensors, it sits below
// that mode and sees the clones the mode issues.
struct CloneCounter final : DispatchMode {
  int clones = 0;
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (op.name() == "clone") ++clones;
    return next(args);
  }
};

// Runs `forward` (which builds a loss from a tensor b computed from the leaf a), then `mutate(b)`,
// then backward, and returns a.grad. With `allow`, everything runs inside the scope and the
// mutation hits the saved tensor; without, the mutation hits a hand-made clone instead, which is
// the value-at-save-time semantics the scope must reproduce.
using Forward = std::function<Tensor(const Tensor& b)>;
using Mutate = std::function<void(Tensor& b)>;
std::vector<double> grad_of(bool allow, const Forward& forward, const Mutate& mutate) {
  Tensor a = leaf();
  if (allow) {
    AllowMutationOnSavedTensors scope;
    Tensor b = a * 1;
    Tensor loss = forward(b);
    mutate(b);
    loss.backward();
  } else {
    Tensor b = a * 1;
    Tensor loss = forward(b);
    Tensor by_hand = b.clone();
    mutate(by_hand);
    loss.backward();
  }
  return vals(a.grad());
}

void check_same_as_cloned_by_hand(const Forward& forward, const Mutate& mutate) {
  auto expected = grad_of(false, forward, mutate);
  auto got = grad_of(true, forward, mutate);
  CHECK(got == expected);
}

// Saves a tensor that is not one of its inputs (passed as a non-tensor argument), so the saved
// tensor's history is referenced by nothing in this node but the saved tensor itself.
struct SaveExtra : Function<SaveExtra> {
  static Tensor forward(FunctionCtx* ctx, const Tensor& x, std::vector<Tensor> extra) {
    ctx->save_for_backward({extra[0]});
    return x * 1;
  }
  static std::vector<Tensor> backward(FunctionCtx* ctx, std::vector<Tensor> g) {
    return {g[0] * ctx->saved_tensors()[0], Tensor()};
  }
};

}  // namespace

TEST_CASE("the reference example: b.sin_() after (b**2).sum() is allowed inside the scope") {
  AllowMutationOnSavedTensors scope;
  Tensor a = ones({2, 3}, dtype(kFloat64).requires_grad());
  Tensor b = a.clone();
  Tensor out = (b * b).sum();
  b.sin_();
  CHECK(b.grad_fn()->name() == "SinBackward");
  out.sum().backward();
  CHECK(vals(a.grad()) == std::vector<double>(6, 2.0));  // 2 * b at save time (1), not 2 * sin(1)
  CHECK(vals(b)[0] == Approx(std::sin(1.0)));
}

TEST_CASE("without the scope the same write is the usual version error") {
  Tensor a = leaf();
  Tensor b = a * 1;
  Tensor out = (b * b).sum();
  b.sin_();
  CHECK_THROWS_WITH(out.backward(), Catch::Contains("modified by an inplace operation"));
}

TEST_CASE("in-place writes give the gradient of the value at save time") {
  Forward square = [](const Tensor& b) { return (b * b).sum(); };
  Forward sin_of = [](const Tensor& b) { return b.sin().sum(); };
  Forward exp_out = [](const Tensor& b) { return b.exp().sum(); };  // saves its output
  SECTION("direct in-place ops, with grad mode on and off") {
    check_same_as_cloned_by_hand(square, [](Tensor& b) { b.mul_(3); });
    check_same_as_cloned_by_hand(sin_of, [](Tensor& b) { b.add_(1.5); });
    check_same_as_cloned_by_hand(square, [](Tensor& b) {
      NoGradGuard ng;
      b.exp_();
    });
  }
  SECTION("a saved output written in place") {
    AllowMutationOnSavedTensors scope;
    Tensor a = leaf();
    Tensor e = (a * 1).exp();
    Tensor loss = e.sum();
    e.mul_(0);
    loss.backward();
    CHECK(vals(a.grad()) == vals(a.detach().exp()));
  }
  SECTION("through a view of the saved tensor") {
    check_same_as_cloned_by_hand(square, [](Tensor& b) { b.select(0, 1).mul_(10); });
    check_same_as_cloned_by_hand(sin_of, [](Tensor& b) { b.slice(0, 0, 4, 2).fill_(-1); });
    check_same_as_cloned_by_hand(exp_out, [](Tensor& b) {
      NoGradGuard ng;
      b.view({2, 3}).transpose(0, 1).zero_();
    });
  }
  SECTION("the saved tensor is a view and the base is written") {
    AllowMutationOnSavedTensors scope;
    Tensor a = leaf();
    Tensor base = a * 1;
    Tensor v = base.slice(0, 1, 4);
    Tensor loss = (v * v).sum();
    base.fill_(100);
    loss.backward();
    CHECK(vals(a.grad()) == std::vector<double>{0, 2 * 0.75, 2 * 1.0, 2 * 1.25, 0, 0});
  }
  SECTION("through copy_") {
    check_same_as_cloned_by_hand(square, [](Tensor& b) { b.copy_(zeros({kN}, dtype(kFloat64))); });
    check_same_as_cloned_by_hand(sin_of, [](Tensor& b) {
      NoGradGuard ng;
      b.copy_(ones({kN}, dtype(kFloat32)));  // cross-dtype copy
    });
  }
  SECTION("through clamp_, normal_ and addcmul_") {
    check_same_as_cloned_by_hand(square, [](Tensor& b) { b.clamp_(1.0, 1.5); });
    check_same_as_cloned_by_hand(sin_of, [](Tensor& b) {
      manual_seed(1);
      b.normal_();
    });
    check_same_as_cloned_by_hand(square, [](Tensor& b) {
      NoGradGuard ng;
      ops::addcmul_(b, b, b, 0.5);  // the op library directly: no autograd wrapper involved
    });
  }
}

TEST_CASE("a saved tensor that does not require grad is protected too") {
  AllowMutationOnSavedTensors scope;
  Tensor a = leaf();
  Tensor w = full({kN}, 2.0, dtype(kFloat64));
  Tensor loss = (a * w).sum();  // saves w for a's gradient
  ops::addcmul_(w, w, w, 1.0);
  ops::clamp_(w, 0.0, 1.0);
  loss.backward();
  CHECK(vals(a.grad()) == std::vector<double>(kN, 2.0));
}

TEST_CASE("a tensor freed by backward before the write is not cloned") {
  CloneCounter counter;
  DispatchModeGuard counting(&counter);
  AllowMutationOnSavedTensors scope;
  const int64_t n = 1 << 14;
  Tensor a = ones({n}, dtype(kFloat64).requires_grad());
  Tensor b = a * 1;
  Tensor out = (b * b).sum();
  out.backward();  // frees the graph and what it saved
  int clones = counter.clones;
  int64_t before = cpu_allocated();
  {
    NoGradGuard ng;
    b.sin_();
  }
  CHECK(counter.clones == clones);
  CHECK(cpu_allocated() == before);

  // Control: the same write while the graph is alive does clone.
  Tensor c = a * 1;
  Tensor out2 = (c * c).sum();
  out2.backward({}, /*retain_graph=*/true);
  clones = counter.clones;
  before = cpu_allocated();
  {
    NoGradGuard ng;
    c.sin_();
  }
  CHECK(counter.clones > clones);
  CHECK(cpu_allocated() - before >= n * 8);
  // A second write to the same tensor clones nothing more.
  clones = counter.clones;
  {
    NoGradGuard ng;
    c.sin_();
  }
  CHECK(counter.clones == clones);
  a.mutable_grad() = Tensor();
  out2.backward();
  CHECK(vals(a.grad())[0] == 2.0);
}

TEST_CASE("AllowMutationOnSavedTensors scopes cannot be nested") {
  AllowMutationOnSavedTensors outer;
  CHECK_THROWS_WITH(AllowMutationOnSavedTensors(),
                    Catch::Contains("allow_mutation_on_saved_tensors contexts cannot be nested"));
  // The outer scope still works after the failed attempt.
  Tensor a = leaf();
  Tensor b = a * 1;
  Tensor out = (b * b).sum();
  b.zero_();
  out.backward();
  CHECK(vals(a.grad()) == vals(a.detach() * 2));
}

TEST_CASE("a new scope can start after the previous one ended") {
  for (int i = 0; i < 3; ++i) {
    AllowMutationOnSavedTensors scope;
    Tensor a = leaf();
    Tensor b = a * 1;
    Tensor out = b.sin().sum();
    b.mul_(0);
    out.backward();
    CHECK(vals(a.grad())[2] == Approx(std::cos(1.0)));
  }
}

TEST_CASE("backward after the scope ended throws") {
  Tensor a = leaf();
  Tensor out;
  SECTION("with a mutation") {
    AllowMutationOnSavedTensors scope;
    Tensor b = a * 1;
    out = (b * b).sum();
    b.sin_();
  }
  SECTION("without a mutation") {
    AllowMutationOnSavedTensors scope;
    Tensor b = a * 1;
    out = (b * b).sum();
  }
  CHECK_THROWS_WITH(out.backward(), Catch::Contains("allow_mutation_on_saved_tensors"));
  // Also inside a later scope: the graph belongs to the ended one.
  AllowMutationOnSavedTensors later;
  CHECK_THROWS_WITH(out.backward(), Catch::Contains("allow_mutation_on_saved_tensors"));
}

TEST_CASE("state is cleared at scope exit: originals and clones are released") {
  const int64_t n = 1 << 14;
  Tensor a = ones({n}, dtype(kFloat64).requires_grad());
  int64_t before = cpu_allocated();
  Tensor out;
  {
    AllowMutationOnSavedTensors scope;
    Tensor b = a * 1;
    out = (b * b).sum();
    {
      NoGradGuard ng;
      b.sin_();  // clones the saved value
    }
    CHECK(cpu_allocated() - before >= 2 * n * 8);  // b and its clone(s)
  }
  // Only out (one element) is left: the graph holds tokens, not tensors.
  CHECK(cpu_allocated() - before < n * 8);
  CHECK_THROWS_WITH(out.backward(), Catch::Contains("allow_mutation_on_saved_tensors"));
  out = Tensor();
  CHECK(cpu_allocated() == before);
}

TEST_CASE("graphs built inside the scope can be dropped without backward") {
  const int64_t n = 1 << 12;
  Tensor a = ones({n}, dtype(kFloat64).requires_grad());
  Tensor w = full({n}, 3.0, dtype(kFloat64).requires_grad());
  int64_t before = cpu_allocated();
  {
    AllowMutationOnSavedTensors scope;
    {
      // A chain of nodes whose saved tensors carry history: dropping the graph releases saved
      // tensors whose own nodes hold saved tensors.
      Tensor out = ((a * 1).sin() * w).exp().sum();
    }
    CHECK(cpu_allocated() == before);
    {
      // Dropping the last reference to a saved tensor releases its grad_fn, whose own saved
      // tensors are released in turn.
      Tensor e = (a * 1).sin();
      Tensor y = SaveExtra::apply(a, std::vector<Tensor>{e});
    }
    CHECK(cpu_allocated() == before);
    // A graph still alive when the scope ends.
    Tensor kept = ((a * 1).sin() * w).exp().sum();
    Tensor y = a * 1;
    Tensor out2 = (y.cos() * y).sum();
    y.mul_(2);
    Tensor kept2 = SaveExtra::apply(a, std::vector<Tensor>{(a * 1).sin()});
    (void)kept;
    (void)out2;
  }
  CHECK(cpu_allocated() == before);
}

TEST_CASE("AllowMutationOnSavedTensors is a saved-tensor hook pair") {
  SECTION("it cannot start inside DisableSavedTensorsHooks") {
    DisableSavedTensorsHooks off("no hooks here");
    CHECK_THROWS_WITH(AllowMutationOnSavedTensors(), "no hooks here");
  }
  SECTION("hooks installed inside it win for tensors saved there") {
    AllowMutationOnSavedTensors scope;
    int packs = 0;
    Tensor a = leaf();
    Tensor b = a * 1;
    Tensor out;
    {
      SavedTensorsHooks inner([&](const Tensor& t) -> Packed { ++packs; return t; },
                              [](const Packed& p) { return std::any_cast<Tensor>(p); });
      out = b.sin().sum();
    }
    CHECK(packs == 1);
  }
}
