// graft:: elementwise functions (declared in functional.h): one derivative rule per op, then the
// public functions, which run the ops:: kernel and record the rule.
// Notation: x input, y output, g incoming gradient. Broadcasting and dtype casts of the results are
// undone by the engine (it sums each gradient back to its input's shape).
#include <cmath>
#include <numbers>
#include <optional>
#include <string>

#include "autograd/rules.h"

namespace graft {
using namespace autograd;
using namespace autograd::rules;

namespace {

Tensor zero_where_not(const Tensor& g, const Tensor& mask) { return graft::where(mask, g, graft::zeros_like(g)); }

// ---------------- what the rules keep ----------------
// Unary ops keep their input x or their output y (the op table's `saves` column; neg and sign
// keep nothing).
struct UnarySaved { SavedVariable x, y; };
struct GeluSaved { std::string approximate; SavedVariable x; };
struct PowScalarSaved { double exponent = 1; SavedVariable x; };
struct ClampSaved { std::optional<double> min, max; SavedVariable x; };
struct AlphaSaved { double alpha = 1; };     // a + alpha*b, a - alpha*b
struct ScalarSaved { double value = 1; };    // a * value, a / value
struct BinarySaved { SavedVariable a, b; };  // undefined where the other side needs no gradient
struct PowSaved { SavedVariable a, b, y; };
struct WhereSaved { SavedVariable cond; };
struct MaskSaved { SavedVariable mask; };

// ---------------- the table ----------------
// The op table's unary rules (runtime/op_table/unary.def): d_exp, d_log, ... Each reads g and the
// one tensor its row saves (x or y).
#define GRAFT_UNARY_OP(name, Name, saves, domain, derivative)                               \
  variable_list d_##name(OpNode& n, UnarySaved& s, const variable_list& grads) {            \
    const Tensor& g = grads[0];                                                             \
    Tensor saves = n.unpack(s.saves);                                                       \
    return {derivative};                                                                    \
  }
#include "runtime/op_table/unary.def"

variable_list d_neg(OpNode&, NoSaved&, const variable_list& g) { return {-g[0]}; }
variable_list d_relu(OpNode& n, UnarySaved& s, const variable_list& g) {  // g * (y > 0)
  Tensor y = n.unpack(s.y);
  return {building_graph() ? zero_where_not(g[0], ops::gt(y, 0)) : ops::threshold_backward(g[0], y, 0)};
}
variable_list d_abs(OpNode& n, UnarySaved& s, const variable_list& g) { return {g[0] * graft::sign(n.unpack(s.x))}; }
variable_list d_sign(OpNode&, NoSaved&, const variable_list& g) { return {graft::zeros_like(g[0])}; }
variable_list d_gelu(OpNode& n, GeluSaved& s, const variable_list& g) {
  Tensor x = n.unpack(s.x);
  if (!building_graph()) return {ops::gelu_backward(g[0], x, s.approximate)};
  if (s.approximate == "tanh") {
    const double k = std::sqrt(2.0 / std::numbers::pi), c = 0.044715;
    Tensor t = graft::tanh((x + x * x * x * c) * k);
    Tensor d = (t + 1) * 0.5 + x * (1 - t * t) * (x * x * (3 * c) + 1) * (0.5 * k);
    return {g[0] * d};
  }
  Tensor cdf = (graft::erf(x * (1.0 / std::numbers::sqrt2)) + 1) * 0.5;
  Tensor pdf = graft::exp(x * x * -0.5) * (1.0 / std::sqrt(2 * std::numbers::pi));
  return {g[0] * (cdf + x * pdf)};
}
variable_list d_pow_scalar(OpNode& n, PowScalarSaved& s, const variable_list& g) {  // g * e * x^(e-1)
  if (s.exponent == 0) return {graft::zeros_like(g[0])};
  return {g[0] * graft::pow(n.unpack(s.x), s.exponent - 1) * s.exponent};
}
variable_list d_clamp(OpNode& n, ClampSaved& s, const variable_list& g) {  // g where min <= x <= max
  Tensor x = n.unpack(s.x);
  Tensor mask = ops::ones(x.sizes(), kBool, x.device());
  if (s.min) mask = ops::logical_and(mask, ops::ge(x, *s.min));
  if (s.max) mask = ops::logical_and(mask, ops::le(x, *s.max));
  return {zero_where_not(g[0], mask)};
}

variable_list d_add(OpNode& n, AlphaSaved& s, const variable_list& g) {  // a + alpha*b
  return {g[0], n.needs(1) ? (s.alpha == 1 ? g[0] : g[0] * s.alpha) : Tensor()};
}
variable_list d_sub(OpNode& n, AlphaSaved& s, const variable_list& g) {  // a - alpha*b
  return {g[0], n.needs(1) ? g[0] * -s.alpha : Tensor()};
}
variable_list d_add_scalar(OpNode&, NoSaved&, const variable_list& g) { return {g[0]}; }
variable_list d_mul(OpNode& n, BinarySaved& s, const variable_list& g) {
  return {n.needs(0) ? g[0] * n.unpack(s.b) : Tensor(), n.needs(1) ? g[0] * n.unpack(s.a) : Tensor()};
}
variable_list d_mul_scalar(OpNode&, ScalarSaved& s, const variable_list& g) { return {g[0] * s.value}; }
variable_list d_div(OpNode& n, BinarySaved& s, const variable_list& g) {  // g/b, -g*a/b^2
  Tensor b = n.unpack(s.b);
  return {n.needs(0) ? g[0] / b : Tensor(), n.needs(1) ? -(g[0] * n.unpack(s.a)) / (b * b) : Tensor()};
}
variable_list d_div_scalar(OpNode&, ScalarSaved& s, const variable_list& g) { return {g[0] * (1.0 / s.value)}; }
variable_list d_pow(OpNode& n, PowSaved& s, const variable_list& g) {  // g*b*a^(b-1), g*y*log(a) (0 where a == 0)
  Tensor a = n.unpack(s.a), b = n.unpack(s.b);
  Tensor ga, gb;
  if (n.needs(0)) ga = g[0] * b * graft::pow(a, b - 1);
  if (n.needs(1)) {
    Tensor y = n.unpack(s.y);
    gb = graft::where(ops::eq(a, 0), graft::zeros_like(y), g[0] * y * graft::log(a));
  }
  return {ga, gb};
}
// Ties split the gradient evenly, as PyTorch's maximum/minimum.
variable_list d_maximum(OpNode& n, BinarySaved& s, const variable_list& g) {
  Tensor a = n.unpack(s.a), b = n.unpack(s.b);
  Tensor half = g[0] * 0.5, zero = graft::zeros_like(g[0]);
  Tensor tie = ops::eq(a, b);
  return {n.needs(0) ? graft::where(ops::gt(a, b), g[0], graft::where(tie, half, zero)) : Tensor(),
          n.needs(1) ? graft::where(ops::gt(b, a), g[0], graft::where(tie, half, zero)) : Tensor()};
}
variable_list d_minimum(OpNode& n, BinarySaved& s, const variable_list& g) {
  Tensor a = n.unpack(s.a), b = n.unpack(s.b);
  Tensor half = g[0] * 0.5, zero = graft::zeros_like(g[0]);
  Tensor tie = ops::eq(a, b);
  return {n.needs(0) ? graft::where(ops::lt(a, b), g[0], graft::where(tie, half, zero)) : Tensor(),
          n.needs(1) ? graft::where(ops::lt(b, a), g[0], graft::where(tie, half, zero)) : Tensor()};
}
variable_list d_where(OpNode& n, WhereSaved& s, const variable_list& g) {  // cond, a, b
  Tensor c = n.unpack(s.cond), zero = graft::zeros_like(g[0]);
  return {Tensor(), n.needs(1) ? graft::where(c, g[0], zero) : Tensor(),
          n.needs(2) ? graft::where(c, zero, g[0]) : Tensor()};
}
variable_list d_masked_fill(OpNode& n, MaskSaved& s, const variable_list& g) {  // x, mask
  return {graft::masked_fill(g[0], n.unpack(s.mask), 0), Tensor()};
}
// In-place ops whose result no longer depends on the old value pass nothing back to it.
variable_list d_overwrite(OpNode&, NoSaved&, const variable_list&) { return {Tensor()}; }
variable_list d_copy(OpNode& n, NoSaved&, const variable_list& g) {  // dst, src
  return {Tensor(), n.needs(1) ? graft::to(g[0], n.inputs[1].device) : Tensor()};
}

// ---------------- forward wrappers ----------------
// A unary op keeps its input x, its output y or nothing (Slot null).
template <Tensor (*Op)(const Tensor&), SavedVariable UnarySaved::*Slot>
Tensor unary(const char* name, Rule<UnarySaved> rule, const Tensor& x) {
  Tensor y = Op(x);
  if (auto n = record_op(name, rule, {&x})) {
    set_output(n, y);
    if constexpr (Slot == &UnarySaved::y) n->save(n->saved.y, y, true);
    else n->save(n->saved.x, x);
  }
  return y;
}
template <Tensor (*Op)(const Tensor&)>
Tensor unary(const char* name, Rule<NoSaved> rule, const Tensor& x) {
  Tensor y = Op(x);
  if (auto n = record_op(name, rule, {&x})) set_output(n, y);
  return y;
}

// In-place wrapper: records `rule` against the old history of `self`, lets `save_before` fill the
// node (it sees the old value of self), runs the kernel, then rebases.
template <class Saved, class Kernel, class Save>
Tensor& inplace(const char* op, const char* name, Rule<Saved> rule, Tensor& self,
                std::initializer_list<const Tensor*> ins, Kernel&& kernel, Save&& save_before) {
  check_inplace(self, op);
  auto n = record_op(name, rule, ins);
  if (n) save_before(*n);
  kernel();
  if (n) {
    n->add_input_metadata(self);
    rebase_history(self, n);
  }
  return self;
}
constexpr auto nothing = [](auto&) {};

}  // namespace

