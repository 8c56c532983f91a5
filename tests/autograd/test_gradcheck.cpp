// gradcheck (float64 central differences) for every differentiable elementwise op, reduction and
// in-place op of the public API, on contiguous, non-contiguous and broadcast inputs, plus
// gradgradcheck for a representative set. Inputs are kept away from kinks (relu/abs at 0, clamp
// bounds, max ties) so that finite differences are valid.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <string_view>

#include "autograd/gradcheck_macros.h"
#include "graft.h"

using namespace graft;
using namespace graft::autograd;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;
using MultiFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

const TensorOptions F64 = dtype(kFloat64);

Tensor leaf(Tensor t) {
  t.requires_grad_();
  return t;
}
// Plain values (no grad), then made leaves by the callers.
Tensor normal(const Shape& s) { return randn(s, F64); }
// |x| in [lo, lo + |N(0,1)|], random sign: away from 0.
Tensor away(const Shape& s, double lo = 0.3) {
  NoGradGuard ng;
  Tensor r = randn(s, F64);
  return sign(r) * (abs(r) + lo);
}
// Uniform in [lo, hi].
Tensor uniform(const Shape& s, double lo, double hi) {
  NoGradGuard ng;
  return rand(s, F64) * (hi - lo) + lo;
}
// A non-contiguous leaf: the transpose of `values` (so [a,b] values give a [b,a] leaf).
Tensor transposed(const Tensor& values) {
  NoGradGuard ng;
  return leaf(contiguous(values).t());
}
// A non-contiguous leaf: every other column of a wider tensor holding `values` at even columns.
Tensor stepped(const Tensor& values) {
  NoGradGuard ng;
  Shape wide = values.sizes();
  wide.back() = wide.back() * 2;
  Tensor big = full(wide, 1e3, F64);
  Tensor v = slice(big, -1, 0, wide.back(), 2);
  v.copy_(values);
  return leaf(v);
}


struct Unary {
  const char* name;
  Fn fn;
  std::function<Tensor(const Shape&)> make;  // valid input values
};

std::vector<Unary> unary_ops() {
  auto any = [](const Shape& s) { return normal(s); };
  auto pos = [](const Shape& s) { return uniform(s, 0.5, 1.5); };
  auto nz = [](const Shape& s) { return away(s); };
  return {
  // The ops without arguments are also checked from their declarations (codegen/ops/unary.yaml).
      {"neg", [](const std::vector<Tensor>& x) { return neg(x[0]); }, any},
      {"relu", [](const std::vector<Tensor>& x) { return relu(x[0]); }, nz},
      {"abs", [](const std::vector<Tensor>& x) { return abs(x[0]); }, nz},
      {"gelu", [](const std::vector<Tensor>& x) { return gelu(x[0]); }, any},
      {"gelu tanh", [](const std::vector<Tensor>& x) { return gelu(x[0], "tanh"); }, any},
      {"pow 2.5", [](const std::vector<Tensor>& x) { return pow(x[0], 2.5); }, pos},
      {"pow -1.5", [](const std::vector<Tensor>& x) { return pow(x[0], -1.5); }, pos},
      {"pow 0.5", [](const std::vector<Tensor>& x) { return pow(x[0], 0.5); }, pos},
      {"pow 3 (integral)", [](const std::vector<Tensor>& x) { return pow(x[0], 3); }, any},
      {"pow 2 (integral)", [](const std::vector<Tensor>& x) { return pow(x[0], 2); }, any},
      {"pow 1", [](const std::vector<Tensor>& x) { return pow(x[0], 1.0); }, any},
      {"pow 0", [](const std::vector<Tensor>& x) { return pow(x[0], 0.0); }, any},
      {"clamp", [](const std::vector<Tensor>& x) { return clamp(x[0], -0.5, 0.5); }, any},
      {"clamp min only", [](const std::vector<Tensor>& x) { return clamp(x[0], -0.2); }, any},
      {"clamp max only", [](const std::vector<Tensor>& x) { return clamp(x[0], std::nullopt, 0.1); }, any},
      {"neg operator", [](const std::vector<Tensor>& x) { return -x[0]; }, any},
      {"sign (zero gradient)", [](const std::vector<Tensor>& x) { return sign(x[0]) * x[0]; }, nz},
  };
}

// Ops that are smooth everywhere they are defined: checked to second order.
std::vector<Unary> smooth_unary_ops() {
  std::vector<Unary> out;
  for (auto& u : unary_ops()) {
    std::string n = u.name;
    if (n == "relu" || n == "abs" || n.rfind("clamp", 0) == 0 || n == "sign (zero gradient)") continue;
    out.push_back(u);
  }
  return out;
}

}  // namespace

