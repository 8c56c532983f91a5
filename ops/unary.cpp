// Elementwise unary ops and the fused derivative helpers of activations, on CPU.
//
// Checks and dtype rules are the shared plan's (ops/unary_plan.h); this file is the CPU's math.
#include <cmath>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <numbers>
#include <string>
#include <type_traits>

#include "ops/dnnl_utils.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/tensor_iterator.h"
#include "ops/unary_math.h"
#include "ops/unary_plan.h"
#include "ops/vec_math.h"
#include "runtime/parallel.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

// Transcendental functions cost tens of cycles per element: split sooner than for a plain add.
constexpr int64_t kMathGrain = kGrainSize / 4;

// y = f(x) in floating point. `f` is a generic callable, instantiated for float and double.
template <class F>
Tensor floating_unary(const char* op, const Tensor& x, F f) {
  TensorIterator it(op);
  DType r = build_floating_unary(it, x);
  dispatch_floating(r, op, [&]<class T>() {
    it.for_each(elementwise_loop<T, T>([f](T v) { return static_cast<T>(f(v)); }), kMathGrain);
  });
  return it.output();
}

// x = f(x): only floating tensors can hold a floating result.
template <class F>
Tensor floating_unary_(const char* op, const Tensor& x, F f) {
  TensorIterator it(op);
  DType r = build_floating_unary_inplace(it, x);
  dispatch_floating(r, op, [&]<class T>() {
    it.for_each(elementwise_loop<T, T>([f](T v) { return static_cast<T>(f(v)); }), kMathGrain);
  });
  return x;
}

// y = f(x) keeping the dtype (f instantiated for every dtype the op accepts).
template <class F>
Tensor same_dtype_unary(const char* op, const Tensor& x, const Tensor& out, F f) {
  TensorIterator it(op);
  build_same_dtype_unary(it, x, out);
  dispatch_dtype(x.dtype(), op, [&]<class T>() {
    it.for_each(elementwise_loop<T, T>([f](T v) { return static_cast<T>(f(v)); }));
  });
  return it.output();
}

struct Neg {
  template <class T> T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>) return v;  // unreachable: refused before dispatch
    else return -v;
  }
};
struct Relu {
  // NaN stays NaN, as torch.relu.
  template <class T> T operator()(T v) const { return v < T(0) ? T(0) : v; }
};
struct Abs {
  template <class T> T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>) return v;
    else return v < T(0) ? -v : v;
  }
};
struct Sign {
  template <class T> T operator()(T v) const {
    if constexpr (std::is_same_v<T, bool>) return v;
    else return static_cast<T>((T(0) < v) - (v < T(0)));
  }
};

Tensor neg_cpu(const Tensor& x) {
  check_neg(x, "neg");
  return same_dtype_unary("neg", x, Tensor(), Neg{});
}
Tensor neg_inplace_cpu(const Tensor& x) {
  check_neg(x, "neg_");
  return same_dtype_unary("neg_", x, x, Neg{});
}
Tensor relu_cpu(const Tensor& x) {
  check_relu(x, "relu");
  return same_dtype_unary("relu", x, Tensor(), Relu{});
}
Tensor relu_inplace_cpu(const Tensor& x) {
  check_relu(x, "relu_");
  return same_dtype_unary("relu_", x, x, Relu{});
}
Tensor abs_cpu(const Tensor& x) {
  check_defined(x, "abs", "self");
  return same_dtype_unary("abs", x, Tensor(), Abs{});
}
Tensor sign_cpu(const Tensor& x) {
  check_defined(x, "sign", "self");
  return same_dtype_unary("sign", x, Tensor(), Sign{});
}

