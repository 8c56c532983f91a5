// Unary elementwise ops and activation derivatives on the device. The formulas are the CPU's
// (ops/unary.cpp), evaluated in the op's dtype: float32 math in float, as PyTorch on CUDA.
#include "cuda/kernels/unary.h"

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/unary_math.cuh"

namespace graft::cuda {
namespace {

constexpr double kGeluCubic = 0.044715;
constexpr double kSqrt2OverPi = 0.79788456080286535588;   // sqrt(2/pi)
constexpr double kSqrtHalf = 0.70710678118654752440;      // sqrt(2)/2
constexpr double kInvSqrt2Pi = 0.39894228040143267794;    // 1/sqrt(2 pi)

template <UnaryOp Op, class T>
constexpr bool unary_supports() {
  if constexpr (Op == UnaryOp::Neg || Op == UnaryOp::Relu || Op == UnaryOp::Abs || Op == UnaryOp::Sign ||
                Op == UnaryOp::LogicalNot)
    return true;
  else if constexpr (Op == UnaryOp::IntPow) return std::is_same_v<T, int64_t>;
  else return std::is_floating_point_v<T>;
}

template <class T>
__device__ __forceinline__ T gelu_value(T x, bool tanh_approx) {
  if (tanh_approx) {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    return T(0.5) * x * (T(1) + dmath::tanh(inner));
  }
  return T(0.5) * x * (T(1) + dmath::erf(x * T(kSqrtHalf)));
}

template <class T>
__device__ __forceinline__ T gelu_derivative(T x, bool tanh_approx) {
  if (tanh_approx) {
    T inner = T(kSqrt2OverPi) * (x + T(kGeluCubic) * x * x * x);
    T t = dmath::tanh(inner);
    T dinner = T(kSqrt2OverPi) * (T(1) + T(3 * kGeluCubic) * x * x);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner;
  }
  T cdf = T(0.5) * (T(1) + dmath::erf(x * T(kSqrtHalf)));
  T pdf = dmath::exp(T(-0.5) * x * x) * T(kInvSqrt2Pi);
  return cdf + x * pdf;
}

// The op table's math struct for Op (void for the ops written out below).
template <UnaryOp Op> struct TableMath { using type = void; };
#define GRAFT_UNARY_OP(name, Name, ...) \
  template <> struct TableMath<UnaryOp::Name> { using type = unary_math::Name; };
#include "runtime/op_table/unary.def"

template <UnaryOp Op, class T>
struct UnaryFn {
  T p;
  __device__ T operator()(T v) const {
    if constexpr (Op == UnaryOp::Neg) {
      if constexpr (std::is_same_v<T, bool>) return v;
      else return -v;
    } else if constexpr (Op == UnaryOp::Relu) {
      return v < T(0) ? T(0) : v;  // NaN stays NaN
    } else if constexpr (Op == UnaryOp::Abs) {
      if constexpr (std::is_same_v<T, bool>) return v;
      else return v < T(0) ? -v : v;
    } else if constexpr (Op == UnaryOp::Sign) {
      if constexpr (std::is_same_v<T, bool>) return v;
      else return static_cast<T>((T(0) < v) - (v < T(0)));
    } else if constexpr (Op == UnaryOp::IntPow) {
      return int_pow(v, p);
    } else if constexpr (std::is_floating_point_v<T>) {
      if constexpr (!std::is_void_v<typename TableMath<Op>::type>) return typename TableMath<Op>::type{}(v);
      else if constexpr (Op == UnaryOp::GeluErf) return gelu_value(v, false);
      else if constexpr (Op == UnaryOp::GeluTanh) return gelu_value(v, true);
      else if constexpr (Op == UnaryOp::Identity) return v;
      else if constexpr (Op == UnaryOp::One) return T(1);
      else if constexpr (Op == UnaryOp::Square) return v * v;
      else if constexpr (Op == UnaryOp::Cube) return v * v * v;
      else if constexpr (Op == UnaryOp::PowScalar) return dmath::pow(v, p);
    }
    return v;  // unreachable: unsupported combinations are never instantiated for launch
  }
};

constexpr const char* unary_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Sign: return "sign";
#define GRAFT_UNARY_OP(name, Name, ...) \
    case UnaryOp::Name: return #name;
#include "runtime/op_table/unary.def"
    case UnaryOp::GeluErf: return "gelu";
    case UnaryOp::GeluTanh: return "gelu(tanh)";
    case UnaryOp::Identity: case UnaryOp::One: case UnaryOp::Square: case UnaryOp::Cube: case UnaryOp::PowScalar:
    case UnaryOp::IntPow: return "pow";
    case UnaryOp::LogicalNot: return "logical_not";
  }
  return "unary";
}