TEST_CASE("unary elementwise ops have correct gradients on contiguous and non-contiguous inputs") {
  manual_seed(1);
  for (auto& u : unary_ops()) {
    INFO(u.name);
    GRADCHECK("contiguous [3,4]", u.fn, {leaf(u.make({3, 4}))});
    GRADCHECK("transposed [4,3]^T", u.fn, {transposed(u.make({3, 4}))});
    GRADCHECK("sliced with step", u.fn, {stepped(u.make({2, 3}))});
    GRADCHECK("0-d", u.fn, {leaf(u.make({}))});
  }
}

TEST_CASE("unary elementwise ops have correct second derivatives") {
  manual_seed(2);
  for (auto& u : smooth_unary_ops()) {
    INFO(u.name);
    GRADGRADCHECK("contiguous [2,3]", u.fn, {leaf(u.make({2, 3}))});
    GRADGRADCHECK("transposed", u.fn, {transposed(u.make({3, 2}))});
  }
  // The kinked ops have a zero second derivative away from their kinks.
  GRADGRADCHECK("relu", [](const std::vector<Tensor>& x) { return relu(x[0]); }, {leaf(away({2, 3}))});
  GRADGRADCHECK("abs", [](const std::vector<Tensor>& x) { return abs(x[0]); }, {leaf(away({2, 3}))});
  GRADGRADCHECK("clamp", [](const std::vector<Tensor>& x) { return clamp(x[0] * x[0], 0.2, 1.5); },
                {leaf(away({2, 3}))});
}

TEST_CASE("binary arithmetic has correct gradients with broadcasting, scalars and alpha") {
  manual_seed(3);
  auto add_a = [](const std::vector<Tensor>& x) { return add(x[0], x[1], 2.5); };
  auto sub_a = [](const std::vector<Tensor>& x) { return sub(x[0], x[1], -0.5); };
  auto add_f = [](const std::vector<Tensor>& x) { return add(x[0], x[1]); };
  auto sub_f = [](const std::vector<Tensor>& x) { return sub(x[0], x[1]); };
  auto mul_f = [](const std::vector<Tensor>& x) { return mul(x[0], x[1]); };
  auto div_f = [](const std::vector<Tensor>& x) { return div(x[0], x[1]); };
  std::vector<std::pair<const char*, Fn>> ops = {{"add", add_f}, {"add alpha", add_a}, {"sub", sub_f},
                                                 {"sub alpha", sub_a}, {"mul", mul_f}, {"div", div_f}};
  for (auto& [name, f] : ops) {
    INFO(name);
    GRADCHECK("same shape", f, {leaf(normal({3, 4})), leaf(away({3, 4}))});
    GRADCHECK("[3,1] with [1,4]", f, {leaf(normal({3, 1})), leaf(away({1, 4}))});
    GRADCHECK("0-d with matrix", f, {leaf(normal({})), leaf(away({2, 3}))});
    GRADCHECK("matrix with 0-d", f, {leaf(normal({2, 3})), leaf(away({}))});
    GRADCHECK("[4] with [2,3,4]", f, {leaf(normal({4})), leaf(away({2, 3, 4}))});
    GRADCHECK("transposed with stepped", f, {transposed(normal({3, 2})), stepped(away({2, 3}))});
    GRADCHECK("only the first input requires grad", f, {leaf(normal({2, 3})), away({2, 3})});
    GRADCHECK("only the second input requires grad", f, {normal({1, 3}), leaf(away({2, 3}))});
    const Fn& fr = f;
    GRADCHECK("the same tensor twice", [&](const std::vector<Tensor>& x) { return fr({x[0], x[0]}); },
              {leaf(away({2, 3}))});
  }
  {
    INFO("tensor-scalar");
    GRADCHECK("add scalar", [](const std::vector<Tensor>& x) { return add(x[0], 1.5); }, {leaf(normal({2, 3}))});
    GRADCHECK("sub scalar", [](const std::vector<Tensor>& x) { return sub(x[0], 1.5); }, {leaf(normal({2, 3}))});
    GRADCHECK("mul scalar", [](const std::vector<Tensor>& x) { return mul(x[0], -3.0); }, {leaf(normal({2, 3}))});
    GRADCHECK("div scalar", [](const std::vector<Tensor>& x) { return div(x[0], 0.25); }, {leaf(normal({2, 3}))});
    GRADCHECK("mul integral scalar", [](const std::vector<Tensor>& x) { return mul(x[0], 3); }, {leaf(normal({2, 3}))});
    GRADCHECK("scalar on transposed", [](const std::vector<Tensor>& x) { return div(sub(mul(x[0], 2), 1), 3); },
              {transposed(normal({3, 2}))});
  }
  {
    INFO("operators");
    auto all_ops = [](const std::vector<Tensor>& x) {
      const Tensor &a = x[0], &b = x[1];
      return (a + b) * (a - b) / b + (2.0 + a) - (3.0 - b) * (2.0 * a) + (1.5 / b) - (a * 0.5) + (a / 4.0) -
             (b - 1.0) + (-a) + (a + 1);
    };
    GRADCHECK("all operators", all_ops, {leaf(normal({2, 3})), leaf(away({2, 3}))});
    GRADCHECK("all operators, broadcast", all_ops, {leaf(normal({2, 1})), leaf(away({1, 3}))});
    GRADGRADCHECK("all operators", all_ops, {leaf(normal({2, 3})), leaf(away({2, 3}))});
  }
}

