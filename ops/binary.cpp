// Elementwise binary and ternary ops on CPU: arithmetic, comparisons, logical ops, where, clamp,
// masked_fill and the in-place updates optimizers use (add_, addcmul_, addcdiv_, lerp_).
//
// Checks, type promotion and the iterator drivers are the shared plan's (ops/binary_plan.h); this
// file is the CPU's arithmetic.
#include <cmath>
#include <initializer_list>
#include <optional>
#include <type_traits>

#include "ops/binary_plan.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/tensor_iterator.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

// ---- drivers ----

// body.template operator()<T>(it) for the C++ type T of `t`.
template <class Body>
void run_typed(DType t, const char* op, TensorIterator& it, const Body& body) {
  dispatch_dtype(t, op, [&]<class T>() { body.template operator()<T>(it); });
}

// The shared drivers (binary_plan.h) with the CPU's typed loop.
template <class Body>
Tensor arith(const char* op, DType r, std::initializer_list<Tensor> inputs, const Body& body) {
  return elementwise_new(op, r, inputs, [&](TensorIterator& it) { run_typed(r, op, it, body); });
}
template <class Body>
Tensor arith_(const char* op, const Tensor& self, DType r, std::initializer_list<Tensor> inputs, const Body& body) {
  return elementwise_inplace(op, self, r, inputs, [&](TensorIterator& it) { run_typed(r, op, it, body); });
}

// ---- elementwise functions ----

template <class T> T max_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? b : a;
}
template <class T> T min_nan(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b < a ? b : a;
}


// ---- bodies: body.template operator()<T>(it) runs the loop for dtype T ----

auto add_body(Scalar alpha) {
  return [alpha]<class T>(TensorIterator& it) {
    if constexpr (std::is_same_v<T, bool>) {
      bool al = alpha.to<bool>();
      it.for_each(elementwise_loop<bool, bool, bool>([al](bool a, bool b) { return a || (al && b); }));
    } else {
      T al = alpha.to<T>();
      if (al == T(1)) it.for_each(elementwise_loop<T, T, T>([](T a, T b) { return a + b; }));
      else it.for_each(elementwise_loop<T, T, T>([al](T a, T b) { return a + al * b; }));
    }
  };
}

auto sub_body(Scalar alpha) {
  return [alpha]<class T>(TensorIterator& it) {
    if constexpr (!std::is_same_v<T, bool>) {  // bool was refused by check_sub
      T al = alpha.to<T>();
      if (al == T(1)) it.for_each(elementwise_loop<T, T, T>([](T a, T b) { return a - b; }));
      else it.for_each(elementwise_loop<T, T, T>([al](T a, T b) { return a - al * b; }));
    }
  };
}

auto mul_body() {
  return []<class T>(TensorIterator& it) {
    if constexpr (std::is_same_v<T, bool>)
      it.for_each(elementwise_loop<bool, bool, bool>([](bool a, bool b) { return a && b; }));
    else
      it.for_each(elementwise_loop<T, T, T>([](T a, T b) { return a * b; }));
  };
}

auto div_body() {
  return []<class T>(TensorIterator& it) {
    if constexpr (std::is_floating_point_v<T>)  // true division always runs in floating point
      it.for_each(elementwise_loop<T, T, T>([](T a, T b) { return a / b; }));
  };
}

// x op s with a Scalar captured by value (no tensor is made for it).
template <class F>
auto scalar_body(Scalar s, F f) {
  return [s, f]<class T>(TensorIterator& it) {
    T v = s.to<T>();
    it.for_each(elementwise_loop<T, T>([v, f](T a) { return static_cast<T>(f(a, v)); }));
  };
}

auto add_scalar_body(Scalar s) {
  return scalar_body(s, [](auto a, auto v) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a || v;
    else return a + v;
  });
}
auto sub_scalar_body(Scalar s) {
  return scalar_body(s, [](auto a, auto v) { return a - v; });
}
auto mul_scalar_body(Scalar s) {
  return scalar_body(s, [](auto a, auto v) {
    if constexpr (std::is_same_v<decltype(a), bool>) return a && v;
    else return a * v;
  });
}
auto div_scalar_body(Scalar s) {
  return [s]<class T>(TensorIterator& it) {
    if constexpr (std::is_floating_point_v<T>) {
      T v = s.to<T>();
      it.for_each(elementwise_loop<T, T>([v](T a) { return a / v; }));
    }
  };
}

// ---- arithmetic ----