// Contiguous float32 tanh of at least kDnnlTanhMin elements runs on oneDNN's JIT eltwise: a
// vectorised polynomial within 1 ulp of tanh computed in double (checked on the same grid as
// unary_math::Tanh), about 20x the scalar loop (0.03 vs 0.58 ms for 256K elements here), which matters
// because tanh is a third of a Linear+Tanh layer's forward and checkpointing re-runs forwards.
// Below the threshold the primitive lookup would cost more than the loop; strided inputs and
// float64 take the exact scalar path. A given shape always takes the same path, so a
// recomputation (checkpoint) reproduces the original bits.
constexpr int64_t kDnnlTanhMin = 2048;
constexpr int64_t kKeyEltwiseTanh = 20;  // primitive-cache kind (linalg 1, conv 2-4)

int omp_max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

struct EltwisePrimitive : dnnl_utils::CachedPrimitive {
  dnnl::memory::desc md;
};

}  // namespace

Tensor unary_math::Tanh::fast_path(const Tensor& x) {
  if (!x.defined() || x.dtype() != kFloat32 || !x.is_contiguous() || x.numel() < kDnnlTanhMin) return Tensor();
  namespace du = dnnl_utils;
  du::PrimitiveKey key(kKeyEltwiseTanh);
  key.add(x.numel()).add(omp_max_threads());
  auto p = du::get_or_create_as<EltwisePrimitive>(key, [&] {
    auto e = std::make_shared<EltwisePrimitive>();
    e->md = du::make_desc(Shape{x.numel()}, Shape{1}, kFloat32);
    dnnl::eltwise_forward::primitive_desc pd(
        dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::eltwise_tanh, e->md),
        du::default_attr(), du::cpu_engine());
    e->prim = dnnl::eltwise_forward(pd);
    e->scratchpad = pd.scratchpad_desc();
    return e;
  });
  Tensor out = new_tensor(x.sizes(), kFloat32, x.device());
  du::execute(*p, {{DNNL_ARG_SRC, du::make_memory(p->md, x.data_ptr())},
                   {DNNL_ARG_DST, du::make_memory(p->md, out.data_ptr())}});
  return out;
}

namespace {

// The table's ops: y = Math(x) in floating point, after Math's whole-tensor fast path if it has one.
template <class Math>
Tensor table_unary(const char* op, const Tensor& x) {
  if constexpr (requires { Math::fast_path(x); }) {
    if (Tensor y = Math::fast_path(x); y.defined()) return y;
  }
  return floating_unary(op, x, Math{});
}
#define GRAFT_UNARY_OP(name, Name, ...) \
  Tensor name##_cpu(const Tensor& x) { return table_unary<unary_math::Name>(#name, x); }
#include "runtime/op_table/unary.def"

Tensor sin_inplace_cpu(const Tensor& x) { return floating_unary_("sin_", x, unary_math::Sin{}); }
Tensor exp_inplace_cpu(const Tensor& x) { return floating_unary_("exp_", x, unary_math::Exp{}); }
Tensor sqrt_inplace_cpu(const Tensor& x) { return floating_unary_("sqrt_", x, unary_math::Sqrt{}); }

Tensor logical_not_cpu(const Tensor& x) {
  check_defined(x, "logical_not", "self");
  TensorIterator it("logical_not");
  it.add_input(x).build(kBool);
  dispatch_dtype(x.dtype(), "logical_not", [&]<class T>() {
    it.for_each(elementwise_loop<bool, T>([](T v) { return v == T(0); }));
  });
  return it.output();
}

// ---- gelu ----
// none: x * Phi(x), Phi the standard normal CDF.
// tanh: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
bool gelu_is_tanh(const std::string& approximate, const char* op) {
  GRAFT_CHECK(approximate == "none" || approximate == "tanh", op,
              ": approximate argument must be either none or tanh, got '", approximate, "'");
  return approximate == "tanh";
}
constexpr double kGeluCubic = 0.044715;
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)

template <class T> T gelu_value(T x, bool tanh_approx) {
  if (tanh_approx) {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    return T(0.5) * x * (T(1) + std::tanh(inner));
  }
  return x * vec_math::normal_cdf(x);  // float: the vectorisable form, identical on every path
}