TEST_CASE("pow of two tensors, maximum and minimum have correct gradients") {
  manual_seed(4);
  auto pow_f = [](const std::vector<Tensor>& x) { return pow(x[0], x[1]); };
  GRADCHECK("pow same shape", pow_f, {leaf(uniform({2, 3}, 0.5, 2.0)), leaf(normal({2, 3}))});
  GRADCHECK("pow [3,1]^[1,4]", pow_f, {leaf(uniform({3, 1}, 0.5, 2.0)), leaf(normal({1, 4}))});
  GRADCHECK("pow 0-d base", pow_f, {leaf(uniform({}, 0.5, 2.0)), leaf(normal({2, 3}))});
  GRADCHECK("pow 0-d exponent", pow_f, {leaf(uniform({2, 3}, 0.5, 2.0)), leaf(normal({}))});
  GRADCHECK("pow exponent only", pow_f, {uniform({2, 3}, 0.5, 2.0), leaf(normal({2, 3}))});
  GRADCHECK("pow base only", pow_f, {leaf(uniform({2, 3}, 0.5, 2.0)), normal({2, 3})});
  GRADCHECK("pow non-contiguous", pow_f, {transposed(uniform({3, 2}, 0.5, 2.0)), stepped(normal({2, 3}))});

  auto max_f = [](const std::vector<Tensor>& x) { return maximum(x[0], x[1]); };
  auto min_f = [](const std::vector<Tensor>& x) { return minimum(x[0], x[1]); };
  for (auto& [name, f] : std::vector<std::pair<const char*, Fn>>{{"maximum", max_f}, {"minimum", min_f}}) {
    INFO(name);
    GRADCHECK("same shape", f, {leaf(normal({3, 4})), leaf(normal({3, 4}))});
    GRADCHECK("[3,1] with [1,4]", f, {leaf(normal({3, 1})), leaf(normal({1, 4}))});
    GRADCHECK("0-d with matrix", f, {leaf(normal({})), leaf(normal({2, 3}))});
    GRADCHECK("non-contiguous", f, {transposed(normal({3, 2})), stepped(normal({2, 3}))});
    GRADGRADCHECK("second order", f, {leaf(normal({2, 3})), leaf(normal({2, 3}))});
  }
  GRADGRADCHECK("pow two tensors", pow_f, {leaf(uniform({2, 3}, 0.5, 2.0)), leaf(normal({2, 3}))});
  GRADGRADCHECK("pow broadcast", pow_f, {leaf(uniform({3, 1}, 0.5, 2.0)), leaf(normal({1, 2}))});
}

