// The CPU-vs-CUDA harness (the pattern of ggml's test-backend-ops): one table of cases covering
// every op of the CPU library. Each case runs on random inputs of several shapes and layouts
// (contiguous, transposed, sliced with an offset, broadcast by expand) on both devices, forward
// and then backward with the same random output gradient, and the CUDA results must match the
// CPU's. The CPU is the reference because it is tested against gradcheck and fixed values elsewhere.
//
// This file builds two executables (tests/cuda/meson.build):
// - cuda_test_cuda_op_coverage (GRAFT_OP_COVERAGE_ONLY): needs no GPU, so it runs in CI whenever
//   graft is built with CUDA. It fails when an op with a CPU kernel has neither a CUDA kernel nor
//   a commented exclusion below, or when no case of the table exercises it (so a new op cannot slip
//   past the harness). Without the CUDA backend it exits 77 (SKIPPED).
// - cuda_test_cuda_vs_cpu: the comparison itself, on a GPU. Exits 77 (SKIPPED) without one: a GPU
//   test must never report PASSED on a machine that could not run it.
//
// Random ops: graft's generators are counter based (runtime/generator.h), and a CUDA fill maps
// counters to elements exactly as the CPU fill does, so the same seed gives the same numbers on
// both devices; the table therefore compares seeded random ops like any other, and the GPU-only
// tests below add reproducibility, per-device generator state and distribution checks.
#include <catch2/catch.hpp>

#include <limits>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <string>
#include <vector>

#include "cuda/cuda_backend.h"
#include "support/op_case.h"
#include "support/catch_session.h"
#include "graft.h"
#include "graft_config.h"
#if GRAFT_HAVE_CUDA
#include "cuda/bench_support.h"
#include "support/stack_args.h"
#endif

using namespace graft;

namespace {

using Tensors = std::vector<Tensor>;
// A case's computation: `x` are the (possibly strided) inputs on `dev`; returns the outputs to
// compare. Float outputs that require grad get a random gradient for backward.
using CaseFn = std::function<Tensors(Tensors& x, Device dev)>;

// ---------------------------------------------------------------------------------------------
// Inputs

enum class Vals { Normal, Positive, NonZero, Ints, Bool };

struct In {
  Shape shape;
  std::optional<DType> dtype;  // unset: the run's floating dtype (float32, then float64)
  Vals vals = Vals::Normal;
  int64_t lo = 0, hi = 1;      // Ints: values in [lo, hi)
  bool grad = true;            // floating inputs require grad unless false
  bool strided = true;         // may take a non-contiguous layout
  bool expandable = true;      // may be a broadcast view (repeated values: not for ties or writes)