// d gelu / dx.
template <class T> T gelu_derivative(T x, bool tanh_approx) {
  if (tanh_approx) {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    T t = std::tanh(inner);
    T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
  }
  T cdf = vec_math::normal_cdf(x);
  T pdf = vec_math::exp(T(-0.5) * x * x) * T(std::numbers::inv_sqrtpi / std::numbers::sqrt2);
  return cdf + x * pdf;
}

// The exact (erf) GELU on contiguous float32, where the compiler vectorises the math above.
// The exact (erf) GELU on contiguous float32: 16 lanes at a time, then the tail, same arithmetic.
constexpr float kInvSqrt2Pi = 0.398942280f;
GRAFT_VECTOR_CLONES void gelu_f32(const float* x, float* y, int64_t n) {
  using namespace vec_math;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    f32x16 v = load(x + i);
    store(y + i, v * normal_cdf(v));
  }
  for (; i < n; ++i) y[i] = x[i] * normal_cdf(x[i]);
}
GRAFT_VECTOR_CLONES void gelu_backward_f32(const float* g, const float* x, float* y, int64_t n) {
  using namespace vec_math;
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    f32x16 v = load(x + i);
    store(y + i, load(g + i) * (normal_cdf(v) + v * (vec_math::exp(-0.5f * v * v) * kInvSqrt2Pi)));
  }
  for (; i < n; ++i) y[i] = g[i] * (normal_cdf(x[i]) + x[i] * (vec_math::exp(-0.5f * x[i] * x[i]) * kInvSqrt2Pi));
}
bool dense_f32(const Tensor& t) { return t.dtype() == kFloat32 && t.is_contiguous(); }

Tensor gelu_cpu(const Tensor& x, const std::string& approximate) {
  check_defined(x, "gelu", "self");
  bool tanh_approx = gelu_is_tanh(approximate, "gelu");
  check_floating(x, "gelu");
  if (!tanh_approx && dense_f32(x)) {
    Tensor y = new_tensor_like(x);
    const float* xp = static_cast<const float*>(x.data_ptr());
    float* yp = static_cast<float*>(y.data_ptr());
    parallel_for(0, x.numel(), kMathGrain, [&](int64_t b, int64_t e) { gelu_f32(xp + b, yp + b, e - b); });
    return y;
  }
  return floating_unary("gelu", x, [tanh_approx](auto v) { return gelu_value(v, tanh_approx); });
}

// ---- pow(Tensor, Scalar) ----
Tensor pow_scalar_cpu(const Tensor& x, Scalar exponent) {
  check_defined(x, "pow", "self");
  DType r = result_type(x.dtype(), exponent);
  GRAFT_CHECK(r != kBool, "pow: not implemented for bool tensors (got ", describe(x), " and exponent ", exponent, ")");
  TensorIterator it("pow");
  it.add_input(x, r).build(r);
  if (r == kInt64) {
    int64_t e = exponent.to_int();
    GRAFT_CHECK(e >= 0, "pow: integers to negative integer powers are not allowed (", describe(x), " ** ", e, ")");
    it.for_each(elementwise_loop<int64_t, int64_t>([e](int64_t v) { return int_pow(v, e); }));
    return it.output();
  }
  double e = exponent.to_double();
  dispatch_floating(r, "pow", [&]<class T>() {
    // The common exponents avoid std::pow: exact and several times faster.
    if (e == 2) it.for_each(elementwise_loop<T, T>([](T v) { return v * v; }));
    else if (e == 1) it.for_each(elementwise_loop<T, T>([](T v) { return v; }));
    else if (e == 0) it.for_each(elementwise_loop<T, T>([](T) { return T(1); }));
    else if (e == 3) it.for_each(elementwise_loop<T, T>([](T v) { return v * v * v; }));
    else if (e == 0.5) it.for_each(elementwise_loop<T, T>([](T v) { return std::sqrt(v); }), kMathGrain);
    else if (e == -1) it.for_each(elementwise_loop<T, T>([](T v) { return T(1) / v; }));
    else if (e == -0.5) it.for_each(elementwise_loop<T, T>([](T v) { return T(1) / std::sqrt(v); }), kMathGrain);
    else it.for_each(elementwise_loop<T, T>([te = T(e)](T v) { return std::pow(v, te); }), kMathGrain);
  });
  return it.output();
}