Tensor add_cpu(const Tensor& a, const Tensor& b, Scalar alpha) {
  return arith("add", add_dtype("add", a, b, alpha), {a, b}, add_body(alpha));
}
Tensor add_inplace_cpu(const Tensor& a, const Tensor& b, Scalar alpha) {
  return arith_("add_", a, add_dtype("add_", a, b, alpha), {a, b}, add_body(alpha));
}
Tensor sub_cpu(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = sub_dtype("sub", a, b, alpha);
  return arith("sub", r, {a, b}, sub_body(alpha));
}
Tensor sub_inplace_cpu(const Tensor& a, const Tensor& b, Scalar alpha) {
  DType r = sub_dtype("sub_", a, b, alpha);
  return arith_("sub_", a, r, {a, b}, sub_body(alpha));
}
Tensor mul_cpu(const Tensor& a, const Tensor& b) {
  return arith("mul", promote_dtype("mul", a, b), {a, b}, mul_body());
}
Tensor mul_inplace_cpu(const Tensor& a, const Tensor& b) {
  return arith_("mul_", a, promote_dtype("mul_", a, b), {a, b}, mul_body());
}
Tensor div_cpu(const Tensor& a, const Tensor& b) {
  return arith("div", div_dtype("div", a, b), {a, b}, div_body());
}
Tensor div_inplace_cpu(const Tensor& a, const Tensor& b) {
  return arith_("div_", a, div_dtype("div_", a, b), {a, b}, div_body());
}

Tensor add_scalar_cpu(const Tensor& a, Scalar b) {
  return arith("add", scalar_dtype("add", a, b), {a}, add_scalar_body(b));
}
Tensor add_inplace_scalar_cpu(const Tensor& a, Scalar b) {
  return arith_("add_", a, scalar_dtype("add_", a, b), {a}, add_scalar_body(b));
}
Tensor sub_scalar_cpu(const Tensor& a, Scalar b) {
  return arith("sub", sub_scalar_dtype("sub", a, b), {a}, sub_scalar_body(b));
}
Tensor sub_inplace_scalar_cpu(const Tensor& a, Scalar b) {
  return arith_("sub_", a, sub_scalar_dtype("sub_", a, b), {a}, sub_scalar_body(b));
}
Tensor rsub_cpu(const Tensor& a, Scalar b) {
  return arith("rsub", sub_scalar_dtype("rsub", a, b), {a}, scalar_body(b, [](auto x, auto v) { return v - x; }));
}
Tensor mul_scalar_cpu(const Tensor& a, Scalar b) {
  return arith("mul", scalar_dtype("mul", a, b), {a}, mul_scalar_body(b));
}
Tensor mul_inplace_scalar_cpu(const Tensor& a, Scalar b) {
  return arith_("mul_", a, scalar_dtype("mul_", a, b), {a}, mul_scalar_body(b));
}
Tensor div_scalar_cpu(const Tensor& a, Scalar b) {
  return arith("div", div_scalar_dtype("div", a, b), {a}, div_scalar_body(b));
}
Tensor div_inplace_scalar_cpu(const Tensor& a, Scalar b) {
  return arith_("div_", a, div_scalar_dtype("div_", a, b), {a}, div_scalar_body(b));
}
Tensor rdiv_cpu(const Tensor& a, Scalar b) {
  return arith("rdiv", div_scalar_dtype("rdiv", a, b), {a}, [b]<class T>(TensorIterator& it) {
    if constexpr (std::is_floating_point_v<T>) {
      T v = b.to<T>();
      it.for_each(elementwise_loop<T, T>([v](T x) { return v / x; }));
    }
  });
}

Tensor pow_cpu(const Tensor& a, const Tensor& b) {
  DType r = promote_dtype("pow", a, b);
  GRAFT_CHECK(r != kBool, "pow: not implemented for bool tensors (got ", describe(a), " and ", describe(b), ")");
  return arith("pow", r, {a, b}, []<class T>(TensorIterator& it) {
    if constexpr (std::is_floating_point_v<T>)
      it.for_each(elementwise_loop<T, T, T>([](T x, T e) { return std::pow(x, e); }), kGrainSize / 4);
    else if constexpr (std::is_same_v<T, int64_t>)
      it.for_each(elementwise_loop<T, T, T>([](T x, T e) { return int_pow_signed(x, e); }));
  });
}