  In nograd() const { In c = *this; c.grad = false; return c; }
  In contig() const { In c = *this; c.strided = false; return c; }
  // Written in place (no grad, never an expanded view, which cannot be written) or sensitive to ties.
  In no_expand() const { In c = *this; c.expandable = false; return c; }
  In written() const { return nograd().no_expand(); }
};

In input(Shape s, Vals vals = Vals::Normal, std::optional<DType> dt = std::nullopt) {
  In i;
  i.shape = std::move(s);
  i.vals = vals;
  i.dtype = dt;
  i.grad = !dt.has_value();
  return i;
}
In f(Shape s) { return input(std::move(s)); }
In pos(Shape s) { return input(std::move(s), Vals::Positive); }
In nz(Shape s) { return input(std::move(s), Vals::NonZero); }
// Floating values that are small integers: comparisons then see equal elements.
In whole(Shape s, int64_t lo = -3, int64_t hi = 4) {
  In i = input(std::move(s), Vals::Ints);
  i.lo = lo;
  i.hi = hi;
  return i;
}
In ints(Shape s, int64_t lo, int64_t hi) {
  In i = input(std::move(s), Vals::Ints, kInt64);
  i.lo = lo;
  i.hi = hi;
  return i;
}
In idx(Shape s, int64_t n) { return ints(std::move(s), 0, n); }
In mask(Shape s) { return input(std::move(s), Vals::Bool, kBool); }

// ---------------------------------------------------------------------------------------------
// The table

// Elementwise: each output element comes from a bounded number of operations. Accumulate: outputs
// are sums over many elements (reductions, matmul, conv, norms), so rounding grows with their length.
enum class Tol { Elementwise, Accumulate };

struct Case {
  std::string category, name;
  std::vector<std::vector<In>> sets;  // shape sets, smallest first
  CaseFn fn;
  Tol tol = Tol::Elementwise;
  bool float64 = true;   // also run with float64 floating inputs
  bool seeded = false;   // random: the generators are reseeded right before fn on each device
  bool values = true;    // false: compare metadata only (empty() has no defined values)
  bool tf32 = false;     // float32 matmul/conv: also run with TF32 on (looser tolerance)
};

// Ops with a CPU kernel that deliberately have no CUDA kernel, each with the reason: the op
// table's `cuda:` entries (codegen/ops/*.yaml). Empty today: every op has a CUDA kernel.
[[maybe_unused]] const std::map<std::string, std::string>& cuda_exclusions() {
  static const std::map<std::string, std::string> m = [] {
    std::map<std::string, std::string> r;
    for (const auto& d : graft::test::declared_ops())
      if (*d.no_cuda) r.emplace(d.name, d.no_cuda);
    return r;
  }();
  return m;
}

std::vector<Tensor> v(Tensor t) { return {std::move(t)}; }

// scaled_dot_product_attention without dropout: the fused kernels (_sdpa_flash and its backward)
// on both devices, as long as the mask does not require grad.
Tensor attn(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& m = {}, bool causal = false,
            std::optional<double> scale = std::nullopt) {
  return graft::scaled_dot_product_attention(q, k, v, m, 0.0, causal, scale);
}
// [L, 1] int64 on `dev`: the row index of a [..., L, S] mask.
Tensor mask_rows(const Tensor& mask, Device dev) {
  const int64_t L = mask.size(-2);
  return graft::arange(L, TensorOptions{}.dtype(kInt64).device(dev)).view({L, 1});
}

const std::vector<Case>& cases() {
  static const std::vector<Case> table = [] {
    std::vector<Case> t;
    auto add = [&](Case c) { t.push_back(std::move(c)); };

    // ---- unary ----
    const std::vector<std::vector<In>> any = {{f({})}, {f({7})}, {f({4, 5})}, {f({2, 3, 5})}, {f({0, 3})}, {f({129, 1031})}};
    const std::vector<std::vector<In>> positive = {{pos({7})}, {pos({4, 5})}, {pos({2, 3, 5})}, {pos({129, 1031})}};
    const std::vector<std::vector<In>> nonzero = {{nz({7})}, {nz({4, 5})}, {nz({2, 3, 5})}, {nz({129, 1031})}};
    auto unary = [&](std::string name, std::vector<std::vector<In>> sets, std::function<Tensor(const Tensor&)> fn) {
      add({"unary", std::move(name), std::move(sets), [fn](Tensors& x, Device) { return v(fn(x[0])); }});
    };
    unary("neg", any, [](const Tensor& x) { return -x; });
    // The floating ops on large inputs (the grid-stride and vectorised paths); their declared
    // cases (codegen/ops/unary.yaml) also run here, from op_cases_cuda.cpp.
    unary("exp", any, [](const Tensor& x) { return x.exp(); });
    unary("log", positive, [](const Tensor& x) { return x.log(); });
    unary("sin cos", any, [](const Tensor& x) { return x.sin() * x.cos(); });
    unary("tanh sigmoid", any, [](const Tensor& x) { return x.tanh() + x.sigmoid(); });
    unary("sqrt rsqrt", positive, [](const Tensor& x) { return x.sqrt() + x.rsqrt(); });
    unary("log1p", positive, [](const Tensor& x) { return x.log1p(); });
    unary("expm1 erf silu", any, [](const Tensor& x) { return x.expm1() + x.erf() + x.silu(); });
    unary("reciprocal", nonzero, [](const Tensor& x) { return x.reciprocal(); });
    unary("relu", any, [](const Tensor& x) { return x.relu(); });
    unary("abs", nonzero, [](const Tensor& x) { return x.abs(); });  // no zeros: |x|' is undefined there
    unary("sign", nonzero, [](const Tensor& x) { return x.sign(); });
    unary("gelu", any, [](const Tensor& x) { return x.gelu(); });
    unary("gelu tanh", any, [](const Tensor& x) { return x.gelu("tanh"); });
    unary("pow scalar 2.5", positive, [](const Tensor& x) { return x.pow(2.5); });
    unary("pow scalar 3", any, [](const Tensor& x) { return x.pow(3); });
    unary("clamp", any, [](const Tensor& x) { return x.clamp(-0.5, 0.7); });
    unary("clamp min", any, [](const Tensor& x) { return x.clamp(0.1); });
    unary("logical_not float", any, [](const Tensor& x) { return ops::logical_not(x.gt(0.3)); });
    add({"unary", "logical_not bool", {{mask({6})}, {mask({3, 9})}}, [](Tensors& x, Device) { return v(ops::logical_not(x[0])); }});
    add({"unary", "neg abs sign int64", {{ints({9}, -5, 5)}, {ints({4, 6}, -9, 9)}},
         [](Tensors& x, Device) { return Tensors{ops::neg(x[0]), ops::abs(x[0]), ops::sign(x[0])}; }});
    // In place on strided views; the other operands keep their grad where the op is differentiable.
    auto inplace_unary = [&](std::string name, Vals vals, std::function<void(Tensor&)> fn) {
      std::vector<std::vector<In>> sets;
      for (Shape s : {Shape{7}, Shape{4, 5}, Shape{3, 4, 5}, Shape{129, 1031}}) {
        In i = f(s).written();
        i.vals = vals;
        sets.push_back({i});
      }
      add({"unary", std::move(name), sets, [fn](Tensors& x, Device) { fn(x[0]); return v(x[0]); }});
    };
    inplace_unary("exp_", Vals::Normal, [](Tensor& x) { x.exp_(); });
    inplace_unary("sin_", Vals::Normal, [](Tensor& x) { x.sin_(); });
    inplace_unary("relu_", Vals::Normal, [](Tensor& x) { x.relu_(); });
    inplace_unary("tanh_", Vals::Normal, [](Tensor& x) { x.tanh_(); });
    inplace_unary("sigmoid_", Vals::Normal, [](Tensor& x) { x.sigmoid_(); });
    inplace_unary("neg_", Vals::Normal, [](Tensor& x) { ops::neg_(x); });
    inplace_unary("sqrt_", Vals::Positive, [](Tensor& x) { ops::sqrt_(x); });
    inplace_unary("clamp_", Vals::Normal, [](Tensor& x) { x.clamp_(-0.3, 0.4); });
    inplace_unary("fill_", Vals::Normal, [](Tensor& x) { x.fill_(2.5); });
    inplace_unary("zero_", Vals::Normal, [](Tensor& x) { x.zero_(); });

    // ---- binary (broadcasting, promotion) ----
    const std::vector<std::vector<In>> pairs = {{f({4, 5}), f({5})}, {f({3, 1, 5}), f({4, 1})}, {f({2, 3, 4}), f({2, 3, 4})},
                                                {f({}), f({3})}, {f({129, 1031}), f({129, 1031})}};
    auto binary = [&](std::string name, std::vector<std::vector<In>> sets, std::function<Tensor(const Tensor&, const Tensor&)> fn) {
      add({"binary", std::move(name), std::move(sets), [fn](Tensors& x, Device) { return v(fn(x[0], x[1])); }});
    };
    binary("add alpha", pairs, [](const Tensor& a, const Tensor& b) { return graft::add(a, b, 2); });
    binary("sub alpha", pairs, [](const Tensor& a, const Tensor& b) { return graft::sub(a, b, 0.5); });
    binary("mul", pairs, [](const Tensor& a, const Tensor& b) { return a * b; });
    binary("div", {{f({4, 5}), nz({5})}, {f({3, 1, 5}), nz({4, 1})}, {f({129, 1031}), nz({129, 1031})}},
           [](const Tensor& a, const Tensor& b) { return a / b; });
    binary("pow tensor", {{pos({4, 5}), f({5})}, {pos({3, 1, 5}), f({4, 1})}, {pos({129, 1031}), f({129, 1031})}},
           [](const Tensor& a, const Tensor& b) { return a.pow(b); });
    // Distinct values: at a tie the two devices may legitimately route the gradient differently.
    binary("maximum", pairs, [](const Tensor& a, const Tensor& b) { return a.maximum(b); });
    binary("minimum", pairs, [](const Tensor& a, const Tensor& b) { return a.minimum(b); });
    unary("add scalar", any, [](const Tensor& x) { return x + 1.5; });
    unary("sub scalar", any, [](const Tensor& x) { return x - 1.5; });
    unary("mul scalar", any, [](const Tensor& x) { return x * -2.5; });
    unary("div scalar", any, [](const Tensor& x) { return x / 3.0; });
    unary("rsub scalar", any, [](const Tensor& x) { return ops::rsub(x, 2.0); });
    unary("rdiv scalar", nonzero, [](const Tensor& x) { return ops::rdiv(x, 2.0); });
    const std::vector<std::vector<In>> whole_pairs = {{whole({4, 5}), whole({5})}, {whole({3, 1, 5}), whole({4, 1})},
                                                      {whole({129, 1031}), whole({129, 1031})}};
    add({"binary", "compare tensor", whole_pairs, [](Tensors& x, Device) {
           return Tensors{x[0].gt(x[1]), x[0].lt(x[1]), x[0].ge(x[1]), x[0].le(x[1]), x[0].eq(x[1]), x[0].ne(x[1])};
         }});
    add({"binary", "compare scalar", {{whole({7})}, {whole({4, 5})}, {whole({129, 1031})}}, [](Tensors& x, Device) {
           return Tensors{x[0].gt(1), x[0].lt(1), x[0].ge(1), x[0].le(1), x[0].eq(1), x[0].ne(1)};
         }});
    add({"binary", "logical and or", {{mask({4, 5}), mask({5})}, {mask({129, 1031}), mask({129, 1031})}},
         [](Tensors& x, Device) { return Tensors{ops::logical_and(x[0], x[1]), ops::logical_or(x[0], x[1])}; }});
    add({"binary", "where", {{mask({4, 5}), f({4, 5}), f({5})}, {mask({3, 1, 5}), f({4, 1}), f({3, 4, 5})}, {mask({129, 1031}), f({129, 1031}), f({1031})}},
         [](Tensors& x, Device) { return v(graft::where(x[0], x[1], x[2])); }});
    add({"binary", "masked_fill", {{f({4, 5}), mask({5})}, {f({3, 4, 5}), mask({4, 1})}, {f({129, 1031}), mask({129, 1031})}},
         [](Tensors& x, Device) { return v(x[0].masked_fill(x[1], 3.0)); }});
    const std::vector<std::vector<In>> int_pairs = {{ints({4, 5}, -9, 9), ints({5}, 1, 6)}, {ints({129, 1031}, -100, 100), ints({129, 1031}, 1, 50)}};
    add({"binary", "int64 arithmetic", int_pairs, [](Tensors& x, Device) {
           return Tensors{x[0] + x[1], graft::sub(x[0], x[1], 3), x[0] * x[1], x[0] / x[1], x[0].maximum(x[1]), x[0].minimum(x[1]),
                          x[0].gt(x[1]), x[0].eq(x[1]), x[0] + 2, x[0] * 3};
         }});
    add({"binary", "type promotion", {{f({4, 5}), ints({5}, -3, 3), mask({4, 5})}, {f({129, 1031}), ints({1031}, -3, 3), mask({129, 1})}},
         [](Tensors& x, Device) { return Tensors{x[0] + x[1], x[0] * x[2], x[1] + x[2], x[2] + 1.5, x[1] * 0.5}; }});
    // In place: self is written through its (strided) view; `other` keeps its grad.
    auto inplace_binary = [&](std::string name, std::vector<std::vector<In>> sets, std::function<void(Tensor&, Tensors&)> fn) {
      add({"binary", std::move(name), std::move(sets), [fn](Tensors& x, Device) {
             fn(x[0], x);
             return v(x[0]);
           }});
    };
    const std::vector<std::vector<In>> self_other = {{f({4, 5}).written(), f({5})}, {f({3, 4, 5}).written(), f({4, 1})},
                                                     {f({129, 1031}).written(), f({129, 1031})}};
    const std::vector<std::vector<In>> self_nz = {{f({4, 5}).written(), nz({5})}, {f({129, 1031}).written(), nz({129, 1031})}};
    const std::vector<std::vector<In>> self_only = {{f({4, 5}).written()}, {f({129, 1031}).written()}};
    inplace_binary("add_ tensor", self_other, [](Tensor& s, Tensors& x) { s.add_(x[1], 0.5); });
    inplace_binary("add_ scalar", self_only, [](Tensor& s, Tensors&) { s.add_(1.25); });
    // relu's backward written into its incoming gradient (autograd/derivatives.h, relu_grad).
    inplace_binary("threshold_backward_", {{f({4, 5}).written(), f({4, 5}).nograd()}, {f({129, 1031}).written(), f({129, 1031}).nograd()}},
                   [](Tensor& s, Tensors& x) { ops::threshold_backward_(s, x[1], 0); });
    // The same from the bool mask a compressed save decodes to (broadcast mask: the generic loop).
    inplace_binary("_keep_where_", {{f({4, 5}).written(), mask({4, 5})}, {f({3, 4, 5}).written(), mask({4, 1})},
                                    {f({129, 1031}).written(), mask({129, 1031})}},
                   [](Tensor& s, Tensors& x) { ops::_keep_where_(s, x[1]); });
    inplace_binary("sub_ tensor", self_other, [](Tensor& s, Tensors& x) { s.sub_(x[1], 2); });
    inplace_binary("sub_ scalar", self_only, [](Tensor& s, Tensors&) { s.sub_(1.25); });
    inplace_binary("mul_ tensor", self_other, [](Tensor& s, Tensors& x) { s.mul_(x[1]); });
    inplace_binary("mul_ scalar", self_only, [](Tensor& s, Tensors&) { s.mul_(-3); });
    inplace_binary("div_ tensor", self_nz, [](Tensor& s, Tensors& x) { s.div_(x[1]); });
    inplace_binary("div_ scalar", self_only, [](Tensor& s, Tensors&) { s.div_(7); });
    inplace_binary("addcmul_", {{f({4, 5}).written(), f({5}).nograd(), f({4, 5}).nograd()}, {f({129, 1031}).written(), f({129, 1031}).nograd(), f({1031}).nograd()}},
                   [](Tensor& s, Tensors& x) { ops::addcmul_(s, x[1], x[2], 0.5); });
    inplace_binary("addcdiv_", {{f({4, 5}).written(), f({5}).nograd(), nz({4, 5}).nograd()}, {f({129, 1031}).written(), f({129, 1031}).nograd(), nz({1031}).nograd()}},
                   [](Tensor& s, Tensors& x) { ops::addcdiv_(s, x[1], x[2], -0.25); });
    inplace_binary("lerp_", {{f({4, 5}).written(), f({4, 5}).nograd()}, {f({129, 1031}).written(), f({1031}).nograd()}},
                   [](Tensor& s, Tensors& x) { ops::lerp_(s, x[1], 0.3); });
    // Fused optimizer steps: parameter and state written in place, every operand contiguous.
    auto w = [](In i) { return i.written().contig(); };
    const std::vector<std::vector<In>> adam_sets = {{w(f({4, 5})), w(f({4, 5})), w(pos({4, 5})), w(f({4, 5}))},
                                                    {w(f({129, 1031})), w(f({129, 1031})), w(pos({129, 1031})), w(f({129, 1031}))}};
    // 16-bit parameters keep float32 state (optim/optimizer.h), so the state is float32 in every run.
    add({"binary", "_fused_adam_ (AdamW, then Adam with L2)", adam_sets, [](Tensors& x, Device) {
           Tensor m = x[1].to(kFloat32), v = x[2].to(kFloat32);
           ops::fused_adam_(x[0], m, v, x[3], {1e-2, 0.9, 0.999, 0.1, 1e-8, 0.19, 0.002, true});
           ops::fused_adam_(x[0], m, v, x[3], {1e-2, 0.8, 0.99, 0.05, 1e-6, 0.36, 0.0199, false});
           return Tensors{x[0], m, v};
         }});
    const std::vector<std::vector<In>> sgd_sets = {{w(f({4, 5})), w(f({4, 5})), w(f({4, 5}))},
                                                   {w(f({129, 1031})), w(f({129, 1031})), w(f({129, 1031}))}};
    add({"binary", "_fused_sgd_ (first, momentum, nesterov, plain)", sgd_sets, [](Tensors& x, Device) {
           Tensor buf = x[1].to(kFloat32);
           ops::fused_sgd_(x[0], buf, x[2], {0.1, 0.9, 0.0, 0.01, false, true});
           ops::fused_sgd_(x[0], buf, x[2], {0.1, 0.9, 0.2, 0.01, false, false});
           ops::fused_sgd_(x[0], buf, x[2], {0.1, 0.9, 0.0, 0.0, true, false});
           Tensor none;
           ops::fused_sgd_(x[0], none, x[2], {0.1, 0.0, 0.0, 0.0, false, false});
           return Tensors{x[0], buf};
         }});
    // AMP: unscale a gradient and flag non-finite values (one finite run, one with an inf planted),
    // then the scale update from each flag (growth after the interval, backoff on the inf).
    add({"binary", "_amp_non_finite_check_and_unscale_ and _amp_update_scale_", {{w(f({4, 5}))}, {w(f({129, 1031}))}},
         [](Tensors& x, Device dev) {
           auto on = TensorOptions{}.device(dev);
           Tensor inv = full({1}, 0.25, on), found = zeros({1}, on), scale = full({1}, 1024.0, on);
           Tensor tracker = zeros({1}, on.dtype(kInt32));
           ops::_amp_non_finite_check_and_unscale_(x[0], found, inv);
           ops::_amp_update_scale_(scale, tracker, found, 2.0, 0.5, 1);
           Tensor bad = x[0].detach().clone();
           bad.view({-1}).narrow(0, 1, 1).fill_(std::numeric_limits<double>::infinity());
           Tensor found2 = zeros({1}, on);
           ops::_amp_non_finite_check_and_unscale_(bad, found2, inv);
           ops::_amp_update_scale_(scale, tracker, found2, 2.0, 0.5, 1);
           return Tensors{x[0], found, found2, scale, tracker.to(kFloat32)};
         }});
    // copy_ broadcasts and casts: a float64 source into the run's dtype, an int64 one, a bool one.
    In src64 = f({5});
    src64.dtype = kFloat64;
    inplace_binary("copy_ broadcast cast", {{f({4, 5}).written(), src64}, {f({4, 5}).written(), ints({4, 1}, -9, 9)}, {f({129, 1031}).written(), mask({1031})}},
                   [](Tensor& s, Tensors& x) { s.copy_(x[1]); });

    // ---- reductions ----
    const std::vector<std::vector<In>> r2 = {{f({5, 7})}, {f({3, 4, 5})}, {f({64, 4097})}, {f({2, 100003})}};
    auto reduce = [&](std::string name, std::vector<std::vector<In>> sets, std::function<Tensors(const Tensor&)> fn) {
      add({"reduce", std::move(name), std::move(sets), [fn](Tensors& x, Device) { return fn(x[0]); }, Tol::Accumulate});
    };
    reduce("sum", r2, [](const Tensor& x) { return Tensors{x.sum(), x.sum({-1}), x.sum({0}, true), x.sum({0, -1})}; });
    reduce("sum empty", {{f({0, 3})}, {f({2, 0, 3})}}, [](const Tensor& x) { return Tensors{x.sum(), x.sum({0}), x.sum({0}, true)}; });
    reduce("mean", r2, [](const Tensor& x) { return Tensors{x.mean(), x.mean({-1}), x.mean({0}, true), x.mean({0, -1})}; });
    // Ties in amax/amin/max/min split or route the gradient; random normals have none (no expand).
    const std::vector<std::vector<In>> r2_distinct = {{f({5, 7}).no_expand()}, {f({3, 4, 5}).no_expand()}, {f({64, 4097}).no_expand()}, {f({2, 100003}).no_expand()}};
    reduce("amax amin", r2_distinct, [](const Tensor& x) { return Tensors{x.amax(), x.amax({-1}), x.amin({0}, true), x.amin({0, -1})}; });
    reduce("max min all", r2_distinct, [](const Tensor& x) { return Tensors{x.max(), x.min()}; });
    reduce("max.dim", r2_distinct, [](const Tensor& x) {
      auto a = x.max(-1), b = x.max(0, true);
      return Tensors{a[0], a[1], b[0], b[1]};
    });
    reduce("min.dim", r2_distinct, [](const Tensor& x) {
      auto a = x.min(-1), b = x.min(0, true);
      return Tensors{a[0], a[1], b[0], b[1]};
    });
    reduce("argmax argmin", r2_distinct, [](const Tensor& x) { return Tensors{x.argmax(), x.argmax(-1), x.argmin(0, true), x.argmin()}; });
    // No dim of size 2 here: the std of two values has a gradient of +-1/sqrt(2) computed from
    // their difference, which float32 cancellation makes arbitrarily inexact on either device.
    reduce("var std", {{f({5, 7})}, {f({3, 4, 5})}, {f({64, 4097})}, {f({8, 20001})}}, [](const Tensor& x) { return Tensors{x.var(), x.var({-1}, 0), x.std({0}, 1, true), x.std({0, -1}, 0)}; });
    reduce("norm", r2, [](const Tensor& x) { return Tensors{x.norm(), x.norm(1, {-1}), x.norm(3, {0}, true)}; });
    reduce("logsumexp", r2, [](const Tensor& x) { return Tensors{x.logsumexp({-1}), x.logsumexp({0, 1}, true)}; });
    // Integer reductions are exact; ties among small integers pin argmax's first-occurrence rule.
    add({"reduce", "int64 bool reductions", {{ints({5, 7}, -4, 4), mask({5, 7})}, {ints({64, 4097}, -4, 4), mask({64, 4097})}}, [](Tensors& x, Device) {
           auto m = x[0].max(-1);
           return Tensors{x[0].sum(), x[0].sum({-1}), x[1].sum(), ops::sum(x[1], {0}, false, kInt64), x[0].amax({0}), m[0], m[1],
                          x[0].argmax(-1), x[0].argmin()};
         }});
    // topk with its indices: the devices order tied values differently (ops/sort.cpp), so the
    // inputs are float64 normals in every run (no 16-bit rounding to make ties); a vocabulary-sized
    // row as the sampler uses it, a middle dim, and a long row.
    auto f64 = [](Shape s) {
      In i = f(std::move(s)).no_expand();
      i.dtype = kFloat64;
      return i;
    };
    add({"reduce", "topk", {{f64({5, 96})}, {f64({3, 4, 5})}, {f64({2, 4097})}}, [](Tensors& x, Device) {
           auto a = x[0].topk(3), b = x[0].topk(2, 0, false), c = x[0].topk(x[0].size(-1), -1, true, true);
           return Tensors{a[0], a[1], b[0], b[1], c[0], c[1]};
         }});
    add({"reduce", "topk int64", {{ints({4, 96}, -1000000, 1000000)}}, [](Tensors& x, Device) {
           auto a = x[0].topk(5), b = x[0].topk(1, 0, false);
           return Tensors{a[0], a[1], b[0], b[1]};
         }});

    // ---- softmax and losses ----
    const std::vector<std::vector<In>> sm = {{f({4, 10})}, {f({3, 5, 7})}, {f({8, 5000})}, {f({2000, 3})}};
    add({"softmax_loss", "softmax", sm, [](Tensors& x, Device) { return Tensors{x[0].softmax(-1), x[0].softmax(0)}; }, Tol::Accumulate});
    add({"softmax_loss", "log_softmax", sm, [](Tensors& x, Device) { return Tensors{x[0].log_softmax(-1), x[0].log_softmax(0)}; }, Tol::Accumulate});
    add({"softmax_loss", "softmax middle dim", {{f({3, 5, 7})}, {f({4, 300, 9})}},
         [](Tensors& x, Device) { return Tensors{x[0].softmax(1), x[0].log_softmax(1)}; }, Tol::Accumulate});
    const std::vector<std::vector<In>> ce = {{f({6, 5}), idx({6}, 5), pos({5}).nograd()}, {f({300, 10}), idx({300}, 10), pos({10}).nograd()}};
    add({"softmax_loss", "cross_entropy", ce, [](Tensors& x, Device) {
           return Tensors{graft::cross_entropy(x[0], x[1]), graft::cross_entropy(x[0], x[1], {}, "sum"),
                          graft::cross_entropy(x[0], x[1], {}, "none"), graft::cross_entropy(x[0], x[1], x[2]),
                          graft::cross_entropy(x[0], x[1], {}, "mean", -100, 0.1)};
         }, Tol::Accumulate});
    // ignore_index: targets drawn from [-1, C) with -1 ignored.
    add({"softmax_loss", "cross_entropy ignore_index", {{f({8, 4}), ints({8}, -1, 4)}, {f({200, 7}), ints({200}, -1, 7)}},
         [](Tensors& x, Device) { return Tensors{graft::cross_entropy(x[0], x[1], {}, "mean", -1), graft::cross_entropy(x[0], x[1], {}, "none", -1)}; },
         Tol::Accumulate});
    add({"softmax_loss", "cross_entropy spatial", {{f({2, 3, 4, 5}), idx({2, 4, 5}, 3)}},
         [](Tensors& x, Device) { return Tensors{graft::cross_entropy(x[0], x[1]), graft::cross_entropy(x[0], x[1], {}, "none")}; }, Tol::Accumulate});
    add({"softmax_loss", "nll_loss", ce, [](Tensors& x, Device) {
           return Tensors{graft::nll_loss(x[0], x[1]), graft::nll_loss(x[0], x[1], x[2], "sum"), graft::nll_loss(x[0], x[1], {}, "none"),
                          graft::nll_loss(x[0], x[1], x[2])};
         }, Tol::Accumulate});
    add({"softmax_loss", "mse_loss", {{f({4, 5}), f({4, 5})}, {f({129, 1031}), f({129, 1031})}}, [](Tensors& x, Device) {
           return Tensors{graft::mse_loss(x[0], x[1]), graft::mse_loss(x[0], x[1], "sum"), graft::mse_loss(x[0], x[1], "none")};
         }, Tol::Accumulate});

    // The dispatched loss ops themselves (the differentiable functions above compose other ops):
    // label smoothing and class-probability targets, and mse_loss. Forward only.
    add({"softmax_loss", "loss ops", {{f({6, 5}), idx({6}, 5), pos({6, 5}).nograd(), f({6, 5})}, {f({300, 10}), idx({300}, 10), pos({300, 10}).nograd(), f({300, 10})}},
         [](Tensors& x, Device) {
           Tensor probs = x[2] / x[2].sum({1}, true);
           return Tensors{ops::cross_entropy(x[0], x[1], {}, "mean", -100, 0.1), ops::cross_entropy(x[0], probs, {}, "sum"),
                          ops::cross_entropy(x[0], probs, {}, "none", -100, 0.2), ops::mse_loss(x[0], x[3]),
                          ops::mse_loss(x[0], x[3], "sum"), ops::mse_loss(x[0], x[3], "none")};
         }, Tol::Accumulate});

    // ---- layer norm ----
    add({"norm", "layer_norm affine", {{f({4, 10}), f({10}), f({10})}, {f({2, 3, 8}), f({3, 8}), f({3, 8})}, {f({16, 4096}), f({4096}), f({4096})}},
         [](Tensors& x, Device) {
           const Shape ns(x[1].sizes());
           return v(graft::layer_norm(x[0], ns, x[1], x[2]));
         }, Tol::Accumulate});
    add({"norm", "layer_norm plain", {{f({4, 10})}, {f({2, 3, 8})}, {f({16, 4096})}},
         [](Tensors& x, Device) { return v(graft::layer_norm(x[0], {x[0].size(-1)}, {}, {}, 1e-3)); }, Tol::Accumulate});

    // ---- fused attention: scaled_dot_product_attention -> _sdpa_flash, _sdpa_flash_backward ----
    // Odd sizes (ragged tiles on both devices), E and Ev above 128 (several column slices of a CUDA
    // block), L != S, broadcast batch dims, q/k/v read through per-head offsets without a copy, and
    // masks in every layout of the harness (transposed, strided, expanded: a stride-0 row). Row 1
    // of the second mask of each mask case sees no key: out 0, no gradient through it. Additive
    // masks do not require grad (that takes the composed path, not the fused kernels).
    add({"attention", "sdpa plain and scaled",
         {{f({2, 5, 4}), f({2, 7, 4}), f({2, 7, 3})},
          {f({2, 3, 37, 24}), f({2, 3, 53, 24}), f({2, 3, 53, 20})},
          {f({1, 20, 160}), f({1, 19, 160}), f({1, 19, 136})}},
         [](Tensors& x, Device) { return Tensors{attn(x[0], x[1], x[2]), attn(x[0], x[1], x[2], {}, false, 0.3)}; },
         Tol::Accumulate});
    add({"attention", "sdpa heads-interleaved q k v (per-head offsets, no copy)",
         {{f({2, 5, 2, 4}), f({2, 7, 2, 4}), f({2, 7, 2, 3})}, {f({2, 37, 3, 24}), f({2, 53, 3, 24}), f({2, 53, 3, 20})}},
         [](Tensors& x, Device) { return v(attn(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2))); },
         Tol::Accumulate});
    add({"attention", "sdpa causal, L < S and L > S",
         {{f({2, 5, 4}), f({2, 7, 4}), f({2, 7, 3})},
          {f({2, 7, 4}), f({2, 5, 4}), f({2, 5, 3})},
          {f({2, 37, 24}), f({2, 53, 24}), f({2, 53, 20})},
          {f({2, 53, 24}), f({2, 37, 24}), f({2, 37, 20})},
          {f({2, 40, 136}), f({2, 33, 136}), f({2, 33, 150})}},
         [](Tensors& x, Device) { return v(attn(x[0], x[1], x[2], {}, true)); }, Tol::Accumulate});
    add({"attention", "sdpa bool mask, a fully masked row",
         {{f({2, 5, 4}), f({2, 7, 4}), f({2, 7, 3}), mask({5, 7})},
          {f({2, 3, 37, 24}), f({2, 3, 53, 24}), f({2, 3, 53, 20}), mask({2, 1, 37, 53})}},
         [](Tensors& x, Device dev) {
           Tensor dead = ops::logical_and(x[3], mask_rows(x[3], dev).ne(1));
           return Tensors{attn(x[0], x[1], x[2], x[3]), attn(x[0], x[1], x[2], dead)};
         }, Tol::Accumulate});
    add({"attention", "sdpa additive mask, a fully masked row",
         {{f({2, 5, 4}), f({2, 7, 4}), f({2, 7, 3}), f({5, 7}).nograd()},
          {f({2, 3, 37, 24}), f({2, 3, 53, 24}), f({2, 3, 53, 20}), f({3, 37, 53}).nograd()}},
         [](Tensors& x, Device dev) {
           Tensor dead = x[3].masked_fill(mask_rows(x[3], dev).eq(1), -INFINITY);
           return Tensors{attn(x[0], x[1], x[2], x[3]), attn(x[0], x[1], x[2], dead)};
         }, Tol::Accumulate});
    add({"attention", "sdpa broadcast batch dims",
         {{f({2, 3, 5, 4}), f({1, 3, 7, 4}), f({1, 3, 7, 3})},
          {f({2, 3, 37, 24}), f({3, 53, 24}), f({2, 1, 53, 20})},
          {f({1, 3, 37, 24}), f({2, 3, 53, 24}), f({2, 3, 53, 20})}},
         [](Tensors& x, Device) { return Tensors{attn(x[0], x[1], x[2]), attn(x[0], x[1], x[2], {}, true)}; },
         Tol::Accumulate});

    // ---- linear algebra ----
    Case mm{"linalg", "mm", {{f({5, 7}), f({7, 3})}, {f({64, 128}), f({128, 96})}, {f({256, 512}), f({512, 384})}},
            [](Tensors& x, Device) { return v(x[0].mm(x[1])); }, Tol::Accumulate};
    mm.tf32 = true;
    add(mm);
    Case bmm{"linalg", "bmm", {{f({3, 4, 5}), f({3, 5, 6})}, {f({8, 64, 32}), f({8, 32, 48})}},
             [](Tensors& x, Device) { return v(x[0].bmm(x[1])); }, Tol::Accumulate};
    bmm.tf32 = true;
    add(bmm);
    add({"linalg", "matmul shapes", {{f({5}), f({5}), f({5, 3}), f({4, 5})}, {f({64}), f({64}), f({64, 33}), f({17, 64})}},
         [](Tensors& x, Device) { return Tensors{x[0].matmul(x[1]), x[0].matmul(x[2]), x[3].matmul(x[0])}; }, Tol::Accumulate});
    add({"linalg", "matmul batch broadcast", {{f({2, 1, 4, 5}), f({3, 5, 6})}, {f({2, 3, 4, 5}), f({5, 6})}},
         [](Tensors& x, Device) { return v(x[0].matmul(x[1])); }, Tol::Accumulate});
    Case lin{"linalg", "linear", {{f({8, 20}), f({30, 20}), f({30})}, {f({2, 5, 20}), f({30, 20}), f({30})}, {f({128, 784}), f({512, 784}), f({512})}},
             [](Tensors& x, Device) { return Tensors{graft::linear(x[0], x[1], x[2]), graft::linear(x[0], x[1])}; }, Tol::Accumulate};
    lin.tf32 = true;
    add(lin);
    // mm_accumulate_ requires a contiguous self (it accumulates gradients into fresh buffers).
    add({"linalg", "mm_accumulate_", {{f({5, 3}).written().contig(), f({5, 7}).nograd(), f({7, 3}).nograd()}, {f({64, 96}).written().contig(), f({64, 128}).nograd(), f({128, 96}).nograd()}},
         [](Tensors& x, Device) { ops::mm_accumulate_(x[0], x[1], x[2]); return v(x[0]); }, Tol::Accumulate});
    add({"linalg", "int64 mm", {{ints({5, 7}, -5, 5), ints({7, 3}, -5, 5)}, {ints({33, 65}, -9, 9), ints({65, 17}, -9, 9)}},
         [](Tensors& x, Device) { return Tensors{x[0].mm(x[1]), x[0].matmul(x[1])}; }});

    // ---- convolution and pooling ----
    Case conv{"conv_pool", "conv2d", {{f({2, 3, 9, 9}), f({4, 3, 3, 3}), f({4})}, {f({8, 16, 28, 28}), f({32, 16, 3, 3}), f({32})}},
              [](Tensors& x, Device) {
                return Tensors{graft::conv2d(x[0], x[1], x[2], {1, 1}, {1, 1}), graft::conv2d(x[0], x[1], {}, {2, 2}, {0, 0}, {2, 2}),
                               graft::conv2d(x[0], x[1], x[2], {2, 1}, {1, 0})};
              },
              Tol::Accumulate};
    conv.tf32 = true;
    add(conv);
    add({"conv_pool", "conv2d groups 1x1", {{f({2, 4, 8, 8}), f({6, 2, 3, 3}), f({6, 4, 1, 1})}, {f({4, 32, 14, 14}), f({64, 16, 3, 3}), f({8, 32, 1, 1})}},
         [](Tensors& x, Device) { return Tensors{graft::conv2d(x[0], x[1], {}, {1, 1}, {1, 1}, {1, 1}, 2), graft::conv2d(x[0], x[2])}; },
         Tol::Accumulate});
    // Max pooling's gradient goes to the argmax: distinct values only (no expand).
    const std::vector<std::vector<In>> img = {{f({2, 3, 9, 9}).no_expand()}, {f({8, 32, 28, 28}).no_expand()}};
    add({"conv_pool", "max_pool2d", img, [](Tensors& x, Device) {
           // graft::max_pool2d saves window offsets; max_pool2d_with_indices' backward reads indices.
           return Tensors{graft::max_pool2d(x[0], {2, 2}), graft::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}),
                          graft::max_pool2d_with_indices(x[0], {3, 3}, {2, 2}, {1, 1})[0],
                          graft::max_pool2d(x[0], {2, 2}, {1, 1}, {0, 0}, {2, 2}), graft::max_pool2d(x[0], {2, 2}, {2, 2}, {0, 0}, {1, 1}, true)};
         }});
    add({"conv_pool", "max_pool2d ops", img, [](Tensors& x, Device) {
           auto r = ops::max_pool2d_with_indices(x[0], {3, 3}, {2, 2}, {1, 1});
           auto o = ops::_max_pool2d_with_offsets(x[0], {3, 3}, {2, 2}, {1, 1});
           return Tensors{r[0], r[1], o[0], o[1], ops::max_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}),
                          ops::max_pool2d(x[0], {2, 2}, {1, 1}, {0, 0}, {2, 2}, true)};
         }});
    add({"conv_pool", "avg_pool2d", {{f({2, 3, 9, 9})}, {f({8, 32, 28, 28})}}, [](Tensors& x, Device) {
           return Tensors{graft::avg_pool2d(x[0], {2, 2}), graft::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, false, false),
                          graft::avg_pool2d(x[0], {3, 3}, {2, 2}, {1, 1}, true, true)};
         }, Tol::Accumulate});

    // ---- indexing ----
    add({"index", "embedding", {{f({10, 4}), idx({3, 5}, 10)}, {f({1000, 64}), idx({32, 50}, 1000)}},
         [](Tensors& x, Device) { return Tensors{graft::embedding(x[0], x[1]), graft::embedding(x[0], x[1], 2)}; }, Tol::Accumulate});
    add({"index", "index_select", {{f({6, 5}), idx({4}, 6), idx({7}, 5)}, {f({500, 300}), idx({200}, 500), idx({100}, 300)}},
         [](Tensors& x, Device) { return Tensors{graft::index_select(x[0], 0, x[1]), graft::index_select(x[0], 1, x[2])}; }, Tol::Accumulate});
    add({"index", "index_add", {{f({6, 5}), idx({4}, 6), f({4, 5})}, {f({500, 300}), idx({800}, 500), f({800, 300})}},
         [](Tensors& x, Device) { return v(graft::index_add(x[0], 0, x[1], x[2])); }, Tol::Accumulate});
    add({"index", "gather", {{f({4, 5}), idx({4, 3}, 5), idx({2, 5}, 4)}, {f({300, 500}), idx({300, 700}, 500), idx({100, 500}, 300)}},
         [](Tensors& x, Device) { return Tensors{graft::gather(x[0], 1, x[1]), graft::gather(x[0], 0, x[2])}; }, Tol::Accumulate});
    add({"index", "scatter_add", {{f({4, 5}), idx({4, 3}, 5), f({4, 3})}, {f({300, 500}), idx({300, 700}, 500), f({300, 700})}},
         [](Tensors& x, Device) { return v(graft::scatter_add(x[0], 1, x[1], x[2])); }, Tol::Accumulate});
    add({"index", "one_hot", {{idx({6}, 5)}, {idx({3, 400}, 10)}}, [](Tensors& x, Device) { return v(graft::one_hot(x[0], 10)); }});

    // ---- joining and splitting ----
    add({"join", "cat", {{f({2, 3}), f({4, 3}), f({1, 3})}, {f({100, 300}), f({7, 300}), f({50, 300})}}, [](Tensors& x, Device) {
           return Tensors{graft::cat({x[0], x[1], x[2]}, 0), graft::cat({x[0].t(), x[1].t()}, 1)};
         }});
    add({"join", "stack", {{f({2, 3}), f({2, 3})}, {f({100, 300}), f({100, 300})}},
         [](Tensors& x, Device) { return Tensors{graft::stack({x[0], x[1]}, 0), graft::stack({x[0], x[1]}, 2)}; }});
    add({"join", "split chunk", {{f({7, 4})}, {f({301, 50})}}, [](Tensors& x, Device) {
           Tensors out = graft::split(x[0], 2, 0);
           for (auto& c : graft::chunk(x[0], 3, 1)) out.push_back(c * 2.0);
           for (auto& s : ops::split_with_sizes(x[0], {1, x[0].size(0) - 1}, 0)) out.push_back(s.clone());
           return out;
         }});
    add({"join", "pad", {{f({3, 4})}, {f({2, 3, 4, 5})}, {f({64, 1000})}}, [](Tensors& x, Device) {
           return Tensors{graft::pad(x[0], {1, 2}), graft::pad(x[0], {0, 3, 2, 1}, 0.5)};
         }});

    // ---- copies, casts, device transfers ----
    add({"copy", "casts", {{f({7})}, {f({4, 5})}, {f({129, 1031})}}, [](Tensors& x, Device) {
           Tensor i = x[0].mul(3.0).to(kInt64);  // truncation toward zero
           return Tensors{x[0].to(kFloat64), x[0].to(kFloat32), i, x[0].gt(0).to(kFloat32), i.to(kFloat64), x[0].to(kBool), i.to(kBool)};
         }});
    add({"copy", "clone contiguous detach", {{f({7})}, {f({4, 5})}, {f({129, 1031})}},
         [](Tensors& x, Device) { return Tensors{x[0].clone(), x[0].contiguous() * 1.0, x[0].detach().clone()}; }});
    Case d2h{"copy", "device round trip", {{f({7})}, {f({4, 5})}, {f({129, 1031})}}, [](Tensors& x, Device dev) {
               // Strided device tensors to the host and back, through copy_ into a strided destination.
               Tensor host = x[0].to(kCPU);
               Tensor back = graft::zeros({x[0].numel() + 3}, TensorOptions{}.dtype(x[0].dtype()).device(dev)).slice(0, 3, x[0].numel() + 3);
               back.copy_(host.reshape({-1}));
               return Tensors{host.to(dev), back.view(x[0].sizes()) * 1.0};
             }};
    add(d2h);
    // tril/triu move elements as bits: floats (with their gradient), int64 and bool.
    add({"copy", "tril triu", {{f({4, 5})}, {f({2, 3, 6, 4})}, {f({129, 1031})}}, [](Tensors& x, Device) {
           return Tensors{x[0].tril(), x[0].tril(-2), x[0].triu(1), x[0].triu(-1), x[0].tril(100), x[0].triu(-100)};
         }});
    // The saved-tensor codecs (ops/codec_math.h, one formula for both devices): masks and codes
    // are bits, so the decoded values must agree exactly; int8 with and without stochastic rounding.
    add({"copy", "sign mask codec", {{f({7, 13}).nograd()}, {f({129, 1031}).nograd()}}, [](Tensors& x, Device) {
           Tensor bits = ops::_pack_sign_bits(x[0]);
           return Tensors{bits.to(kInt64), ops::_unpack_sign_bits(bits, x[0].sizes(), x[0].dtype())};
         }});
    add({"copy", "int8 codec", {{f({6, 5, 7}).nograd()}, {f({129, 1031}).nograd()}}, [](Tensors& x, Device) {
           auto q = ops::_quantize_int8(x[0], -1);
           auto qc = ops::_quantize_int8(x[0], 0);
           auto qs = ops::_quantize_int8(x[0], 1, /*seed=*/5, /*offset=*/3);
           return Tensors{q[0].to(kInt64), q[1], ops::_dequantize_int8(q[0], q[1], -1, x[0].dtype()), qc[0].to(kInt64),
                          qc[1], qs[0].to(kInt64), ops::_dequantize_int8(qs[0], qs[1], 1, kFloat32)};
         }});
    add({"copy", "tril triu int64 bool", {{ints({5, 7}, -9, 9), mask({3, 4, 4})}}, [](Tensors& x, Device) {
           return Tensors{x[0].tril(1), x[0].triu(), x[1].tril(), x[1].triu(2)};
         }});

    // ---- views (metadata on every device; their backward and materialisation are kernels) ----
    add({"view", "views", {{f({4, 6})}, {f({6, 10})}}, [](Tensors& x, Device) {
           const Tensor& a = x[0];
           return Tensors{a.reshape({-1}) * 1.0, a.transpose(0, 1) * 1.0, a.permute({1, 0}).contiguous(), a.slice(1, 1, 5, 2) * 1.0,
                          a.select(0, 2) * 1.0, a.unsqueeze(1).expand({a.size(0), 3, a.size(1)}) * 1.0, a.unsqueeze(0).squeeze(0) * 1.0,
                          a.unsqueeze(2).squeeze() * 1.0, a.flatten() * 1.0, a.contiguous().view({2, -1}) * 1.0,
                          graft::as_strided(a.contiguous(), {2, 3}, {1, 2}, 1) * 1.0, a.narrow(0, 1, 2) * 1.0};
         }});

    // ---- factories ----
    add({"factory", "full zeros ones arange", {{}}, [](Tensors&, Device dev) {
           auto o = TensorOptions{}.device(dev);
           return Tensors{graft::full({3, 4}, 2.5, o), graft::zeros({5}, o.dtype(kInt64)), graft::ones({2, 3}, o.dtype(kFloat64)),
                          graft::full({4}, true, o.dtype(kBool)), graft::arange(0, 5, 0.5, o), graft::arange(7, o.dtype(kInt64)),
                          graft::arange(10, 0, -3, o.dtype(kFloat64)), graft::full({0, 2}, 1.0, o), graft::scalar_tensor(4, o)};
         }});
    Case empty{"factory", "empty", {{}}, [](Tensors&, Device dev) {
                 return Tensors{graft::empty({3, 4}, TensorOptions{}.device(dev)), ops::empty_strided({2, 3}, {1, 2}, kFloat64, dev),
                                graft::empty({0}, TensorOptions{}.device(dev).dtype(kInt64))};
               }};
    empty.values = false;
    add(empty);

    // ---- random (seeded: equal to the CPU's numbers, see the top of the file) ----
    auto rnd = [&](std::string name, std::vector<std::vector<In>> sets, CaseFn fn) {
      Case c{"random", std::move(name), std::move(sets), std::move(fn)};
      c.seeded = true;
      add(c);
    };
    rnd("rand randn randint", {{}}, [](Tensors&, Device dev) {
      auto o = TensorOptions{}.device(dev);
      return Tensors{graft::rand({1001}, o), graft::randn({33, 65}, o), graft::randint(-5, 17, {257}, o),
                     graft::rand({31}, o.dtype(kFloat64)), graft::randn({31}, o.dtype(kFloat64))};
    });
    const std::vector<std::vector<In>> fills = {{f({1001}).written()}, {f({33, 65}).written()}};
    rnd("normal_", fills, [](Tensors& x, Device) { x[0].normal_(2, 3); return v(x[0]); });
    rnd("uniform_", fills, [](Tensors& x, Device) { x[0].uniform_(-1, 3); return v(x[0]); });
    rnd("random_", {{ints({1001}, 0, 1).written()}, {ints({33, 65}, 0, 1).written()}},
        [](Tensors& x, Device) { ops::random_(x[0], -3, 1000); return v(x[0]); });
    rnd("bernoulli_", fills, [](Tensors& x, Device) { ops::bernoulli_(x[0], 0.3); return v(x[0]); });
    rnd("dropout", {{f({1001})}, {f({33, 65})}}, [](Tensors& x, Device) { return v(nn::functional::dropout(x[0], 0.4, true)); });
    // multinomial draws from the same uniforms on both devices (ops/random_plan.h): the keys'
    // selection without replacement (and for one sample), the cumulative sum with replacement.
    rnd("multinomial", {{pos({7}).nograd()}, {pos({5, 96}).nograd()}}, [](Tensors& x, Device) {
      return Tensors{graft::multinomial(x[0], 3), graft::multinomial(x[0], 1), graft::multinomial(x[0], 9, true)};
    });
    return t;
  }();
  return table;
}