TEST_CASE("where and masked_fill have correct gradients with broadcast conditions") {
  manual_seed(5);
  Tensor cond = tensor(std::vector<bool>{true, false, false, true, true, false, false, true, false, true, true, false},
                       {3, 4});
  auto where_f = [&](const std::vector<Tensor>& x) { return where(cond, x[0], x[1]); };
  GRADCHECK("where same shape", where_f, {leaf(normal({3, 4})), leaf(normal({3, 4}))});
  GRADCHECK("where [3,1] and [1,4]", where_f, {leaf(normal({3, 1})), leaf(normal({1, 4}))});
  GRADCHECK("where 0-d and transposed", where_f, {leaf(normal({})), transposed(normal({4, 3}))});
  GRADCHECK("where one side only", where_f, {normal({3, 4}), leaf(normal({3, 4}))});
  Tensor cond_row = tensor(std::vector<bool>{true, false, true}, {1, 3});
  GRADCHECK("where broadcast condition",
            [&](const std::vector<Tensor>& x) { return where(cond_row, x[0], x[1]); },
            {leaf(normal({2, 1})), leaf(normal({2, 3}))});
  GRADGRADCHECK("where", [&](const std::vector<Tensor>& x) { return where(cond, x[0] * x[1], x[1]); },
                {leaf(normal({3, 4})), leaf(normal({3, 4}))});

  auto mf = [&](const std::vector<Tensor>& x) { return masked_fill(x[0], cond, -2.0); };
  GRADCHECK("masked_fill", mf, {leaf(normal({3, 4}))});
  GRADCHECK("masked_fill transposed", mf, {transposed(normal({4, 3}))});
  Tensor mask_row = tensor(std::vector<bool>{false, true, true, false}, {1, 4});
  GRADCHECK("masked_fill broadcast mask",
            [&](const std::vector<Tensor>& x) { return masked_fill(x[0], mask_row, 3.0); }, {leaf(normal({3, 4}))});
  GRADGRADCHECK("masked_fill", [&](const std::vector<Tensor>& x) { return masked_fill(x[0] * x[0], cond, 1.0); },
                {leaf(normal({3, 4}))});
}

TEST_CASE("binary ops have correct second derivatives") {
  manual_seed(6);
  auto check2 = [](const char* name, Fn f) {
    INFO(name);
    GRADGRADCHECK("same shape", f, {leaf(normal({2, 3})), leaf(away({2, 3}))});
    GRADGRADCHECK("broadcast", f, {leaf(normal({2, 1})), leaf(away({1, 3}))});
    GRADGRADCHECK("0-d", f, {leaf(normal({})), leaf(away({2, 2}))});
  };
  check2("add alpha", [](const std::vector<Tensor>& x) { return add(x[0], x[1], 2.5); });
  check2("sub alpha", [](const std::vector<Tensor>& x) { return sub(x[0], x[1], 0.5); });
  check2("mul", [](const std::vector<Tensor>& x) { return mul(x[0], x[1]); });
  check2("div", [](const std::vector<Tensor>& x) { return div(x[0], x[1]); });
  check2("mul of products", [](const std::vector<Tensor>& x) { return mul(x[0] * x[1], x[1]); });
  check2("div of squares", [](const std::vector<Tensor>& x) { return div(x[0] * x[0], x[1] * x[1]); });
}

TEST_CASE("sum and mean have correct gradients for every dims and keepdim") {
  manual_seed(7);
  for (bool keep : {false, true}) {
    INFO("keepdim " << keep);
    for (const Shape& dims : std::vector<Shape>{{}, {0}, {1}, {-1}, {0, 2}, {2, 0}, {0, 1, 2}}) {
      INFO("dims " << shape_str(dims));
      GRADCHECK("sum", [&](const std::vector<Tensor>& x) { return sum(x[0], dims, keep); }, {leaf(normal({2, 3, 2}))});
      GRADCHECK("mean", [&](const std::vector<Tensor>& x) { return mean(x[0], dims, keep); }, {leaf(normal({2, 3, 2}))});
    }
    GRADCHECK("sum transposed", [&](const std::vector<Tensor>& x) { return sum(x[0], {1}, keep); },
              {transposed(normal({4, 3}))});
    GRADCHECK("mean stepped", [&](const std::vector<Tensor>& x) { return mean(x[0], {0}, keep); },
              {stepped(normal({3, 2}))});
  }
  GRADCHECK("sum of 0-d", [](const std::vector<Tensor>& x) { return sum(x[0]); }, {leaf(normal({}))});
  GRADCHECK("mean of 0-d", [](const std::vector<Tensor>& x) { return mean(x[0]); }, {leaf(normal({}))});
  GRADCHECK("method sum", [](const std::vector<Tensor>& x) { return x[0].sum({1}, true) * x[0]; },
            {leaf(normal({2, 3}))});
  GRADGRADCHECK("sum", [](const std::vector<Tensor>& x) { return sum(x[0] * x[0], {1}); }, {leaf(normal({2, 3}))});
  GRADGRADCHECK("mean keepdim", [](const std::vector<Tensor>& x) { return mean(x[0] * x[0], {0}, true); },
                {leaf(normal({2, 3}))});
  GRADGRADCHECK("mean all", [](const std::vector<Tensor>& x) { return mean(exp(x[0])); }, {leaf(normal({2, 3}))});
}