Tensor maximum_cpu(const Tensor& a, const Tensor& b) {
  return arith("maximum", promote_dtype("maximum", a, b), {a, b}, []<class T>(TensorIterator& it) {
    it.for_each(elementwise_loop<T, T, T>([](T x, T y) { return max_nan(x, y); }));
  });
}
Tensor minimum_cpu(const Tensor& a, const Tensor& b) {
  return arith("minimum", promote_dtype("minimum", a, b), {a, b}, []<class T>(TensorIterator& it) {
    it.for_each(elementwise_loop<T, T, T>([](T x, T y) { return min_nan(x, y); }));
  });
}

// ---- comparisons and logical ops: bool results, compared in the promoted dtype ----

template <class Cmp>
Tensor compare(const char* op, const Tensor& a, const Tensor& b, Cmp cmp) {
  DType c = compare_dtype(op, a, b);
  TensorIterator it(op);
  it.add_input(a, c).add_input(b, c).build(kBool);
  dispatch_dtype(c, op, [&]<class T>() {
    it.for_each(elementwise_loop<bool, T, T>([cmp](T x, T y) { return static_cast<bool>(cmp(x, y)); }));
  });
  return it.output();
}

template <class Cmp>
Tensor compare_scalar(const char* op, const Tensor& a, Scalar s, Cmp cmp) {
  DType c = compare_scalar_dtype(op, a, s);
  TensorIterator it(op);
  it.add_input(a, c).build(kBool);
  dispatch_dtype(c, op, [&]<class T>() {
    T v = s.to<T>();
    it.for_each(elementwise_loop<bool, T>([cmp, v](T x) { return static_cast<bool>(cmp(x, v)); }));
  });
  return it.output();
}

#define GRAFT_COMPARISON(name, expr)                                                                   \
  Tensor name##_cpu(const Tensor& a, const Tensor& b) {                                                \
    return compare(#name, a, b, [](auto x, auto y) { return expr; });                                  \
  }                                                                                                    \
  Tensor name##_scalar_cpu(const Tensor& a, Scalar b) {                                                \
    return compare_scalar(#name, a, b, [](auto x, auto y) { return expr; });                           \
  }
GRAFT_COMPARISON(gt, x > y)
GRAFT_COMPARISON(lt, x < y)
GRAFT_COMPARISON(ge, x >= y)
GRAFT_COMPARISON(le, x <= y)
GRAFT_COMPARISON(eq, x == y)
GRAFT_COMPARISON(ne, x != y)
#undef GRAFT_COMPARISON

Tensor logical_and_cpu(const Tensor& a, const Tensor& b) {
  return compare("logical_and", a, b, [](auto x, auto y) { return x != 0 && y != 0; });
}
Tensor logical_or_cpu(const Tensor& a, const Tensor& b) {
  return compare("logical_or", a, b, [](auto x, auto y) { return x != 0 || y != 0; });
}

// ---- selection ----

Tensor where_cpu(const Tensor& cond, const Tensor& a, const Tensor& b) {
  DType r = where_dtype(cond, a, b);
  TensorIterator it("where");
  it.add_input(cond).add_input(a, r).add_input(b, r).build(r);
  dispatch_dtype(r, "where", [&]<class T>() {
    it.for_each(elementwise_loop<T, bool, T, T>([](bool c, T x, T y) { return c ? x : y; }));
  });
  return it.output();
}

Tensor masked_fill_cpu(const Tensor& x, const Tensor& mask, Scalar value) {
  check_masked_fill(x, mask);
  TensorIterator it("masked_fill");
  it.add_input(x).add_input(mask).build(x.dtype());
  dispatch_dtype(x.dtype(), "masked_fill", [&]<class T>() {
    T v = value.to<T>();
    it.for_each(elementwise_loop<T, T, bool>([v](T a, bool m) { return m ? v : a; }));
  });
  return it.output();
}

// ---- clamp ----

auto clamp_body(std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return [lo, hi]<class T>(TensorIterator& it) {
    // min(max(x, lo), hi): NaN in x stays NaN, and lo > hi gives hi everywhere, as torch.clamp.
    if (lo && hi) {
      T l = lo->to<T>(), h = hi->to<T>();
      it.for_each(elementwise_loop<T, T>([l, h](T v) {
        T m = v < l ? l : v;
        return m > h ? h : m;
      }));
    } else if (lo) {
      T l = lo->to<T>();
      it.for_each(elementwise_loop<T, T>([l](T v) { return v < l ? l : v; }));
    } else {
      T h = hi->to<T>();
      it.for_each(elementwise_loop<T, T>([h](T v) { return v > h ? h : v; }));
    }
  };
}