// ---------------------------------------------------------------------------------------------
// Running a case

enum class Layout { Contiguous, Transposed, Sliced, Expanded };
constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Transposed, Layout::Sliced, Layout::Expanded};

Tensor apply_layout(const Tensor& leaf, const In& in, Layout l) {
  const int64_t d = static_cast<int64_t>(in.shape.size());
  switch (l) {
    case Layout::Contiguous: return leaf;
    case Layout::Transposed: return leaf.transpose(d - 2, d - 1);
    case Layout::Sliced: return leaf.slice(d - 1, 1, 1 + 2 * in.shape[d - 1], 2);  // offset 1, stride 2
    case Layout::Expanded: return leaf.expand(in.shape);
  }
  return leaf;
}

Tensor generate(const In& in, const Shape& shape, DType fdt) {
  const DType dt = in.dtype.value_or(fdt);
  const auto f64 = dtype(kFloat64);
  Tensor x;
  switch (in.vals) {
    case Vals::Normal: x = randn(shape, f64); break;
    case Vals::Positive: x = rand(shape, f64) * 2.0 + 0.1; break;
    case Vals::NonZero: {
      Tensor m = rand(shape, f64) * 1.5 + 0.5;
      x = graft::where(rand(shape, f64).lt(0.5), m, -m);
      break;
    }
    case Vals::Ints: x = randint(in.lo, in.hi, shape); break;
    case Vals::Bool: x = rand(shape, f64).lt(0.5); break;
  }
  return x.to(dt).detach();
}