TEST_CASE("amax, amin, max and min have correct gradients without ties") {
  manual_seed(8);
  // randn values are distinct, so there are no ties and every extremum is a smooth selection.
  for (bool keep : {false, true}) {
    INFO("keepdim " << keep);
    for (const Shape& dims : std::vector<Shape>{{}, {0}, {-1}, {0, 2}}) {
      INFO("dims " << shape_str(dims));
      GRADCHECK("amax", [&](const std::vector<Tensor>& x) { return amax(x[0], dims, keep); }, {leaf(normal({2, 3, 2}))});
      GRADCHECK("amin", [&](const std::vector<Tensor>& x) { return amin(x[0], dims, keep); }, {leaf(normal({2, 3, 2}))});
    }
    for (int64_t d : {0, 1, -1}) {
      INFO("dim " << d);
      GRADCHECK("max(dim)", [&](const std::vector<Tensor>& x) { return max(x[0], d, keep); }, {leaf(normal({3, 4}))});
      GRADCHECK("min(dim)", [&](const std::vector<Tensor>& x) { return min(x[0], d, keep); }, {leaf(normal({3, 4}))});
      GRADCHECK("max(dim) transposed", [&](const std::vector<Tensor>& x) { return max(x[0], d, keep); },
                {transposed(normal({4, 3}))});
      GRADCHECK("min(dim) values only", [&](const std::vector<Tensor>& x) { return min(x[0], d, keep)[0]; },
                {stepped(normal({3, 2}))});
    }
    GRADCHECK("amax transposed", [&](const std::vector<Tensor>& x) { return amax(x[0], {0}, keep); },
              {transposed(normal({4, 3}))});
  }
  GRADCHECK("max()", [](const std::vector<Tensor>& x) { return max(x[0]); }, {leaf(normal({3, 4}))});
  GRADCHECK("min()", [](const std::vector<Tensor>& x) { return min(x[0]); }, {leaf(normal({3, 4}))});
  GRADCHECK("max() transposed", [](const std::vector<Tensor>& x) { return max(x[0]); }, {transposed(normal({4, 3}))});
  GRADCHECK("min() stepped", [](const std::vector<Tensor>& x) { return min(x[0]); }, {stepped(normal({2, 3}))});
  GRADCHECK("max() of 0-d", [](const std::vector<Tensor>& x) { return max(x[0]); }, {leaf(normal({}))});
  GRADCHECK("amax of 0-d", [](const std::vector<Tensor>& x) { return amax(x[0]); }, {leaf(normal({}))});
  GRADCHECK("max(dim) of 1-d", [](const std::vector<Tensor>& x) { return max(x[0], 0); }, {leaf(normal({5}))});

  {
    INFO("ties share the gradient evenly, as PyTorch");
    Tensor x = leaf(tensor(std::vector<double>{1, 3, 3, 2}, {4}, F64));
    amax(x).backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0.5, 0.5, 0});
  }
  GRADGRADCHECK("amax", [](const std::vector<Tensor>& x) { return amax(x[0] * x[0], {1}); }, {leaf(normal({2, 3}))});
  GRADGRADCHECK("amin keepdim", [](const std::vector<Tensor>& x) { return amin(x[0], {0}, true); },
                {leaf(normal({2, 3}))});
  GRADGRADCHECK("max()", [](const std::vector<Tensor>& x) { return max(x[0] * x[0]); }, {leaf(normal({2, 3}))});
  GRADGRADCHECK("max(dim)", [](const std::vector<Tensor>& x) { return max(x[0] * x[0], 1)[0]; },
                {leaf(normal({2, 3}))});
  GRADGRADCHECK("min(dim) keepdim", [](const std::vector<Tensor>& x) { return min(exp(x[0]), 0, true)[0]; },
                {leaf(normal({2, 3}))});
}