Tensor clamp_cpu(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return arith("clamp", clamp_dtype("clamp", x, lo, hi), {x}, clamp_body(lo, hi));
}
Tensor clamp_inplace_cpu(const Tensor& x, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  return arith_("clamp_", x, clamp_dtype("clamp_", x, lo, hi), {x}, clamp_body(lo, hi));
}

// ---- optimizer updates ----

Tensor addcmul_inplace_cpu(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  DType r = addcmul_dtype(self, a, b, value);
  return arith_("addcmul_", self, r, {self, a, b}, [value]<class T>(TensorIterator& it) {
    if constexpr (!std::is_same_v<T, bool>) {
      T v = value.to<T>();
      it.for_each(elementwise_loop<T, T, T, T>([v](T s, T x, T y) { return s + v * x * y; }));
    }
  });
}

Tensor addcdiv_inplace_cpu(const Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  DType r = addcdiv_dtype(self, a, b, value);
  return arith_("addcdiv_", self, r, {self, a, b}, [value]<class T>(TensorIterator& it) {
    if constexpr (std::is_floating_point_v<T>) {
      T v = value.to<T>();
      it.for_each(elementwise_loop<T, T, T, T>([v](T s, T x, T y) { return s + v * x / y; }));
    }
  });
}

Tensor lerp_inplace_cpu(const Tensor& self, const Tensor& end, Scalar weight) {
  check_lerp(self, end);
  return arith_("lerp_", self, self.dtype(), {self, end}, [weight]<class T>(TensorIterator& it) {
    if constexpr (std::is_floating_point_v<T>) {
      T w = weight.to<T>();
      // Interpolating from the nearer end keeps lerp exact at w = 0 and w = 1.
      if (std::abs(w) < T(0.5))
        it.for_each(elementwise_loop<T, T, T>([w](T s, T e) { return s + w * (e - s); }));
      else
        it.for_each(elementwise_loop<T, T, T>([w](T s, T e) { return e - (e - s) * (T(1) - w); }));
    }
  });
}

}  // namespace