struct Run {
  Tensors leaves, views;
};

// The inputs on `dev`: copies of the CPU leaves (each run owns its own, since in-place cases write
// them), marked as requiring grad, then viewed through the layout.
Run make_run(const std::vector<In>& specs, const Tensors& cpu_leaves, const std::vector<bool>& laid_out, Layout l, Device dev) {
  Run r;
  for (size_t i = 0; i < specs.size(); ++i) {
    Tensor leaf = dev.is_cuda() ? cpu_leaves[i].to(dev) : cpu_leaves[i].clone();
    if (specs[i].grad && is_floating(leaf.dtype())) leaf.requires_grad_();
    r.leaves.push_back(leaf);
    r.views.push_back(laid_out[i] ? apply_layout(leaf, specs[i], l) : leaf);
  }
  return r;
}

// Records which ops are dispatched (optionally only those with a CUDA tensor or device argument).
class OpRecorder final : public DispatchMode {
 public:
  OpRecorder(std::set<std::string>& names, bool cuda_only) : names_(names), cuda_only_(cuda_only) {}
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (!cuda_only_ || touches_cuda(args)) names_.insert(op.schema.full_name());
    return next(args);
  }

 private:
  static bool touches_cuda(const Stack& args) {
    if (test::any_tensor_arg(args, [](const Tensor& t) { return t.is_cuda(); })) return true;
    for (const auto& a : args)
      if (auto* d = std::get_if<Device>(&a); d && d->is_cuda()) return true;
    return false;
  }
  std::set<std::string>& names_;
  bool cuda_only_;
};