constexpr const char* grad_name(GradOp op) {
  switch (op) {
    case GradOp::ThresholdBackward: return "threshold_backward";
    case GradOp::GeluErfBackward: case GradOp::GeluTanhBackward: return "gelu_backward";
    case GradOp::SigmoidBackward: return "sigmoid_backward";
    case GradOp::TanhBackward: return "tanh_backward";
  }
  return "activation_backward";
}

template <class T>
struct LogicalNotFn {
  __device__ bool operator()(T v) const { return v == T(0); }
};

template <UnaryOp Op>
void run_unary(DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (!unary_supports<Op, T>()) {
      elementwise_internal_error("launch_unary", dtype, static_cast<int>(Op));
    } else if constexpr (Op == UnaryOp::LogicalNot) {
      launch_elementwise<bool, T>(g, LogicalNotFn<T>{}, stream, "logical_not");
    } else {
      launch_elementwise<T, T>(g, UnaryFn<Op, T>{scalar_as<T>(param)}, stream, unary_name(Op));
    }
  });
}

template <GradOp Op, class T>
struct GradFn {
  T p;
  __device__ T operator()(T g, T v) const {
    if constexpr (Op == GradOp::ThresholdBackward) {
      return v <= p ? T(0) : g;
    } else if constexpr (std::is_floating_point_v<T>) {
      if constexpr (Op == GradOp::GeluErfBackward) return g * gelu_derivative(v, false);
      else if constexpr (Op == GradOp::GeluTanhBackward) return g * gelu_derivative(v, true);
      else if constexpr (Op == GradOp::SigmoidBackward) return g * (T(1) - v) * v;
      else if constexpr (Op == GradOp::TanhBackward) return g * (T(1) - v * v);
    }
    return g;  // unreachable
  }
};

template <GradOp Op>
void run_grad(DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (Op == GradOp::ThresholdBackward || std::is_floating_point_v<T>)
      launch_elementwise<T, T, T>(g, GradFn<Op, T>{scalar_as<T>(param)}, stream, grad_name(Op));
    else
      elementwise_internal_error("launch_grad", dtype, static_cast<int>(Op));
  });
}

}  // namespace

void launch_unary(UnaryOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  switch (op) {
#define GRAFT_UNARY_CASE(name) \
  case UnaryOp::name: return run_unary<UnaryOp::name>(dtype, g, param, stream);
    GRAFT_UNARY_CASE(Neg)
    GRAFT_UNARY_CASE(Relu)
    GRAFT_UNARY_CASE(Abs)
    GRAFT_UNARY_CASE(Sign)
#define GRAFT_UNARY_OP(name, Name, ...) GRAFT_UNARY_CASE(Name)
#include "runtime/op_table/unary.def"
    GRAFT_UNARY_CASE(GeluErf)
    GRAFT_UNARY_CASE(GeluTanh)
    GRAFT_UNARY_CASE(Identity)
    GRAFT_UNARY_CASE(One)
    GRAFT_UNARY_CASE(Square)
    GRAFT_UNARY_CASE(Cube)
    GRAFT_UNARY_CASE(PowScalar)
    GRAFT_UNARY_CASE(IntPow)
    GRAFT_UNARY_CASE(LogicalNot)
#undef GRAFT_UNARY_CASE
  }
  elementwise_internal_error("launch_unary", dtype, static_cast<int>(op));
}

void launch_grad(GradOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  switch (op) {
    case GradOp::ThresholdBackward: return run_grad<GradOp::ThresholdBackward>(dtype, g, param, stream);
    case GradOp::GeluErfBackward: return run_grad<GradOp::GeluErfBackward>(dtype, g, param, stream);
    case GradOp::GeluTanhBackward: return run_grad<GradOp::GeluTanhBackward>(dtype, g, param, stream);
    case GradOp::SigmoidBackward: return run_grad<GradOp::SigmoidBackward>(dtype, g, param, stream);
    case GradOp::TanhBackward: return run_grad<GradOp::TanhBackward>(dtype, g, param, stream);
  }
  elementwise_internal_error("launch_grad", dtype, static_cast<int>(op));
}

}  // namespace graft::cuda
