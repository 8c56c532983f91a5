// Binary and ternary elementwise ops on the device: arithmetic, comparisons, logical ops, where,
// clamp, masked_fill and the optimizer updates. Formulas are the CPU's (ops/binary.cpp).
#include "cuda/kernels/binary.h"

#include <cmath>

#include "cuda/kernels/elementwise.cuh"

namespace graft::cuda {
namespace {

template <class T> constexpr bool kFloating = std::is_floating_point_v<T>;
template <class T> constexpr bool kBoolT = std::is_same_v<T, bool>;

template <class T>
__device__ __forceinline__ T max_nan(T a, T b) {
  if constexpr (kFloating<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return a < b ? b : a;
}
template <class T>
__device__ __forceinline__ T min_nan(T a, T b) {
  if constexpr (kFloating<T>) {
    if (a != a) return a;
    if (b != b) return b;
  }
  return b < a ? b : a;
}

using scalar_math::int_pow_signed;

// ---- tensor-tensor ----

template <BinaryOp Op, class T>
constexpr bool binary_supports() {
  if constexpr (Op == BinaryOp::Sub) return !kBoolT<T>;
  else if constexpr (Op == BinaryOp::Div || Op == BinaryOp::Lerp) return kFloating<T>;
  else if constexpr (Op == BinaryOp::Pow) return !kBoolT<T>;
  else return true;
}

constexpr bool is_comparison(BinaryOp op) { return op >= BinaryOp::Gt; }

// kAlpha: the op scales b by `p` (alpha != 1); lerp: p is the weight, `near` picks the formula.
template <BinaryOp Op, class T, bool kAlpha>
struct BinaryFn {
  T p;
  bool near;
  __device__ T operator()(T a, T b) const {
    if constexpr (Op == BinaryOp::Add) {
      if constexpr (kBoolT<T>) return a || (p && b);
      else if constexpr (kAlpha) return a + p * b;
      else return a + b;
    } else if constexpr (Op == BinaryOp::Sub) {
      if constexpr (kAlpha) return a - p * b;
      else return a - b;
    } else if constexpr (Op == BinaryOp::Mul) {
      if constexpr (kBoolT<T>) return a && b;
      else return a * b;
    } else if constexpr (Op == BinaryOp::Div) {
      return a / b;
    } else if constexpr (Op == BinaryOp::Pow) {
      if constexpr (kFloating<T>) return dmath::pow(a, b);
      else return int_pow_signed(a, b);
    } else if constexpr (Op == BinaryOp::Maximum) {
      return max_nan(a, b);
    } else if constexpr (Op == BinaryOp::Minimum) {
      return min_nan(a, b);
    } else if constexpr (Op == BinaryOp::Lerp) {
      // Interpolating from the nearer end keeps lerp exact at w = 0 and w = 1.
      return near ? a + p * (b - a) : b - (b - a) * (T(1) - p);
    }
    return a;
  }
};

template <BinaryOp Op, class T>
struct CompareFn {
  __device__ bool operator()(T x, T y) const {
    if constexpr (Op == BinaryOp::Gt) return x > y;
    else if constexpr (Op == BinaryOp::Lt) return x < y;
    else if constexpr (Op == BinaryOp::Ge) return x >= y;
    else if constexpr (Op == BinaryOp::Le) return x <= y;
    else if constexpr (Op == BinaryOp::Eq) return x == y;
    else if constexpr (Op == BinaryOp::Ne) return x != y;
    else if constexpr (Op == BinaryOp::LogicalAnd) return x != T(0) && y != T(0);
    else return x != T(0) || y != T(0);
  }
};

template <BinaryOp Op>
void run_binary(DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (is_comparison(Op)) {
      launch_elementwise<bool, T, T>(g, CompareFn<Op, T>{}, stream, "comparison");
    } else if constexpr (!binary_supports<Op, T>()) {
      elementwise_internal_error("launch_binary", dtype, static_cast<int>(Op));
    } else {
      T p = scalar_as<T>(param);
      bool scaled = (Op == BinaryOp::Add || Op == BinaryOp::Sub) && !kBoolT<T> && p != T(1);
      bool near = false;
      if constexpr (Op == BinaryOp::Lerp) near = std::abs(p) < T(0.5);
      if (scaled) launch_elementwise<T, T, T>(g, BinaryFn<Op, T, true>{p, near}, stream, "binary");
      else launch_elementwise<T, T, T>(g, BinaryFn<Op, T, false>{p, near}, stream, "binary");
    }
  });
}

// ---- tensor-scalar ----

template <ScalarOp Op, class T>
constexpr bool scalar_supports() {
  if constexpr (Op == ScalarOp::Sub || Op == ScalarOp::Rsub) return !kBoolT<T>;
  else if constexpr (Op == ScalarOp::Div || Op == ScalarOp::Rdiv) return kFloating<T>;
  else return true;
}

constexpr bool is_comparison(ScalarOp op) { return op >= ScalarOp::Gt; }

template <ScalarOp Op, class T>
struct ScalarFn {
  T v, hi;
  __device__ T operator()(T a) const {
    if constexpr (Op == ScalarOp::Add) {
      if constexpr (kBoolT<T>) return a || v;
      else return a + v;
    } else if constexpr (Op == ScalarOp::Sub) {
      return a - v;
    } else if constexpr (Op == ScalarOp::Rsub) {
      return v - a;
    } else if constexpr (Op == ScalarOp::Mul) {
      if constexpr (kBoolT<T>) return a && v;
      else return a * v;
    } else if constexpr (Op == ScalarOp::Div) {
      return a / v;
    } else if constexpr (Op == ScalarOp::Rdiv) {
      return v / a;
    } else if constexpr (Op == ScalarOp::ClampMin) {
      return a < v ? v : a;
    } else if constexpr (Op == ScalarOp::ClampMax) {
      return a > v ? v : a;
    } else if constexpr (Op == ScalarOp::ClampBoth) {
      // NaN in a stays NaN, and lo > hi gives hi everywhere, as torch.clamp.
      T m = a < v ? v : a;
      return m > hi ? hi : m;
    }
    return a;
  }
};

template <ScalarOp Op, class T>
struct CompareScalarFn {
  T v;
  __device__ bool operator()(T x) const {
    if constexpr (Op == ScalarOp::Gt) return x > v;
    else if constexpr (Op == ScalarOp::Lt) return x < v;
    else if constexpr (Op == ScalarOp::Ge) return x >= v;
    else if constexpr (Op == ScalarOp::Le) return x <= v;
    else if constexpr (Op == ScalarOp::Eq) return x == v;
    else return x != v;
  }
};

template <ScalarOp Op>
void run_scalar(DType dtype, const ElementwiseGeometry& g, ScalarArg p0, ScalarArg p1, cudaStream_t stream) {
  visit_dtype(dtype, [&]<class T>() {
    if constexpr (is_comparison(Op))
      launch_elementwise<bool, T>(g, CompareScalarFn<Op, T>{scalar_as<T>(p0)}, stream, "comparison");
    else if constexpr (!scalar_supports<Op, T>())
      elementwise_internal_error("launch_scalar_op", dtype, static_cast<int>(Op));
    else
      launch_elementwise<T, T>(g, ScalarFn<Op, T>{scalar_as<T>(p0), scalar_as<T>(p1)}, stream, "scalar_op");
  });
}

// ---- ternary ----

template <class T>
struct WhereFn {
  __device__ T operator()(bool c, T x, T y) const { return c ? x : y; }
};
template <class T>
struct MaskedFillFn {
  T v;
  __device__ T operator()(T a, bool m) const { return m ? v : a; }
};
template <class T>
struct AddcmulFn {
  T v;
  __device__ T operator()(T s, T x, T y) const { return s + v * x * y; }
};
template <class T>
struct AddcdivFn {
  T v;
  __device__ T operator()(T s, T x, T y) const { return s + v * x / y; }
};

}  // namespace