constexpr uint64_t kSeedFn = 20240611;

Tensors forward(const Case& c, Run& r, Device dev) {
  if (c.seeded) manual_seed(kSeedFn);
  return c.fn(r.views, dev);
}

// Outputs that carry autograd history, with their gradients; gradients are drawn on the CPU once
// and copied, so both devices backpropagate the same numbers.
void backward(const Tensors& outs, const Tensors& grads) {
  Tensors ts, gs;
  for (size_t i = 0; i < outs.size(); ++i)
    if (grads[i].defined()) {
      ts.push_back(outs[i]);
      gs.push_back(outs[i].is_cuda() ? grads[i].to(outs[i].device()) : grads[i]);
    }
  if (!ts.empty()) autograd::backward(ts, gs);
}

Tensors output_grads(const Tensors& outs) {
  Tensors g;
  for (const auto& o : outs)
    g.push_back(o.defined() && is_floating(o.dtype()) && o.requires_grad() ? randn(o.sizes(), dtype(kFloat64)).to(o.dtype()) : Tensor());
  return g;
}

// Ops with a kernel for `type`, by name.
std::set<std::string> ops_with_kernel(DeviceType type) {
  std::set<std::string> s;
  for (const Op* op : registered_ops())
    if (op->kernels[static_cast<int>(type)] != nullptr) s.insert(op->schema.full_name());
  return s;
}