// The op table's unary ops: graft::exp, graft::log, ... record "ExpBackward", ... with their rule.
#define GRAFT_UNARY_OP(name, Name, saves, ...) \
  Tensor name(const Tensor& x) { return unary<ops::name, &UnarySaved::saves>(#Name "Backward", d_##name, x); }
#include "runtime/op_table/unary.def"

Tensor neg(const Tensor& x) { return unary<ops::neg>("NegBackward", d_neg, x); }
Tensor relu(const Tensor& x) { return unary<ops::relu, &UnarySaved::y>("ReluBackward", d_relu, x); }
Tensor abs(const Tensor& x) { return unary<ops::abs, &UnarySaved::x>("AbsBackward", d_abs, x); }
Tensor sign(const Tensor& x) { return unary<ops::sign>("SignBackward", d_sign, x); }
Tensor gelu(const Tensor& x, const std::string& approximate) {
  Tensor y = ops::gelu(x, approximate);
  if (auto n = record_op("GeluBackward", d_gelu, {&x})) {
    set_output(n, y);
    n->saved.approximate = approximate;
    n->save(n->saved.x, x);
  }
  return y;
}
Tensor pow(const Tensor& x, Scalar e) {
  Tensor y = ops::pow(x, e);
  if (auto n = record_op("PowBackward", d_pow_scalar, {&x})) {
    set_output(n, y);
    n->saved.exponent = e.to_double();
    n->save(n->saved.x, x);
  }
  return y;
}
Tensor clamp(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  Tensor y = ops::clamp(x, lo, hi);
  if (auto n = record_op("ClampBackward", d_clamp, {&x})) {
    set_output(n, y);
    n->saved.min = lo ? std::optional<double>(lo->to_double()) : std::nullopt;
    n->saved.max = hi ? std::optional<double>(hi->to_double()) : std::nullopt;
    n->save(n->saved.x, x);
  }
  return y;
}

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  Tensor y = ops::add(a, b, alpha);
  if (auto n = record_op("AddBackward", d_add, {&a, &b})) {
    set_output(n, y);
    n->saved.alpha = alpha.to_double();
  }
  return y;
}
Tensor add(const Tensor& a, Scalar b) {
  Tensor y = ops::add(a, b);
  if (auto n = record_op("AddBackward", d_add_scalar, {&a})) set_output(n, y);
  return y;
}
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  Tensor y = ops::sub(a, b, alpha);
  if (auto n = record_op("SubBackward", d_sub, {&a, &b})) {
    set_output(n, y);
    n->saved.alpha = alpha.to_double();
  }
  return y;
}
Tensor sub(const Tensor& a, Scalar b) {
  Tensor y = ops::sub(a, b);
  if (auto n = record_op("SubBackward", d_add_scalar, {&a})) set_output(n, y);
  return y;
}
Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor y = ops::mul(a, b);
  if (auto n = record_op("MulBackward", d_mul, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, n->has_edge(1) ? a : Tensor());
    n->save(n->saved.b, n->has_edge(0) ? b : Tensor());
  }
  return y;
}
Tensor mul(const Tensor& a, Scalar b) {
  Tensor y = ops::mul(a, b);
  if (auto n = record_op("MulBackward", d_mul_scalar, {&a})) {
    set_output(n, y);
    n->saved.value = b.to_double();
  }
  return y;
}
Tensor div(const Tensor& a, const Tensor& b) {
  Tensor y = ops::div(a, b);
  if (auto n = record_op("DivBackward", d_div, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, n->has_edge(1) ? a : Tensor());
    n->save(n->saved.b, b);
  }
  return y;
}
Tensor div(const Tensor& a, Scalar b) {
  Tensor y = ops::div(a, b);
  if (auto n = record_op("DivBackward", d_div_scalar, {&a})) {
    set_output(n, y);
    n->saved.value = b.to_double();
  }
  return y;
}
Tensor pow(const Tensor& a, const Tensor& b) {
  Tensor y = ops::pow(a, b);
  if (auto n = record_op("PowBackward", d_pow, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, a);
    n->save(n->saved.b, b);
    n->save(n->saved.y, n->has_edge(1) ? y : Tensor(), true);
  }
  return y;
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  Tensor y = ops::maximum(a, b);
  if (auto n = record_op("MaximumBackward", d_maximum, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, a);
    n->save(n->saved.b, b);
  }
  return y;
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  Tensor y = ops::minimum(a, b);
  if (auto n = record_op("MinimumBackward", d_minimum, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, a);
    n->save(n->saved.b, b);
  }
  return y;
}
Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  Tensor y = ops::where(c, a, b);
  if (auto n = record_op("WhereBackward", d_where, {&c, &a, &b})) {
    set_output(n, y);
    n->save(n->saved.cond, c);
  }
  return y;
}
Tensor masked_fill(const Tensor& x, const Tensor& m, Scalar v) {
  Tensor y = ops::masked_fill(x, m, v);
  if (auto n = record_op("MaskedFillBackward", d_masked_fill, {&x, &m})) {
    set_output(n, y);
    n->save(n->saved.mask, m);
  }
  return y;
}
Tensor gt(const Tensor& a, const Tensor& b) { return ops::gt(a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return ops::lt(a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return ops::ge(a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return ops::le(a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return ops::eq(a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return ops::ne(a, b); }

// ---------------- in-place ----------------
Tensor& add_(Tensor& a, const Tensor& b, Scalar alpha) {
  return inplace("add_", "AddBackward", d_add, a, {&a, &b}, [&] { ops::add_(a, b, alpha); },
                 [&](auto& n) { n.saved.alpha = alpha.to_double(); });
}
Tensor& add_(Tensor& a, Scalar b) {
  return inplace("add_", "AddBackward", d_add_scalar, a, {&a}, [&] { ops::add_(a, b); }, nothing);
}
Tensor& sub_(Tensor& a, const Tensor& b, Scalar alpha) {
  return inplace("sub_", "SubBackward", d_sub, a, {&a, &b}, [&] { ops::sub_(a, b, alpha); },
                 [&](auto& n) { n.saved.alpha = alpha.to_double(); });
}
Tensor& sub_(Tensor& a, Scalar b) {
  return inplace("sub_", "SubBackward", d_add_scalar, a, {&a}, [&] { ops::sub_(a, b); }, nothing);
}
Tensor& mul_(Tensor& a, const Tensor& b) {
  return inplace("mul_", "MulBackward", d_mul, a, {&a, &b}, [&] { ops::mul_(a, b); }, [&](auto& n) {
    // The old value of a, before the kernel overwrites it: a recorded clone, so that create_graph
    // differentiates through it.
    n.save(n.saved.a, n.has_edge(1) ? graft::clone(a) : Tensor());
    n.save(n.saved.b, n.has_edge(0) ? b : Tensor());
  });
}
Tensor& mul_(Tensor& a, Scalar b) {
  return inplace("mul_", "MulBackward", d_mul_scalar, a, {&a}, [&] { ops::mul_(a, b); },
                 [&](auto& n) { n.saved.value = b.to_double(); });
}
Tensor& div_(Tensor& a, const Tensor& b) {
  return inplace("div_", "DivBackward", d_div, a, {&a, &b}, [&] { ops::div_(a, b); }, [&](auto& n) {
    n.save(n.saved.a, n.has_edge(1) ? graft::clone(a) : Tensor());
    n.save(n.saved.b, b);
  });
}
Tensor& div_(Tensor& a, Scalar b) {
  return inplace("div_", "DivBackward", d_div_scalar, a, {&a}, [&] { ops::div_(a, b); },
                 [&](auto& n) { n.saved.value = b.to_double(); });
}
Tensor& sin_(Tensor& x) {
  return inplace("sin_", "SinBackward", d_sin, x, {&x}, [&] { ops::sin_(x); },
                 [&](auto& n) { n.save(n.saved.x, graft::clone(x)); });
}
Tensor& exp_(Tensor& x) {
  // exp's rule needs the result: saved after the kernel as a copy, marked as this node's output so
  // that create_graph differentiates through it.
  check_inplace(x, "exp_");
  auto n = record_op("ExpBackward", d_exp, {&x});
  ops::exp_(x);
  if (n) {
    n->save(n->saved.y, ops::clone(x), true);
    n->add_input_metadata(x);
    rebase_history(x, n);
  }
  return x;
}
Tensor& relu_(Tensor& x) {
  check_inplace(x, "relu_");
  auto n = record_op("ReluBackward", d_relu, {&x});
  ops::relu_(x);
  if (n) {
    n->save(n->saved.y, ops::clone(x));
    n->add_input_metadata(x);
    rebase_history(x, n);
  }
  return x;
}
Tensor& zero_(Tensor& x) {
  return inplace("zero_", "ZeroBackward", d_overwrite, x, {&x}, [&] { ops::zero_(x); }, nothing);
}
Tensor& fill_(Tensor& x, Scalar v) {
  return inplace("fill_", "FillBackward", d_overwrite, x, {&x}, [&] { ops::fill_(x, v); }, nothing);
}
Tensor& normal_(Tensor& x, double mean, double std) {
  return inplace("normal_", "NormalBackward", d_overwrite, x, {&x}, [&] { ops::normal_(x, mean, std); },
                 nothing);
}
Tensor& uniform_(Tensor& x, double from, double to) {
  return inplace("uniform_", "UniformBackward", d_overwrite, x, {&x}, [&] { ops::uniform_(x, from, to); },
                 nothing);
}
Tensor& copy_(Tensor& dst, const Tensor& src, bool non_blocking) {
  return inplace("copy_", "CopyBackwards", d_copy, dst, {&dst, &src}, [&] { ops::copy_(dst, src, non_blocking); },
                 nothing);
}
Tensor& clamp_(Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return inplace("clamp_", "ClampBackward", d_clamp, x, {&x}, [&] { ops::clamp_(x, lo, hi); }, [&](auto& n) {
    n.saved.min = lo ? std::optional<double>(lo->to_double()) : std::nullopt;
    n.saved.max = hi ? std::optional<double>(hi->to_double()) : std::nullopt;
    n.save(n.saved.x, ops::clone(x));
  });
}

}  // namespace graft