// ---- derivative helpers: out = f(grad, x) over broadcast shapes, floating ----
template <bool kNeedFloating, class F>
Tensor grad_binary(const char* op, const Tensor& grad, const Tensor& x, F f) {
  check_defined(grad, op, "grad_output");
  check_defined(x, op, "self");
  DType r = result_type(grad.dtype(), x.dtype());
  GRAFT_CHECK(!kNeedFloating || is_floating(r), op, ": expected floating point tensors, got ", describe(grad),
              " and ", describe(x));
  TensorIterator it(op);
  it.add_input(grad, r).add_input(x, r).build(r);
  auto run = [&]<class T>() { f.template operator()<T>(it); };
  if constexpr (kNeedFloating) dispatch_floating(r, op, run);
  else dispatch_dtype(r, op, run);
  return it.output();
}

Tensor threshold_backward_cpu(const Tensor& grad, const Tensor& x, Scalar threshold) {
  return grad_binary<false>("threshold_backward", grad, x, [&]<class T>(TensorIterator& it) {
    T th = threshold.to<T>();
    it.for_each(elementwise_loop<T, T, T>([th](T g, T v) { return v <= th ? T(0) : g; }));
  });
}

Tensor gelu_backward_cpu(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  bool tanh_approx = gelu_is_tanh(approximate, "gelu_backward");
  if (!tanh_approx && grad.defined() && x.defined() && dense_f32(grad) && dense_f32(x) && grad.sizes() == x.sizes()) {
    Tensor y = new_tensor_like(x);
    const float* gp = static_cast<const float*>(grad.data_ptr());
    const float* xp = static_cast<const float*>(x.data_ptr());
    float* yp = static_cast<float*>(y.data_ptr());
    parallel_for(0, x.numel(), kMathGrain,
                 [&](int64_t b, int64_t e) { gelu_backward_f32(gp + b, xp + b, yp + b, e - b); });
    return y;
  }
  return grad_binary<true>("gelu_backward", grad, x, [&]<class T>(TensorIterator& it) {
    it.for_each(elementwise_loop<T, T, T>([tanh_approx](T g, T v) { return g * gelu_derivative(v, tanh_approx); }),
                kMathGrain);
  });
}

Tensor sigmoid_backward_cpu(const Tensor& grad, const Tensor& y) {
  return grad_binary<true>("sigmoid_backward", grad, y, [&]<class T>(TensorIterator& it) {
    it.for_each(elementwise_loop<T, T, T>([](T g, T v) { return g * (T(1) - v) * v; }));
  });
}

Tensor tanh_backward_cpu(const Tensor& grad, const Tensor& y) {
  return grad_binary<true>("tanh_backward", grad, y, [&]<class T>(TensorIterator& it) {
    it.for_each(elementwise_loop<T, T, T>([](T g, T v) { return g * (T(1) - v * v); }));
  });
}

}  // namespace