std::string join(const std::vector<std::string>& v, const char* sep = ", ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

}  // namespace

#ifdef GRAFT_OP_COVERAGE_ONLY
// ---------------------------------------------------------------------------------------------
// Completeness (no GPU needed)

TEST_CASE("every op with a CPU kernel has a CUDA kernel or a commented exclusion") {
  std::vector<std::string> missing;
  for (const auto& name : ops_with_kernel(DeviceType::CPU))
    if (!ops_with_kernel(DeviceType::CUDA).count(name) && !cuda_exclusions().count(name)) missing.push_back(name);
  INFO("ops with a CPU kernel but no CUDA kernel: " << join(missing));
  CHECK(missing.empty());
}

TEST_CASE("every exclusion names an op that has a CPU kernel and still lacks a CUDA kernel") {
  auto cpu = ops_with_kernel(DeviceType::CPU), gpu = ops_with_kernel(DeviceType::CUDA);
  for (const auto& [name, why] : cuda_exclusions()) {
    INFO(name << ": " << why);
    CHECK(!why.empty());
    CHECK(cpu.count(name) == 1);
    CHECK(gpu.count(name) == 0);  // stale once the kernel exists: test it instead
  }
}

TEST_CASE("every kernel is registered under a defined op") {
  std::vector<std::string> orphans;
  for (const Op* op : registered_ops())
    if (!op->has_schema) orphans.push_back(op->schema.full_name());
  INFO("kernels or handles for ops that no schema defines (a misspelt name?): " << join(orphans));
  CHECK(orphans.empty());
}

TEST_CASE("every op with a CPU kernel is exercised by a case of the CPU-vs-CUDA table") {
  // Each case's first shape set runs on the CPU (float32, contiguous) under a recorder; only ops
  // dispatched by the case itself and its backward count, not the input generation.
  std::set<std::string> seen;
  std::vector<std::string> broken;
  for (const auto& c : cases()) {
    const auto& specs = c.sets.front();
    manual_seed(1);
    Tensors leaves;
    for (const auto& s : specs) leaves.push_back(generate(s, s.shape, kFloat32));
    Run r = make_run(specs, leaves, std::vector<bool>(specs.size(), false), Layout::Contiguous, kCPU);
    try {
      OpRecorder rec(seen, /*cuda_only=*/false);
      Tensors outs;
      {
        DispatchModeGuard guard(&rec);
        outs = forward(c, r, kCPU);
      }
      Tensors grads = output_grads(outs);  // drawn outside the recorder: not part of the case
      DispatchModeGuard guard(&rec);
      backward(outs, grads);
    } catch (const Error& e) {
      broken.push_back(c.name + ": " + e.what());
    }
  }
  INFO("cases that fail on the CPU: " << join(broken, "; "));
  CHECK(broken.empty());
  // The cases each op's declaration generates (op_cases_cuda.cpp) count too.
  seen.insert(graft::test::ops_with_cuda_cases().begin(), graft::test::ops_with_cuda_cases().end());
  std::vector<std::string> untested;
  for (const auto& name : ops_with_kernel(DeviceType::CPU))
    if (!seen.count(name) && !cuda_exclusions().count(name)) untested.push_back(name);
  INFO("ops with a CPU kernel that no case exercises: " << join(untested));
  CHECK(untested.empty());
}

int main(int argc, char* argv[]) {
  if (!graft::cuda::built_with_cuda()) {
    std::cout << "graft was built without CUDA: skipped\n";
    return 77;
  }
  return graft::test::run_catch_session(argc, argv);
}

#else
// ---------------------------------------------------------------------------------------------
// The comparison (GPU only)

namespace {

// The shape of the tensor that is generated (the leaf) so that the layout's view of it has the
// input's shape; nullopt where the layout does not apply to this input (it stays contiguous).
std::optional<Shape> leaf_shape(const In& in, Layout l) {
  Shape s = in.shape;
  const size_t d = s.size();
  switch (l) {
    case Layout::Contiguous: return s;
    case Layout::Transposed:
      if (!in.strided || d < 2) return std::nullopt;
      std::swap(s[d - 2], s[d - 1]);
      return s;
    case Layout::Sliced:
      if (!in.strided || d < 1) return std::nullopt;
      s[d - 1] = 2 * s[d - 1] + 1;
      return s;
    case Layout::Expanded:
      if (!in.strided || !in.expandable || d < 1 || s[0] < 2) return std::nullopt;
      s[0] = 1;
      return s;
  }
  return std::nullopt;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Transposed: return "transposed";
    case Layout::Sliced: return "sliced";
    case Layout::Expanded: return "expanded";
  }
  return "?";
}

std::string shapes_str(const std::vector<In>& specs) {
  std::ostringstream s;
  s << "(";
  for (size_t i = 0; i < specs.size(); ++i) {
    s << (i ? ", " : "") << "[";
    for (size_t j = 0; j < specs[i].shape.size(); ++j) s << (j ? "," : "") << specs[i].shape[j];
    s << "]";
  }
  s << ")";
  return s.str();
}