void launch_binary(BinaryOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  switch (op) {
#define GRAFT_BINARY_CASE(name) \
  case BinaryOp::name: return run_binary<BinaryOp::name>(dtype, g, param, stream);
    GRAFT_BINARY_CASE(Add)
    GRAFT_BINARY_CASE(Sub)
    GRAFT_BINARY_CASE(Mul)
    GRAFT_BINARY_CASE(Div)
    GRAFT_BINARY_CASE(Pow)
    GRAFT_BINARY_CASE(Maximum)
    GRAFT_BINARY_CASE(Minimum)
    GRAFT_BINARY_CASE(Lerp)
    GRAFT_BINARY_CASE(Gt)
    GRAFT_BINARY_CASE(Lt)
    GRAFT_BINARY_CASE(Ge)
    GRAFT_BINARY_CASE(Le)
    GRAFT_BINARY_CASE(Eq)
    GRAFT_BINARY_CASE(Ne)
    GRAFT_BINARY_CASE(LogicalAnd)
    GRAFT_BINARY_CASE(LogicalOr)
#undef GRAFT_BINARY_CASE
  }
  elementwise_internal_error("launch_binary", dtype, static_cast<int>(op));
}

void launch_scalar_op(ScalarOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg p0, ScalarArg p1,
                      cudaStream_t stream) {
  switch (op) {
#define GRAFT_SCALAR_CASE(name) \
  case ScalarOp::name: return run_scalar<ScalarOp::name>(dtype, g, p0, p1, stream);
    GRAFT_SCALAR_CASE(Add)
    GRAFT_SCALAR_CASE(Sub)
    GRAFT_SCALAR_CASE(Rsub)
    GRAFT_SCALAR_CASE(Mul)
    GRAFT_SCALAR_CASE(Div)
    GRAFT_SCALAR_CASE(Rdiv)
    GRAFT_SCALAR_CASE(ClampMin)
    GRAFT_SCALAR_CASE(ClampMax)
    GRAFT_SCALAR_CASE(ClampBoth)
    GRAFT_SCALAR_CASE(Gt)
    GRAFT_SCALAR_CASE(Lt)
    GRAFT_SCALAR_CASE(Ge)
    GRAFT_SCALAR_CASE(Le)
    GRAFT_SCALAR_CASE(Eq)
    GRAFT_SCALAR_CASE(Ne)
#undef GRAFT_SCALAR_CASE
  }
  elementwise_internal_error("launch_scalar_op", dtype, static_cast<int>(op));
}

void launch_ternary(TernaryOp op, DType dtype, const ElementwiseGeometry& g, ScalarArg param, cudaStream_t stream) {
  visit_dtype(dtype, [&]<class T>() {
    T v = scalar_as<T>(param);
    switch (op) {
      case TernaryOp::Where:
        launch_elementwise<T, bool, T, T>(g, WhereFn<T>{}, stream, "where");
        return;
      case TernaryOp::MaskedFill:
        launch_elementwise<T, T, bool>(g, MaskedFillFn<T>{v}, stream, "masked_fill");
        return;
      case TernaryOp::Addcmul:
        if constexpr (!kBoolT<T>) {
          launch_elementwise<T, T, T, T>(g, AddcmulFn<T>{v}, stream, "addcmul_");
          return;
        }
        break;
      case TernaryOp::Addcdiv:
        if constexpr (kFloating<T>) {
          launch_elementwise<T, T, T, T>(g, AddcdivFn<T>{v}, stream, "addcdiv_");
          return;
        }
        break;
    }
    elementwise_internal_error("launch_ternary", dtype, static_cast<int>(op));
  });
}

}  // namespace graft::cuda