#define GRAFT_UNARY_OP(name, ...) GRAFT_DEFINE_OP(#name "(Tensor self) -> Tensor");
#include "runtime/op_table/unary.def"
GRAFT_DEFINE_OP("neg(Tensor self) -> Tensor");
GRAFT_DEFINE_OP("relu(Tensor self) -> Tensor");
GRAFT_DEFINE_OP("abs(Tensor self) -> Tensor");
GRAFT_DEFINE_OP("sign(Tensor self) -> Tensor");
GRAFT_DEFINE_OP("gelu(Tensor self, str approximate) -> Tensor");
GRAFT_DEFINE_OP("pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor");
GRAFT_DEFINE_OP("logical_not(Tensor self) -> Tensor");
GRAFT_DEFINE_OP("sin_(Tensor(a!) self) -> Tensor(a!)");
GRAFT_DEFINE_OP("exp_(Tensor(a!) self) -> Tensor(a!)");
GRAFT_DEFINE_OP("relu_(Tensor(a!) self) -> Tensor(a!)");
GRAFT_DEFINE_OP("neg_(Tensor(a!) self) -> Tensor(a!)");
GRAFT_DEFINE_OP("sqrt_(Tensor(a!) self) -> Tensor(a!)");
GRAFT_DEFINE_OP("threshold_backward(Tensor grad_output, Tensor self, Scalar threshold) -> Tensor");
GRAFT_DEFINE_OP("gelu_backward(Tensor grad_output, Tensor self, str approximate) -> Tensor");
GRAFT_DEFINE_OP("sigmoid_backward(Tensor grad_output, Tensor output) -> Tensor");
GRAFT_DEFINE_OP("tanh_backward(Tensor grad_output, Tensor output) -> Tensor");

#define GRAFT_UNARY_OP(name, ...) GRAFT_KERNEL(#name, CPU, name##_cpu);
#include "runtime/op_table/unary.def"
#define GRAFT_CPU_UNARY_KERNEL(name, stem) GRAFT_KERNEL(name, CPU, stem##_cpu);
GRAFT_UNARY_KERNELS(GRAFT_CPU_UNARY_KERNEL)
#undef GRAFT_CPU_UNARY_KERNEL

}  // namespace kernels

namespace ops {

#define GRAFT_DISPATCH_UNARY(name) \
  Tensor name(const Tensor& x) {   \
    GRAFT_OP_HANDLE(op, #name);    \
    return call_op(op, x)[0];      \
  }
#define GRAFT_UNARY_OP(name, ...) GRAFT_DISPATCH_UNARY(name)
#include "runtime/op_table/unary.def"
GRAFT_DISPATCH_UNARY(neg)
GRAFT_DISPATCH_UNARY(relu)
GRAFT_DISPATCH_UNARY(abs)
GRAFT_DISPATCH_UNARY(sign)
GRAFT_DISPATCH_UNARY(logical_not)
#undef GRAFT_DISPATCH_UNARY

#define GRAFT_UNARY_INPLACE_OP(name) \
  Tensor& name(Tensor& x) {          \
    GRAFT_OP_HANDLE(op, #name);      \
    call_op(op, x);                  \
    return x;                        \
  }
GRAFT_UNARY_INPLACE_OP(sin_)
GRAFT_UNARY_INPLACE_OP(exp_)
GRAFT_UNARY_INPLACE_OP(relu_)
GRAFT_UNARY_INPLACE_OP(neg_)
GRAFT_UNARY_INPLACE_OP(sqrt_)
#undef GRAFT_UNARY_INPLACE_OP

Tensor gelu(const Tensor& x, const std::string& approximate) {
  GRAFT_OP_HANDLE(op, "gelu");
  return call_op(op, x, approximate)[0];
}
Tensor pow(const Tensor& x, Scalar exponent) {
  GRAFT_OP_HANDLE(op, "pow.Tensor_Scalar");
  return call_op(op, x, exponent)[0];
}
Tensor threshold_backward(const Tensor& grad, const Tensor& x, Scalar threshold) {
  GRAFT_OP_HANDLE(op, "threshold_backward");
  return call_op(op, grad, x, threshold)[0];
}
Tensor gelu_backward(const Tensor& grad, const Tensor& x, const std::string& approximate) {
  GRAFT_OP_HANDLE(op, "gelu_backward");
  return call_op(op, grad, x, approximate)[0];
}
Tensor sigmoid_backward(const Tensor& grad, const Tensor& y) {
  GRAFT_OP_HANDLE(op, "sigmoid_backward");
  return call_op(op, grad, y)[0];
}
Tensor tanh_backward(const Tensor& grad, const Tensor& y) {
  GRAFT_OP_HANDLE(op, "tanh_backward");
  return call_op(op, grad, y)[0];
}

}  // namespace ops
}  // namespace graft