struct Tolerance {
  Tol kind;
  double eps;  // base relative error for the dtype
  double k;    // accumulation length
};

// Empty when `got` (any device) matches `want` (CPU), else a description of the worst element.
// Elementwise: |got - want| <= eps (1 + |want|). Accumulate over k terms: rounding grows like
// sqrt(k) and scales with the magnitude of the partial sums, bounded by the largest output m:
// |got - want| <= eps sqrt(k) (|want| + m).
std::string compare(const Tensor& want, const Tensor& got, const Tolerance& tol, bool values = true) {
  std::ostringstream why;
  if (want.defined() != got.defined()) return want.defined() ? "CUDA result undefined" : "CUDA result defined, CPU's undefined";
  if (!want.defined()) return "";
  if (want.sizes() != got.sizes() || want.dtype() != got.dtype()) {
    why << "metadata differs: CPU " << describe(want) << ", CUDA " << describe(got);
    return why.str();
  }
  if (!values || want.numel() == 0) return "";
  Tensor g = got.cpu();
  if (!is_floating(want.dtype())) {
    auto a = want.to(kInt64).contiguous().to_vector<int64_t>(), b = g.to(kInt64).contiguous().to_vector<int64_t>();
    for (size_t i = 0; i < a.size(); ++i)
      if (a[i] != b[i]) {
        why << "element " << i << ": CPU " << a[i] << ", CUDA " << b[i] << " (exact match required)";
        return why.str();
      }
    return "";
  }
  auto a = want.to(kFloat64).contiguous().to_vector<double>(), b = g.to(kFloat64).contiguous().to_vector<double>();
  double m = 0;
  for (double x : a)
    if (std::isfinite(x)) m = std::max(m, std::abs(x));
  double worst = 0;
  size_t wi = 0;
  double wallowed = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double x = a[i], y = b[i];
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::isinf(x) || std::isinf(y)) {
      if (x == y) continue;
      why << "element " << i << ": CPU " << x << ", CUDA " << y;
      return why.str();
    }
    double allowed = tol.kind == Tol::Elementwise ? tol.eps * (1 + std::abs(x))
                                                  : tol.eps * std::sqrt(std::max(1.0, tol.k)) * (std::abs(x) + std::max(m, 1e-3));
    double d = std::abs(x - y);
    if (!(d <= allowed) && (std::isnan(d) || d / allowed > worst)) {
      worst = std::isnan(d) ? INFINITY : d / allowed;
      wi = i;
      wallowed = allowed;
    }
  }
  if (worst > 0) {
    why.precision(10);
    why << "element " << wi << " of " << a.size() << ": CPU " << a[wi] << ", CUDA " << b[wi] << ", |diff| "
        << std::abs(a[wi] - b[wi]) << " > allowed " << wallowed << " (largest |CPU| " << m << ")";
    return why.str();
  }
  return "";
}

// The length of the sums behind an output, estimated as the largest dimension of any input: the
// contraction of a matmul, the reduced dim of a softmax or norm. Full reductions sum more terms
// than that, but their tree/blocked summation grows the error far slower than sqrt(n).
double accumulation_length(const std::vector<In>& specs) {
  int64_t k = 1;
  for (const auto& s : specs)
    for (int64_t d : s.shape) k = std::max(k, d);
  return static_cast<double>(k);
}

void set_tf32(bool on) {
#if GRAFT_HAVE_CUDA
  graft::cuda::bench::set_allow_tf32(on);
#else
  (void)on;
#endif
}

// Whether some shape set of the case has a floating input (one a 16-bit run changes).
bool any_float_set(const Case& c) {
  for (const auto& specs : c.sets)
    for (const auto& s : specs)
      if (!s.dtype.has_value()) return true;
  return false;
}

struct Report {
  std::vector<std::string> failures, rejected;
  int runs = 0;
};

// The device compared with the CPU: CUDA, or the CPU itself in the self-check (see main).
Device g_other = kCUDA;

// Runs one case on the CPU (the reference) and on CUDA for every shape set, dtype and layout: the
// floating inputs in float32 and float64, or with `reduced` in bfloat16 and float16 (then sets
// without floating inputs are skipped: the float32 run already covers them).
void check_case(const Case& c, Report& rep, std::set<std::string>& cuda_ops, bool reduced) {
  int cpu_ok = 0;
  std::vector<DType> fdts{kFloat32};
  if (reduced) fdts = {kBFloat16, kFloat16};
  else if (c.float64) fdts.push_back(kFloat64);
  uint64_t seed = std::hash<std::string>{}(c.name) & 0xffffff;
  for (size_t si = 0; si < c.sets.size(); ++si) {
    const auto& specs = c.sets[si];
    bool has_float = false;
    for (const auto& s : specs) has_float |= !s.dtype.has_value();
    for (DType fdt : fdts) {
      if ((reduced || fdt == kFloat64) && !has_float) continue;  // nothing would change
      for (Layout l : kLayouts) {
        std::vector<bool> laid_out;
        Tensors leaves;
        bool any_strided = false;
        manual_seed(seed + si * 131 + static_cast<uint64_t>(l) * 7 + (fdt == kFloat64));
        for (const auto& s : specs) {
          auto ls = leaf_shape(s, l);
          laid_out.push_back(ls.has_value() && l != Layout::Contiguous);
          any_strided |= laid_out.back();
          leaves.push_back(generate(s, ls.value_or(s.shape), fdt));
        }
        if (l != Layout::Contiguous && !any_strided) continue;  // the same run as contiguous
        std::ostringstream where;
        where << c.category << " / " << c.name << " " << shapes_str(specs) << " " << dtype_name(fdt) << " "
              << layout_name(l);
        const double k = c.tol == Tol::Accumulate ? accumulation_length(specs) : 1;
        auto fail = [&](const std::string& what) { rep.failures.push_back(where.str() + ": " + what); };
        ++rep.runs;

        Run cr = make_run(specs, leaves, laid_out, l, kCPU);
        Tensors cpu_out, grads;
        std::string cpu_error;
        try {
          cpu_out = forward(c, cr, kCPU);
          grads = output_grads(cpu_out);
          backward(cpu_out, grads);
        } catch (const Error& e) {
          cpu_error = e.what();
        }
        std::vector<bool> tf32_modes{false};
        if (c.tf32 && fdt == kFloat32 && g_other.is_cuda()) tf32_modes.push_back(true);
        for (bool tf32 : tf32_modes) {
          set_tf32(tf32);
          Run gr = make_run(specs, leaves, laid_out, l, g_other);
          Tensors gpu_out;
          std::string gpu_error;
          try {
            OpRecorder rec(cuda_ops, /*cuda_only=*/true);
            DispatchModeGuard guard(&rec);
            gpu_out = forward(c, gr, g_other);
            backward(gpu_out, grads);
          } catch (const Error& e) {
            gpu_error = e.what();
          }
          set_tf32(false);
          const std::string mode = tf32 ? " [tf32]" : "";
          if (!cpu_error.empty()) {
            // Both devices must reject the same inputs.
            if (gpu_error.empty()) fail("the CPU throws (" + cpu_error + ") but CUDA does not" + mode);
            else rep.rejected.push_back(where.str() + ": " + cpu_error);
            continue;
          }
          if (!gpu_error.empty()) {
            fail("CUDA throws: " + gpu_error + mode);
            continue;
          }
          if (gpu_out.size() != cpu_out.size()) {
            fail("CUDA returns " + std::to_string(gpu_out.size()) + " outputs, the CPU " + std::to_string(cpu_out.size()));
            continue;
          }
          // 16-bit: both devices compute in float and round once, so a float difference in the
          // last bit flips at most a rounding or two: about 2 units in the last place.
          const double eps_fwd = tf32                   ? 1e-3
                                 : fdt == kFloat64      ? 1e-12
                                 : fdt == kBFloat16     ? 0x1p-7
                                 : fdt == kFloat16      ? 0x1p-9
                                                        : 1e-5;
          for (size_t i = 0; i < cpu_out.size(); ++i) {
            if (gpu_out[i].defined() && gpu_out[i].device() != g_other)
              fail("output " + std::to_string(i) + " is on " + gpu_out[i].device().str() + mode);
            // Integer and bool outputs are exact; a float output of a float64 run may still be
            // float32 (a cast), so the tolerance follows each output's own dtype.
            double eps = cpu_out[i].defined() && cpu_out[i].dtype() == kFloat32 && !tf32 ? 1e-5 : eps_fwd;
            if (auto d = compare(cpu_out[i], gpu_out[i], {c.tol, eps, k}, c.values); !d.empty())
              fail("output " + std::to_string(i) + ": " + d + mode);
          }
          for (size_t i = 0; i < cr.leaves.size(); ++i) {
            if (!cr.leaves[i].requires_grad()) continue;
            // Gradients sum over broadcast dims and chain several kernels: always accumulating.
            Tolerance gt{Tol::Accumulate, eps_fwd, std::max(k, 16.0)};
            Tensor gg = gr.leaves[i].grad();
            if (gg.defined() && gg.device() != g_other) fail("grad of input " + std::to_string(i) + " is on " + gg.device().str() + mode);
            if (auto d = compare(cr.leaves[i].grad(), gg, gt); !d.empty()) fail("grad of input " + std::to_string(i) + ": " + d + mode);
          }
          if (!tf32) ++cpu_ok;
        }
      }
    }
  }
  if (cpu_ok == 0 && (!reduced || any_float_set(c)))
    rep.failures.push_back(c.category + " / " + c.name + ": no run succeeded on the CPU (the case itself is broken)");
}

std::set<std::string>& cuda_ops_seen() {
  static std::set<std::string> s;
  return s;
}

// Runs a category once per process (per dtype group), so the final coverage test can run
// whatever a filtered invocation skipped.
void run_category(const std::string& category, bool reduced = false) {
  static std::set<std::string> done;
  if (!done.insert(category + (reduced ? " [bf16, f16]" : "")).second) return;
  Report rep;
  for (const auto& c : cases())
    if (c.category == category) check_case(c, rep, cuda_ops_seen(), reduced);
  std::cout << category << (reduced ? " in bfloat16 and float16" : "") << ": " << rep.runs << " runs, " << rep.rejected.size() << " rejected by both devices, "
            << rep.failures.size() << " failures\n";
  for (const auto& r : rep.rejected) std::cout << "  rejected by both: " << r << "\n";
  size_t shown = 0;
  for (const auto& f : rep.failures) {
    if (++shown > 200) break;
    FAIL_CHECK(f);
  }
  CHECK(rep.failures.empty());
}