GRAFT_DEFINE_OP("add.Tensor(Tensor self, Tensor other, Scalar alpha) -> Tensor");
GRAFT_DEFINE_OP("add.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("sub.Tensor(Tensor self, Tensor other, Scalar alpha) -> Tensor");
GRAFT_DEFINE_OP("sub.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("rsub.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("mul.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("mul.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("div.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("div.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("rdiv.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor");
GRAFT_DEFINE_OP("maximum(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("minimum(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("gt.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("lt.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("ge.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("le.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("eq.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("ne.Tensor(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("gt.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("lt.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("ge.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("le.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("eq.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("ne.Scalar(Tensor self, Scalar other) -> Tensor");
GRAFT_DEFINE_OP("logical_and(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("logical_or(Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("where.self(Tensor condition, Tensor self, Tensor other) -> Tensor");
GRAFT_DEFINE_OP("clamp(Tensor self, Scalar? min, Scalar? max) -> Tensor");
GRAFT_DEFINE_OP("masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor");
GRAFT_DEFINE_OP("add_.Tensor(Tensor(a!) self, Tensor other, Scalar alpha) -> Tensor(a!)");
GRAFT_DEFINE_OP("add_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)");
GRAFT_DEFINE_OP("sub_.Tensor(Tensor(a!) self, Tensor other, Scalar alpha) -> Tensor(a!)");
GRAFT_DEFINE_OP("sub_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)");
GRAFT_DEFINE_OP("mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
GRAFT_DEFINE_OP("mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)");
GRAFT_DEFINE_OP("div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
GRAFT_DEFINE_OP("div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)");
GRAFT_DEFINE_OP("clamp_(Tensor(a!) self, Scalar? min, Scalar? max) -> Tensor(a!)");
GRAFT_DEFINE_OP("addcmul_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, Scalar value) -> Tensor(a!)");
GRAFT_DEFINE_OP("addcdiv_(Tensor(a!) self, Tensor tensor1, Tensor tensor2, Scalar value) -> Tensor(a!)");
GRAFT_DEFINE_OP("lerp_.Scalar(Tensor(a!) self, Tensor end, Scalar weight) -> Tensor(a!)");

GRAFT_KERNEL("add.Tensor", CPU, add_cpu);
GRAFT_KERNEL("add.Scalar", CPU, add_scalar_cpu);
GRAFT_KERNEL("sub.Tensor", CPU, sub_cpu);
GRAFT_KERNEL("sub.Scalar", CPU, sub_scalar_cpu);
GRAFT_KERNEL("rsub.Scalar", CPU, rsub_cpu);
GRAFT_KERNEL("mul.Tensor", CPU, mul_cpu);
GRAFT_KERNEL("mul.Scalar", CPU, mul_scalar_cpu);
GRAFT_KERNEL("div.Tensor", CPU, div_cpu);
GRAFT_KERNEL("div.Scalar", CPU, div_scalar_cpu);
GRAFT_KERNEL("rdiv.Scalar", CPU, rdiv_cpu);
GRAFT_KERNEL("pow.Tensor_Tensor", CPU, pow_cpu);
GRAFT_KERNEL("maximum", CPU, maximum_cpu);
GRAFT_KERNEL("minimum", CPU, minimum_cpu);
GRAFT_KERNEL("gt.Tensor", CPU, gt_cpu);
GRAFT_KERNEL("lt.Tensor", CPU, lt_cpu);
GRAFT_KERNEL("ge.Tensor", CPU, ge_cpu);
GRAFT_KERNEL("le.Tensor", CPU, le_cpu);
GRAFT_KERNEL("eq.Tensor", CPU, eq_cpu);
GRAFT_KERNEL("ne.Tensor", CPU, ne_cpu);
GRAFT_KERNEL("gt.Scalar", CPU, gt_scalar_cpu);
GRAFT_KERNEL("lt.Scalar", CPU, lt_scalar_cpu);
GRAFT_KERNEL("ge.Scalar", CPU, ge_scalar_cpu);
GRAFT_KERNEL("le.Scalar", CPU, le_scalar_cpu);
GRAFT_KERNEL("eq.Scalar", CPU, eq_scalar_cpu);
GRAFT_KERNEL("ne.Scalar", CPU, ne_scalar_cpu);
GRAFT_KERNEL("logical_and", CPU, logical_and_cpu);
GRAFT_KERNEL("logical_or", CPU, logical_or_cpu);
GRAFT_KERNEL("where.self", CPU, where_cpu);
GRAFT_KERNEL("clamp", CPU, clamp_cpu);
GRAFT_KERNEL("masked_fill.Scalar", CPU, masked_fill_cpu);
GRAFT_KERNEL("add_.Tensor", CPU, add_inplace_cpu);
GRAFT_KERNEL("add_.Scalar", CPU, add_inplace_scalar_cpu);
GRAFT_KERNEL("sub_.Tensor", CPU, sub_inplace_cpu);
GRAFT_KERNEL("sub_.Scalar", CPU, sub_inplace_scalar_cpu);
GRAFT_KERNEL("mul_.Tensor", CPU, mul_inplace_cpu);
GRAFT_KERNEL("mul_.Scalar", CPU, mul_inplace_scalar_cpu);
GRAFT_KERNEL("div_.Tensor", CPU, div_inplace_cpu);
GRAFT_KERNEL("div_.Scalar", CPU, div_inplace_scalar_cpu);
GRAFT_KERNEL("clamp_", CPU, clamp_inplace_cpu);
GRAFT_KERNEL("addcmul_", CPU, addcmul_inplace_cpu);
GRAFT_KERNEL("addcdiv_", CPU, addcdiv_inplace_cpu);
GRAFT_KERNEL("lerp_.Scalar", CPU, lerp_inplace_cpu);

}  // namespace kernels

namespace ops {

#define GRAFT_BINARY_OP(fn, name)                     \
  Tensor fn(const Tensor& a, const Tensor& b) {       \
    GRAFT_OP_HANDLE(op, name);                        \
    return call_op(op, a, b)[0];                      \
  }
#define GRAFT_SCALAR_OP(fn, name)                     \
  Tensor fn(const Tensor& a, Scalar b) {              \
    GRAFT_OP_HANDLE(op, name);                        \
    return call_op(op, a, b)[0];                      \
  }
#define GRAFT_BINARY_INPLACE_OP(fn, name)             \
  Tensor& fn(Tensor& a, const Tensor& b) {            \
    GRAFT_OP_HANDLE(op, name);                        \
    call_op(op, a, b);                                \
    return a;                                         \
  }
#define GRAFT_SCALAR_INPLACE_OP(fn, name)             \
  Tensor& fn(Tensor& a, Scalar b) {                   \
    GRAFT_OP_HANDLE(op, name);                        \
    call_op(op, a, b);                                \
    return a;                                         \
  }

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  GRAFT_OP_HANDLE(op, "add.Tensor");
  return call_op(op, a, b, alpha)[0];
}
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  GRAFT_OP_HANDLE(op, "sub.Tensor");
  return call_op(op, a, b, alpha)[0];
}
Tensor& add_(Tensor& a, const Tensor& b, Scalar alpha) {
  GRAFT_OP_HANDLE(op, "add_.Tensor");
  call_op(op, a, b, alpha);
  return a;
}
Tensor& sub_(Tensor& a, const Tensor& b, Scalar alpha) {
  GRAFT_OP_HANDLE(op, "sub_.Tensor");
  call_op(op, a, b, alpha);
  return a;
}

GRAFT_SCALAR_OP(add, "add.Scalar")
GRAFT_SCALAR_OP(sub, "sub.Scalar")
GRAFT_SCALAR_OP(rsub, "rsub.Scalar")
GRAFT_BINARY_OP(mul, "mul.Tensor")
GRAFT_SCALAR_OP(mul, "mul.Scalar")
GRAFT_BINARY_OP(div, "div.Tensor")
GRAFT_SCALAR_OP(div, "div.Scalar")
GRAFT_SCALAR_OP(rdiv, "rdiv.Scalar")
GRAFT_BINARY_OP(pow, "pow.Tensor_Tensor")
GRAFT_BINARY_OP(maximum, "maximum")
GRAFT_BINARY_OP(minimum, "minimum")
GRAFT_BINARY_OP(gt, "gt.Tensor")
GRAFT_BINARY_OP(lt, "lt.Tensor")
GRAFT_BINARY_OP(ge, "ge.Tensor")
GRAFT_BINARY_OP(le, "le.Tensor")
GRAFT_BINARY_OP(eq, "eq.Tensor")
GRAFT_BINARY_OP(ne, "ne.Tensor")
GRAFT_SCALAR_OP(gt, "gt.Scalar")
GRAFT_SCALAR_OP(lt, "lt.Scalar")
GRAFT_SCALAR_OP(ge, "ge.Scalar")
GRAFT_SCALAR_OP(le, "le.Scalar")
GRAFT_SCALAR_OP(eq, "eq.Scalar")
GRAFT_SCALAR_OP(ne, "ne.Scalar")
GRAFT_BINARY_OP(logical_and, "logical_and")
GRAFT_BINARY_OP(logical_or, "logical_or")
GRAFT_SCALAR_INPLACE_OP(add_, "add_.Scalar")
GRAFT_SCALAR_INPLACE_OP(sub_, "sub_.Scalar")
GRAFT_BINARY_INPLACE_OP(mul_, "mul_.Tensor")
GRAFT_SCALAR_INPLACE_OP(mul_, "mul_.Scalar")
GRAFT_BINARY_INPLACE_OP(div_, "div_.Tensor")
GRAFT_SCALAR_INPLACE_OP(div_, "div_.Scalar")
#undef GRAFT_BINARY_OP
#undef GRAFT_SCALAR_OP
#undef GRAFT_BINARY_INPLACE_OP
#undef GRAFT_SCALAR_INPLACE_OP

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  GRAFT_OP_HANDLE(op, "where.self");
  return call_op(op, cond, a, b)[0];
}
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  GRAFT_OP_HANDLE(op, "clamp");
  return call_op(op, x, min, max)[0];
}
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  GRAFT_OP_HANDLE(op, "masked_fill.Scalar");
  return call_op(op, x, mask, value)[0];
}
Tensor& clamp_(Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  GRAFT_OP_HANDLE(op, "clamp_");
  call_op(op, x, min, max);
  return x;
}
Tensor& addcmul_(Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  GRAFT_OP_HANDLE(op, "addcmul_");
  call_op(op, self, a, b, value);
  return self;
}
Tensor& addcdiv_(Tensor& self, const Tensor& a, const Tensor& b, Scalar value) {
  GRAFT_OP_HANDLE(op, "addcdiv_");
  call_op(op, self, a, b, value);
  return self;
}
Tensor& lerp_(Tensor& self, const Tensor& end, Scalar weight) {
  GRAFT_OP_HANDLE(op, "lerp_.Scalar");
  call_op(op, self, end, weight);
  return self;
}

}  // namespace ops
}  // namespace graft