TEST_CASE("var, std, norm and logsumexp have correct gradients") {
  manual_seed(9);
  for (bool keep : {false, true}) {
    INFO("keepdim " << keep);
    for (const Shape& dims : std::vector<Shape>{{}, {0}, {-1}, {0, 2}}) {
      INFO("dims " << shape_str(dims));
      for (int64_t c : {0, 1}) {
        INFO("correction " << c);
        GRADCHECK("var", [&](const std::vector<Tensor>& x) { return var(x[0], dims, c, keep); },
                  {leaf(normal({2, 3, 2}))});
        GRADCHECK("std", [&](const std::vector<Tensor>& x) { return graft::std(x[0], dims, c, keep); },
                  {leaf(normal({2, 3, 2}))});
      }
      for (double p : {1.0, 2.0, 3.0, std::numeric_limits<double>::infinity()}) {
        INFO("p " << p);
        GRADCHECK("norm", [&](const std::vector<Tensor>& x) { return norm(x[0], p, dims, keep); },
                  {leaf(away({2, 3, 2}))});
      }
      if (!dims.empty())
        GRADCHECK("logsumexp", [&](const std::vector<Tensor>& x) { return logsumexp(x[0], dims, keep); },
                  {leaf(normal({2, 3, 2}))});
    }
    GRADCHECK("var transposed", [&](const std::vector<Tensor>& x) { return var(x[0], {1}, 1, keep); },
              {transposed(normal({4, 3}))});
    GRADCHECK("std stepped", [&](const std::vector<Tensor>& x) { return graft::std(x[0], {0}, 1, keep); },
              {stepped(normal({3, 2}))});
    GRADCHECK("norm transposed", [&](const std::vector<Tensor>& x) { return norm(x[0], 3.0, {0}, keep); },
              {transposed(away({4, 3}))});
    GRADCHECK("logsumexp stepped", [&](const std::vector<Tensor>& x) { return logsumexp(x[0], {1}, keep); },
              {stepped(normal({3, 2}))});
    GRADCHECK("logsumexp of large values", [&](const std::vector<Tensor>& x) { return logsumexp(x[0], {0, 1}, keep); },
              {leaf(normal({2, 3}) * 50 + 800)});
  }
  GRADCHECK("norm of 0-d", [](const std::vector<Tensor>& x) { return norm(x[0]); }, {leaf(away({}))});
  GRADCHECK("norm 1.5", [](const std::vector<Tensor>& x) { return norm(x[0], 1.5); }, {leaf(away({2, 3}))});
  GRADCHECK("norm of a method", [](const std::vector<Tensor>& x) { return x[0].norm(2.0, {1}); }, {leaf(away({2, 3}))});

  GRADGRADCHECK("var", [](const std::vector<Tensor>& x) { return var(x[0], {1}); }, {leaf(normal({2, 3}))});
  GRADGRADCHECK("var all, correction 0", [](const std::vector<Tensor>& x) { return var(x[0], {}, 0); },
                {leaf(normal({2, 3}))});
  GRADGRADCHECK("std", [](const std::vector<Tensor>& x) { return graft::std(x[0], {0}, 1, true); }, {leaf(normal({3, 2}))});
  GRADGRADCHECK("norm 2", [](const std::vector<Tensor>& x) { return norm(x[0], 2.0, {1}); }, {leaf(away({2, 3}))});
  GRADGRADCHECK("norm 3", [](const std::vector<Tensor>& x) { return norm(x[0], 3.0); }, {leaf(away({2, 3}))});
  GRADGRADCHECK("norm 1", [](const std::vector<Tensor>& x) { return norm(x[0], 1.0, {0}); }, {leaf(away({2, 3}))});
  GRADGRADCHECK("norm inf", [](const std::vector<Tensor>& x) {
    return norm(x[0], std::numeric_limits<double>::infinity(), {1}); }, {leaf(away({2, 3}))});
  GRADGRADCHECK("logsumexp", [](const std::vector<Tensor>& x) { return logsumexp(x[0], {1}); }, {leaf(normal({2, 3}))});
  GRADGRADCHECK("logsumexp keepdim", [](const std::vector<Tensor>& x) { return logsumexp(x[0], {0, 1}, true); },
                {leaf(normal({2, 3}))});
}