const char* const kCategories[] = {"unary", "binary", "reduce", "softmax_loss", "norm", "attention", "linalg",
                                   "conv_pool", "index", "join", "copy", "view", "factory", "random"};

}  // namespace

TEST_CASE("unary ops match the CPU", "[table]") { run_category("unary"); }
TEST_CASE("binary ops match the CPU", "[table]") { run_category("binary"); }
TEST_CASE("reductions match the CPU", "[table]") { run_category("reduce"); }
TEST_CASE("softmax and losses match the CPU", "[table]") { run_category("softmax_loss"); }
TEST_CASE("layer norm matches the CPU", "[table]") { run_category("norm"); }
TEST_CASE("fused attention matches the CPU, forward and backward", "[table]") { run_category("attention"); }
TEST_CASE("matmul, bmm and linear match the CPU, also with tf32", "[table]") { run_category("linalg"); }
TEST_CASE("convolution and pooling match the CPU", "[table]") { run_category("conv_pool"); }
TEST_CASE("indexing ops match the CPU", "[table]") { run_category("index"); }
TEST_CASE("cat, stack, split and pad match the CPU", "[table]") { run_category("join"); }
TEST_CASE("copies, casts and device transfers match the CPU", "[table]") { run_category("copy"); }
TEST_CASE("views match the CPU", "[table]") { run_category("view"); }
TEST_CASE("factories match the CPU", "[table]") { run_category("factory"); }
TEST_CASE("seeded random ops draw the CPU's numbers", "[table]") { run_category("random"); }

TEST_CASE("every category matches the CPU in bfloat16 and float16", "[table][reduced]") {
  for (const char* c : kCategories) run_category(c, /*reduced=*/true);
}

TEST_CASE("every op with a CUDA kernel ran on CUDA tensors in some case") {
  for (const char* c : kCategories) run_category(c);
  std::vector<std::string> unexercised;
  for (const auto& name : ops_with_kernel(DeviceType::CUDA))
    if (ops_with_kernel(DeviceType::CPU).count(name) && !cuda_ops_seen().count(name)) unexercised.push_back(name);
  INFO("ops never dispatched with CUDA arguments: " << join(unexercised));
  CHECK(unexercised.empty());
}

TEST_CASE("tf32 changes float32 matmul results and stays within its tolerance") {
  manual_seed(7);
  Tensor a = randn({256, 512}), b = randn({512, 384});
  Tensor want = a.mm(b);
  Tensor ga = a.cuda(), gb = b.cuda();
  Tensor plain = ga.mm(gb);
  set_tf32(true);
  Tensor fast = ga.mm(gb);
  set_tf32(false);
  Tensor again = ga.mm(gb);
  CHECK(compare(want, plain, {Tol::Accumulate, 1e-5, 512}).empty());
  CHECK(compare(want, fast, {Tol::Accumulate, 1e-3, 512}).empty());
  // TF32 rounds the inputs to 10 mantissa bits: were the results identical, the switch did nothing.
  CHECK(plain.cpu().to_vector<float>() != fast.cpu().to_vector<float>());
  CHECK(again.cpu().to_vector<float>() == plain.cpu().to_vector<float>());
}

// The 16-bit GEMMs (cuda/cublas_gemm.h): cuBLAS on the tensor cores must sum in float32 and round
// each output once, so it lands within one unit in the last place of the float32 product of the
// same (exactly widened) 16-bit operands, rounded. A bf16 or fp16 accumulation would be off by
// sqrt(k) units. Odd sizes, a transposed operand, a strided batch, a broadcast batch and a bias.
TEST_CASE("bf16 and fp16 matmuls sum in float32 on cuBLAS and round once", "[reduced]") {
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO(dt);
    // One unit in the last place, relative; the absolute part covers float32's own rounding of
    // near-cancelling sums (k = 300 terms of magnitude about 1).
    const graft::test::Tolerance tol{.rtol = dt == kBFloat16 ? 0x1p-7 : 0x1p-10, .atol = 1e-4};
    manual_seed(3);
    auto lo = [&](const Shape& s) { return randn(s).to(dt); };
    // float32 on the CPU from the exact float copies, rounded once to dt.
    auto ref = [&](const Tensor& t) { return t.to(dt); };
    auto f = [](const Tensor& t) { return t.to(kFloat32); };
    Tensor a = lo({65, 300}), b = lo({300, 47}), at = lo({300, 65}), bias = lo({47});
    Tensor x = lo({3, 33, 300}), y = lo({3, 300, 40}), yb = lo({300, 40});
    struct Product {
      const char* name;
      Tensor got, want;
    };
    const std::vector<Product> products{
        {"mm", a.cuda().mm(b.cuda()), ref(f(a).mm(f(b)))},
        {"mm, transposed first operand", at.cuda().t().mm(b.cuda()), ref(f(at).t().mm(f(b)))},
        {"bmm", x.cuda().bmm(y.cuda()), ref(f(x).bmm(f(y)))},
        {"matmul, broadcast batch", x.cuda().matmul(yb.cuda()), ref(f(x).matmul(f(yb)))},
        {"linear with bias", linear(a.cuda(), b.t().contiguous().cuda(), bias.cuda()),
         ref(linear(f(a), f(b).t().contiguous(), f(bias)))},
    };
    for (const auto& p : products) {
      INFO(p.name);
      REQUIRE(p.got.dtype() == dt);
      graft::test::check_close(p.got.to(kFloat32), p.want.to(kFloat32), tol);
    }
  }
}

TEST_CASE("the same seed draws the same numbers on CUDA and another seed does not") {
  auto draw = [](uint64_t seed) {
    manual_seed(seed);
    auto o = TensorOptions{}.device(kCUDA);
    Tensor m = graft::empty({4097}, o);
    ops::bernoulli_(m, 0.5);
    Tensor r = graft::empty({999}, o.dtype(kInt64));
    ops::random_(r, 0, 1 << 20);
    return Tensors{graft::randn({4097}, o), graft::rand({4097}, o), graft::randint(0, 1000, {4097}, o), m,
                   graft::randn({513}, o.dtype(kFloat64)), r};
  };
  Tensors a = draw(11), b = draw(11), c = draw(12);
  for (size_t i = 0; i < a.size(); ++i) {
    INFO("draw " << i);
    CHECK(a[i].is_cuda());
    CHECK(a[i].cpu().to(kFloat64).to_vector<double>() == b[i].cpu().to(kFloat64).to_vector<double>());
    CHECK(a[i].cpu().to(kFloat64).to_vector<double>() != c[i].cpu().to(kFloat64).to_vector<double>());
  }
}

TEST_CASE("CUDA has its own generator: CPU draws do not move it, and its state restores") {
  manual_seed(5);
  Tensor a = randn({1000}, TensorOptions{}.device(kCUDA));
  manual_seed(5);
  Tensor cpu_draw = randn({12345});  // advances the CPU generator only
  Tensor b = randn({1000}, TensorOptions{}.device(kCUDA));
  CHECK(a.cpu().to_vector<float>() == b.cpu().to_vector<float>());
  RngState s = default_generator(kCUDA).get_state();
  Tensor c = rand({100}, TensorOptions{}.device(kCUDA));
  default_generator(kCUDA).set_state(s);
  Tensor d = rand({100}, TensorOptions{}.device(kCUDA));
  CHECK(c.cpu().to_vector<float>() == d.cpu().to_vector<float>());
}

TEST_CASE("CUDA random fills have the expected distributions") {
  manual_seed(99);
  const int64_t n = 1 << 22;
  auto o = TensorOptions{}.device(kCUDA);
  auto stats = [](const Tensor& t) {
    Tensor x = t.to(kFloat64);
    return std::pair<double, double>{x.mean().item<double>(), x.std().item<double>()};
  };
  // Standard errors at n = 4M are about 5e-4 of the std; the bounds are ~10 of them.
  auto [m1, s1] = stats(randn({n}, o));
  CHECK(std::abs(m1) < 5e-3);
  CHECK(std::abs(s1 - 1) < 5e-3);
  auto [m2, s2] = stats(rand({n}, o));
  CHECK(std::abs(m2 - 0.5) < 3e-3);
  CHECK(std::abs(s2 - std::sqrt(1.0 / 12)) < 3e-3);
  Tensor r = randint(-2, 8, {n}, o);
  CHECK(r.min().item<int64_t>() == -2);
  CHECK(r.max().item<int64_t>() == 7);
  CHECK(std::abs(stats(r).first - 2.5) < 0.02);
  Tensor g = graft::empty({n}, o.dtype(kFloat64));
  g.normal_(2, 3);
  auto [m3, s3] = stats(g);
  CHECK(std::abs(m3 - 2) < 0.015);
  CHECK(std::abs(s3 - 3) < 0.015);
  Tensor u = graft::empty({n}, o);
  u.uniform_(-1, 3);
  CHECK(u.min().item<float>() >= -1);
  CHECK(u.max().item<float>() < 3);
  CHECK(std::abs(stats(u).first - 1) < 0.01);
  Tensor b = graft::empty({n}, o);
  ops::bernoulli_(b, 0.3);
  CHECK(std::abs(stats(b).first - 0.3) < 3e-3);
  CHECK(ops::logical_or(b.eq(0), b.eq(1)).sum().item<int64_t>() == n);
}

int main(int argc, char* argv[]) {
  // GRAFT_VS_CPU_SELF_CHECK=1 runs the table against the CPU itself: a check of the table (every
  // case runs in every layout, the comparison accepts identical results) on a machine without a
  // GPU, for whoever edits it. Never set by meson: the test proper needs a GPU.
  if (const char* e = std::getenv("GRAFT_VS_CPU_SELF_CHECK"); e && std::string(e) == "1") {
    g_other = kCPU;
    graft::test::set_cuda_case_device(kCPU);  // the generated cases (op_cases_cuda.cpp) too
    return graft::test::run_catch_session(argc, argv, {"[table]"});
  }
  if (!cuda_is_available()) {
    std::cout << "no CUDA device: skipped\n";
    return 77;
  }
  return graft::test::run_catch_session(argc, argv);
}
#endif