TEST_CASE("in-place ops on non-leaf tensors have correct gradients") {
  manual_seed(10);
  // Each function first makes a non-leaf (x * 1.0): an in-place op on a leaf that requires grad is an error.
  std::vector<std::pair<const char*, Fn>> one = {
      {"add_ scalar", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.add_(2.0); return y * y; }},
      {"sub_ scalar", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.sub_(2.0); return y * y; }},
      {"mul_ scalar", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.mul_(-3.0); return y * x[0]; }},
      {"div_ scalar", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.div_(4.0); return y * x[0]; }},
      {"sin_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 2.0; y.sin_(); return y; }},
      {"exp_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 0.5; y.exp_(); return y; }},
      {"relu_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.relu_(); return y * x[0]; }},
      {"clamp_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.clamp_(-0.5, 0.5); return y * x[0]; }},
      {"clamp_ min only", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.clamp_(0.1, std::nullopt); return y; }},
      {"fill_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.fill_(2.0); return y * x[0]; }},
      {"zero_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.zero_(); return y + x[0]; }},
      {"two in-place ops in a row",
       [](const std::vector<Tensor>& x) { Tensor y = x[0].sin(); y.mul_(x[0]); y.exp_(); return y; }},
  };
  for (auto& [name, f] : one) {
    INFO(name);
    GRADCHECK("contiguous", f, {leaf(away({3, 4}))});
    GRADCHECK("transposed", f, {transposed(away({4, 3}))});
  }
  std::vector<std::pair<const char*, Fn>> two = {
      {"add_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.add_(x[1]); return y * x[0]; }},
      {"add_ alpha", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.add_(x[1], -1.5); return y * y; }},
      {"sub_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.sub_(x[1]); return y * x[1]; }},
      {"sub_ alpha", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.sub_(x[1], 2.5); return y * y; }},
      {"mul_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.mul_(x[1]); return y * x[0]; }},
      {"div_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.div_(x[1]); return y; }},
      {"copy_", [](const std::vector<Tensor>& x) { Tensor y = x[0] * 1.0; y.copy_(x[1]); return y * x[0]; }},
  };
  for (auto& [name, f] : two) {
    INFO(name);
    GRADCHECK("same shape", f, {leaf(away({3, 4})), leaf(away({3, 4}))});
    GRADCHECK("broadcast other [1,4]", f, {leaf(away({3, 4})), leaf(away({1, 4}))});
    GRADCHECK("broadcast other 0-d", f, {leaf(away({2, 3})), leaf(away({}))});
    GRADCHECK("non-contiguous", f, {transposed(away({4, 3})), stepped(away({3, 4}))});
    GRADCHECK("other does not require grad", f, {leaf(away({2, 3})), away({2, 3})});
    GRADCHECK("self does not require grad", f, {away({2, 3}), leaf(away({2, 3}))});
  }
  {
    INFO("second order");
    for (auto& [name, f] : one) {
      std::string n = name;
      if (n.find("relu") != std::string::npos || n.find("clamp") != std::string::npos) continue;
      GRADGRADCHECK(name, f, {leaf(away({2, 3}))});
    }
    for (auto& [name, f] : two) GRADGRADCHECK(name, f, {leaf(away({2, 3})), leaf(away({2, 3}))});
  }
}

TEST_CASE("in-place ops on a view of a non-leaf tensor have correct gradients") {
  manual_seed(11);
  // y = f(x); an in-place op through a view of y; both the view and the base are outputs (only the
  // base for second order: the view's regenerated AsStridedBackward is not twice differentiable).
  auto through = [](std::function<void(Tensor&, const std::vector<Tensor>&)> op,
                    std::function<Tensor(const Tensor&)> make_view, bool with_view = true) {
    return MultiFn([op, make_view, with_view](const std::vector<Tensor>& x) {
      Tensor y = x[0] * x[0];
      Tensor v = make_view(y);
      op(v, x);
      if (!with_view) return std::vector<Tensor>{y};
      return std::vector<Tensor>{y, v};
    });
  };
  std::vector<std::pair<const char*, std::function<Tensor(const Tensor&)>>> views = {
      {"row", [](const Tensor& y) { return y.select(0, 1); }},
      {"columns with step", [](const Tensor& y) { return y.slice(1, 0, 4, 2); }},
      {"transpose", [](const Tensor& y) { return y.t(); }},
      {"view of a view", [](const Tensor& y) { return y.slice(0, 1, 3).slice(1, 1, 4, 2); }},
  };
  std::vector<std::pair<const char*, std::function<void(Tensor&, const std::vector<Tensor>&)>>> inplace = {
      {"add_", [](Tensor& v, const std::vector<Tensor>& x) { v.add_(x[1].sum() * 1.0, 0.5); }},
      {"sub_", [](Tensor& v, const std::vector<Tensor>& x) { v.sub_(x[1].sum()); }},
      {"mul_", [](Tensor& v, const std::vector<Tensor>& x) { v.mul_(x[1].sum()); }},
      {"div_", [](Tensor& v, const std::vector<Tensor>& x) { v.div_(x[1].sum()); }},
      {"mul_ scalar", [](Tensor& v, const std::vector<Tensor>&) { v.mul_(3.0); }},
      {"sin_", [](Tensor& v, const std::vector<Tensor>&) { v.sin_(); }},
      {"exp_", [](Tensor& v, const std::vector<Tensor>&) { v.exp_(); }},
      {"relu_", [](Tensor& v, const std::vector<Tensor>&) { v.relu_(); }},
      {"clamp_", [](Tensor& v, const std::vector<Tensor>&) { v.clamp_(-0.5, 0.7); }},
      {"fill_", [](Tensor& v, const std::vector<Tensor>&) { v.fill_(1.5); }},
      {"copy_", [](Tensor& v, const std::vector<Tensor>& x) { v.copy_(x[1].sum() * 1.0); }},
  };
  for (auto& [vname, mv] : views) {
    INFO("view: " << vname);
    for (auto& [oname, op] : inplace) {
      INFO("op: " << oname);
      GRADCHECK("base and view", through(op, mv), {leaf(away({3, 4})), leaf(uniform({2}, 0.5, 1.0))});
    }
  }
  {
    INFO("backward() (no inputs list) through an in-place op on a view");
    Tensor x = leaf(tensor(std::vector<double>{1, 2, 3, 4}, {2, 2}, F64));
    Tensor c = tensor(std::vector<double>{5, 7}, {2}, F64);
    Tensor y = x * 1.0;
    y.select(0, 1).mul_(c);
    y.sum().backward();
    CHECK(x.grad().to_vector<double>() == std::vector<double>{1, 1, 5, 7});
  }
  {
    INFO("broadcast other through a strided view");
    MultiFn f = [](const std::vector<Tensor>& x) {
      Tensor y = x[0] * x[0];
      Tensor v = y.slice(1, 0, 4, 2);  // [3,2]
      v.mul_(x[1]);                    // [1,2] broadcast
      v.add_(x[1], -0.5);
      return std::vector<Tensor>{y, v};
    };
    GRADCHECK("mul_ and add_ of [1,2] into [3,2] columns", f, {leaf(away({3, 4})), leaf(away({1, 2}))});
  }
  {
    INFO("writes into views of a tensor that does not require grad");
    MultiFn f = [](const std::vector<Tensor>& x) {
      Tensor y = zeros({3, 4}, F64);
      Tensor v = y.slice(1, 0, 4, 2);
      v.copy_(x[0] * 2.0);
      y.select(0, 1).mul_(x[1]);
      return std::vector<Tensor>{y};
    };
    GRADCHECK("copy_ then mul_ through views of zeros", f, {leaf(normal({3, 2})), leaf(normal({4}))});
    GRADGRADCHECK("copy_ then mul_ through views of zeros", f, {leaf(normal({3, 2})), leaf(normal({4}))});
  }
  {
    INFO("copy_ of a tensor into a slice");
    MultiFn f = [](const std::vector<Tensor>& x) {
      Tensor y = x[0].sin();  // sin saves its input, not y, so y may be written
      Tensor v = y.slice(1, 1, 3);
      v.copy_(x[1]);
      return std::vector<Tensor>{y * x[0]};
    };
    GRADCHECK("copy_ [3,2] into columns 1..3", f, {leaf(normal({3, 4})), leaf(normal({3, 2}))});
    GRADCHECK("copy_ broadcast [2] into columns 1..3", f, {leaf(normal({3, 4})), leaf(normal({2}))});
    GRADGRADCHECK("copy_ into a slice", f, {leaf(normal({3, 4})), leaf(normal({3, 2}))});
  }
  {
    INFO("the base's earlier views see the in-place update");
    MultiFn f = [](const std::vector<Tensor>& x) {
      Tensor y = x[0] * 1.0;
      Tensor row = y.select(0, 0);  // taken before the write
      Tensor col = y.select(1, 1);
      col.mul_(x[1]);
      return std::vector<Tensor>{row * 2.0, y};
    };
    GRADCHECK("row after column write", f, {leaf(away({3, 3})), leaf(away({3}))});
  }
  {
    INFO("second order through a view");
    GRADGRADCHECK("mul_ through a slice", through(inplace[2].second, views[1].second, false),
                  {leaf(away({3, 4})), leaf(uniform({2}, 0.5, 1.0))});
    GRADGRADCHECK("exp_ through a row", through(inplace[6].second, views[0].second, false),
                  {leaf(away({3, 4})), leaf(uniform({2}, 0.5, 1.0))});
    GRADGRADCHECK("div_ through a transpose", through(inplace[3].second, views[2].second, false),
                  {leaf(away({3, 4})), leaf(uniform({2}, 0.5, 1.0))});
    GRADGRADCHECK("sin_ through a view of a view", through(inplace[5].second, views[3].second, false),
                  {leaf(away({3, 4})), leaf(uniform({2}, 0.5, 1.0))});
    GRADGRADCHECK("add_ through a row", through(inplace[0].second, views[0].second, false),
                  {leaf(away({3, 4})), leaf(uniform({2}, 0.5, 1.0))});
  }
}
