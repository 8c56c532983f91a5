// layer_norm over the trailing `normalized_shape` dims, and its backward.
//
// x is seen as [M, N]: M rows (the leading dims) of N normalised elements.
//   forward:  mean = sum(x) / N, rstd = 1 / sqrt(sum((x - mean)^2) / N + eps)
//             xhat = (x - mean) * rstd, y = xhat * w + b
//   backward: g = dy * w
//             dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//             dw = sum over rows of dy * xhat, db = sum over rows of dy
// Row statistics accumulate in double (float32 rows: float, as PyTorch). dw/db are summed per fixed
// piece of rows into private buffers and the pieces are added in order, so there are no races and
// the result does not depend on the thread count.
//
// bfloat16 / float16 x: each row is converted to float (ops/reduced_float.h), runs the float32 row
// loop and is rounded once. Weight and bias may be x's dtype or float32 (PyTorch's mixed layer
// norm: a float32 module under autocast); the output has x's dtype, mean and rstd the parameters'
// dtype (float32 when mixed, as PyTorch's CPU kernel), and dw/db each its parameter's dtype.
#include <algorithm>
#include <cmath>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/layer_norm_plan.h"
#include "ops/ops.h"
#include "ops/reduced_float.h"
#include "ops/scalar_math.h"
#include "ops/vec_math.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

template <class T>
const T* ptr_or_null(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

// ---- float32 rows in 16-lane vectors (the forms below, with float accumulation as PyTorch's CPU
// kernel; statistics in two passes, mean then squared deviations, so there is no cancellation) ----
using vec_math::f32x16;
[[gnu::always_inline]] inline float hsum(f32x16 v) {
  float s = 0;
  for (int l = 0; l < vec_math::kLanes; ++l) s += v[l];
  return s;
}

// Rows [r0, r1) of x, y [M, N]; w, b may be null.
GRAFT_VECTOR_CLONES void layer_norm_rows_f32(const float* x, const float* w, const float* b, float* y, float* mean,
                                             float* rstd, int64_t r0, int64_t r1, int64_t N, float eps) {
  using namespace vec_math;
  const int64_t nv = N / kLanes * kLanes;
  for (int64_t r = r0; r < r1; ++r) {
    const float* xr = x + r * N;
    float* yr = y + r * N;
    f32x16 acc = {};
    for (int64_t i = 0; i < nv; i += kLanes) acc += load(xr + i);
    float s = hsum(acc);
    for (int64_t i = nv; i < N; ++i) s += xr[i];
    const float mu = s / static_cast<float>(N);
    acc = f32x16{};
    for (int64_t i = 0; i < nv; i += kLanes) {
      f32x16 d = load(xr + i) - mu;
      acc += d * d;
    }
    float v = hsum(acc);
    for (int64_t i = nv; i < N; ++i) v += (xr[i] - mu) * (xr[i] - mu);
    const float rs = 1.0f / std::sqrt(v / static_cast<float>(N) + eps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t i = 0; i < N; ++i) {
      float h = (xr[i] - mu) * rs;
      yr[i] = (w ? h * w[i] : h) + (b ? b[i] : 0.0f);
    }
  }
}

// Rows [r0, r1): dx, and dy * xhat, dy summed into acc_w, acc_b (double, one piece's) when given.
GRAFT_VECTOR_CLONES void layer_norm_backward_rows_f32(const float* dy, const float* x, const float* mean,
                                                      const float* rstd, const float* w, float* dx, double* acc_w,
                                                      double* acc_b, int64_t r0, int64_t r1, int64_t N) {
  using namespace vec_math;
  const int64_t nv = N / kLanes * kLanes;
  for (int64_t r = r0; r < r1; ++r) {
    const float* dyr = dy + r * N;
    const float* xr = x + r * N;
    float* dxr = dx + r * N;
    const float mu = mean[r], rs = rstd[r];
    f32x16 ag = {}, agx = {};
    for (int64_t i = 0; i < nv; i += kLanes) {
      f32x16 g = load(dyr + i) * (w ? load(w + i) : f32x16{} + 1.0f);
      ag += g;
      agx += g * ((load(xr + i) - mu) * rs);
    }
    float sum_g = hsum(ag), sum_gx = hsum(agx);
    for (int64_t i = nv; i < N; ++i) {
      float g = dyr[i] * (w ? w[i] : 1.0f);
      sum_g += g;
      sum_gx += g * ((xr[i] - mu) * rs);
    }
    const float a = sum_g / static_cast<float>(N), c = sum_gx / static_cast<float>(N);
    for (int64_t i = 0; i < N; ++i) {
      float h = (xr[i] - mu) * rs;
      dxr[i] = rs * (dyr[i] * (w ? w[i] : 1.0f) - a - h * c);
    }
    if (acc_w)
      for (int64_t i = 0; i < N; ++i) {
        acc_w[i] += static_cast<double>(dyr[i] * ((xr[i] - mu) * rs));
        acc_b[i] += static_cast<double>(dyr[i]);
      }
  }
}

// Pieces of rows for the private dw/db sums: at most 16, enough for the threads, few enough that
// the buffers (pieces x N doubles) stay small for any M.
int64_t param_pieces(int64_t M, int64_t N) {
  int64_t pieces = std::clamp<int64_t>((M * N + kGrainSize - 1) / kGrainSize, 1, 16);
  return std::min(pieces, std::max<int64_t>(M, 1));
}

// x, y: [M, N]; mean, rstd: [M].
template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t M, int64_t N,
                        double eps) {
  parallel_for(0, M, grain_for(N), [&](int64_t rb, int64_t re) {
    if constexpr (std::is_same_v<T, float>) {
      layer_norm_rows_f32(x, w, b, y, mean, rstd, rb, re, N, static_cast<float>(eps));
      return;
    }
    for (int64_t r = rb; r < re; ++r) {
      const T* xr = x + r * N;
      T* yr = y + r * N;
      double s = 0;
      for (int64_t i = 0; i < N; ++i) s += static_cast<double>(xr[i]);
      double mu = s / static_cast<double>(N);
      double v = 0;
      for (int64_t i = 0; i < N; ++i) {
        double d = static_cast<double>(xr[i]) - mu;
        v += d * d;
      }
      double rs = 1.0 / std::sqrt(v / static_cast<double>(N) + eps);
      mean[r] = static_cast<T>(mu);
      rstd[r] = static_cast<T>(rs);
      T m = static_cast<T>(mu), q = static_cast<T>(rs);
      for (int64_t i = 0; i < N; ++i) {
        T h = (xr[i] - m) * q;
        yr[i] = (w ? h * w[i] : h) + (b ? b[i] : T(0));
      }
    }
  });
}

// dy, x, dx: [M, N]; mean, rstd: [M]; w: [N] or null. dw/db: [N] or null (not wanted).
template <class T>
void layer_norm_backward_rows(const T* dy, const T* x, const T* mean, const T* rstd, const T* w, T* dx, T* dw,
                              T* db, int64_t M, int64_t N) {
  const int64_t pieces = param_pieces(M, N);
  bool want_params = dw || db;
  std::vector<double> pdw(want_params ? static_cast<size_t>(pieces * N) : 0, 0.0);
  std::vector<double> pdb(want_params ? static_cast<size_t>(pieces * N) : 0, 0.0);
  parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
    for (int64_t p = pb; p < pe; ++p) {
      double* acc_w = want_params ? pdw.data() + p * N : nullptr;
      double* acc_b = want_params ? pdb.data() + p * N : nullptr;
      if constexpr (std::is_same_v<T, float>) {
        layer_norm_backward_rows_f32(dy, x, mean, rstd, w, dx, acc_w, acc_b, p * M / pieces, (p + 1) * M / pieces, N);
        continue;
      }
      for (int64_t r = p * M / pieces; r < (p + 1) * M / pieces; ++r) {
        const T* dyr = dy + r * N;
        const T* xr = x + r * N;
        T* dxr = dx + r * N;
        double mu = static_cast<double>(mean[r]), rs = static_cast<double>(rstd[r]);
        double sum_g = 0, sum_gx = 0;
        for (int64_t i = 0; i < N; ++i) {
          double h = (static_cast<double>(xr[i]) - mu) * rs;
          double g = static_cast<double>(dyr[i]) * (w ? static_cast<double>(w[i]) : 1.0);
          sum_g += g;
          sum_gx += g * h;
          if (acc_w) {
            acc_w[i] += static_cast<double>(dyr[i]) * h;
            acc_b[i] += static_cast<double>(dyr[i]);
          }
        }
        double a = sum_g / static_cast<double>(N), c = sum_gx / static_cast<double>(N);
        for (int64_t i = 0; i < N; ++i) {
          double h = (static_cast<double>(xr[i]) - mu) * rs;
          double g = static_cast<double>(dyr[i]) * (w ? static_cast<double>(w[i]) : 1.0);
          dxr[i] = static_cast<T>(rs * (g - a - h * c));
        }
      }
    }
  });
  for (int64_t i = 0; i < N && want_params; ++i)
    scalar_math::finish_param_grads(pdw.data(), pdb.data(), N, pieces, i, dw, db);
}

// ---- bfloat16 / float16: float rows, one rounding ----

// The dtype of mean/rstd (and so of the saved statistics): float32 when a parameter is float32.
DType stats_dtype(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  bool mixed = (weight.defined() && weight.dtype() != x.dtype()) || (bias.defined() && bias.dtype() != x.dtype());
  return mixed ? kFloat32 : x.dtype();
}

std::vector<Tensor> layer_norm_reduced(const Tensor& x, const NormLayout& l, const Tensor& weight, const Tensor& bias,
                                       double eps) {
  Tensor xc = contiguous_cpu(x);
  Tensor wf = weight.defined() ? contiguous_cpu(weight, kFloat32) : Tensor();
  Tensor bf = bias.defined() ? contiguous_cpu(bias, kFloat32) : Tensor();
  Tensor y = new_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mean = new_tensor(l.leading, kFloat32, x.device()), rstd = new_tensor(l.leading, kFloat32, x.device());
  const int64_t M = l.M, N = l.N;
  const float* w = ptr_or_null<float>(wf);
  const float* b = ptr_or_null<float>(bf);
  float* mp = mean.data_ptr<float>();
  float* rp = rstd.data_ptr<float>();
  auto run = [&]<class T>() {
    const T* xp = static_cast<const T*>(xc.data_ptr());
    T* yp = static_cast<T*>(y.data_ptr());
    parallel_for(0, M, grain_for(N), [&](int64_t rb, int64_t re) {
      std::vector<float> xf(static_cast<size_t>(N)), yf(static_cast<size_t>(N));
      for (int64_t r = rb; r < re; ++r) {
        to_float(xp + r * N, xf.data(), N);
        layer_norm_rows_f32(xf.data(), w, b, yf.data(), mp + r, rp + r, 0, 1, N, static_cast<float>(eps));
        from_float(yf.data(), yp + r * N, N);
      }
    });
  };
  if (x.dtype() == kBFloat16)
    run.template operator()<BFloat16>();
  else
    run.template operator()<Half>();
  DType sd = stats_dtype(x, weight, bias);
  return {y, contiguous_cpu(mean, sd), contiguous_cpu(rstd, sd)};
}

std::vector<Tensor> layer_norm_backward_reduced(const Tensor& grad_out, const Tensor& x, const NormLayout& l,
                                                const Tensor& mean, const Tensor& rstd, const Tensor& weight,
                                                const Tensor& bias) {
  const DType dt = x.dtype();
  const int64_t M = l.M, N = l.N;
  Tensor dyc = contiguous_cpu(grad_out, dt), xc = contiguous_cpu(x);
  Tensor mf = contiguous_cpu(mean, kFloat32), rf = contiguous_cpu(rstd, kFloat32);
  Tensor wf = weight.defined() ? contiguous_cpu(weight, kFloat32) : Tensor();
  Tensor dx = new_tensor(x.sizes(), dt, x.device());
  const bool want_params = weight.defined() || bias.defined();
  const int64_t pieces = param_pieces(M, N);
  std::vector<double> pdw(want_params ? static_cast<size_t>(pieces * N) : 0, 0.0);
  std::vector<double> pdb(want_params ? static_cast<size_t>(pieces * N) : 0, 0.0);
  const float* w = ptr_or_null<float>(wf);
  const float* mp = mf.data_ptr<float>();
  const float* rp = rf.data_ptr<float>();
  auto run = [&]<class T>() {
    const T* dyp = static_cast<const T*>(dyc.data_ptr());
    const T* xp = static_cast<const T*>(xc.data_ptr());
    T* dxp = static_cast<T*>(dx.data_ptr());
    parallel_for(0, pieces, 1, [&](int64_t pb, int64_t pe) {
      std::vector<float> dyf(static_cast<size_t>(N)), xf(static_cast<size_t>(N)), dxf(static_cast<size_t>(N));
      for (int64_t p = pb; p < pe; ++p) {
        double* acc_w = want_params ? pdw.data() + p * N : nullptr;
        double* acc_b = want_params ? pdb.data() + p * N : nullptr;
        for (int64_t r = p * M / pieces; r < (p + 1) * M / pieces; ++r) {
          to_float(dyp + r * N, dyf.data(), N);
          to_float(xp + r * N, xf.data(), N);
          layer_norm_backward_rows_f32(dyf.data(), xf.data(), mp + r, rp + r, w, dxf.data(), acc_w, acc_b, 0, 1, N);
          from_float(dxf.data(), dxp + r * N, N);
        }
      }
    });
  };
  if (dt == kBFloat16)
    run.template operator()<BFloat16>();
  else
    run.template operator()<Half>();
  Tensor dw, db;
  if (want_params) {
    Shape ns = x.sizes();
    ns.erase(ns.begin(), ns.begin() + static_cast<std::ptrdiff_t>(l.leading.size()));
    Tensor dwf = new_tensor(ns, kFloat32, x.device()), dbf = new_tensor(ns, kFloat32, x.device());
    for (int64_t i = 0; i < N; ++i)
      scalar_math::finish_param_grads(pdw.data(), pdb.data(), N, pieces, i, dwf.data_ptr<float>(),
                                      dbf.data_ptr<float>());
    if (weight.defined()) dw = contiguous_cpu(dwf, weight.dtype());
    if (bias.defined()) db = contiguous_cpu(dbf, bias.dtype());
  }
  return {dx, dw, db};
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

std::vector<Tensor> native_layer_norm_cpu(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                                   double eps) {
  NormLayout l = plan_layer_norm(x, normalized_shape, weight, bias, "layer_norm");
  if (is_reduced_floating(x.dtype())) return layer_norm_reduced(x, l, weight, bias, eps);
  Tensor xc = contiguous_cpu(x);
  Tensor wc = weight.defined() ? contiguous_cpu(weight) : Tensor();
  Tensor bc = bias.defined() ? contiguous_cpu(bias) : Tensor();
  Tensor y = new_tensor(x.sizes(), x.dtype(), x.device());
  Tensor mean = new_tensor(l.leading, x.dtype(), x.device());
  Tensor rstd = new_tensor(l.leading, x.dtype(), x.device());
  dispatch_floating(x.dtype(), "layer_norm", [&]<class T>() {
    layer_norm_forward<T>(static_cast<const T*>(xc.data_ptr()), ptr_or_null<T>(wc), ptr_or_null<T>(bc),
                          static_cast<T*>(y.data_ptr()), static_cast<T*>(mean.data_ptr()),
                          static_cast<T*>(rstd.data_ptr()), l.M, l.N, eps);
  });
  return {y, mean, rstd};
}

std::vector<Tensor> native_layer_norm_backward_cpu(const Tensor& grad_out, const Tensor& x, const Shape& normalized_shape,
                                            const Tensor& mean, const Tensor& rstd, const Tensor& weight, const Tensor& bias) {
  const char* op = "layer_norm_backward";
  NormLayout l = plan_layer_norm_backward(grad_out, x, normalized_shape, mean, rstd, weight, bias, op);
  if (is_reduced_floating(x.dtype())) return layer_norm_backward_reduced(grad_out, x, l, mean, rstd, weight, bias);
  DType dt = x.dtype();
  Tensor dyc = contiguous_cpu(grad_out, dt), xc = contiguous_cpu(x);
  Tensor mc = contiguous_cpu(mean, dt), rc = contiguous_cpu(rstd, dt);
  Tensor wc = weight.defined() ? contiguous_cpu(weight) : Tensor();
  Tensor dx = new_tensor(x.sizes(), dt, x.device());
  Tensor dw = weight.defined() ? new_tensor(normalized_shape, dt, x.device()) : Tensor();
  Tensor db = bias.defined() ? new_tensor(normalized_shape, dt, x.device()) : Tensor();
  dispatch_floating(dt, op, [&]<class T>() {
    layer_norm_backward_rows<T>(static_cast<const T*>(dyc.data_ptr()), static_cast<const T*>(xc.data_ptr()),
                                static_cast<const T*>(mc.data_ptr()), static_cast<const T*>(rc.data_ptr()),
                                ptr_or_null<T>(wc), static_cast<T*>(dx.data_ptr()),
                                dw.defined() ? static_cast<T*>(dw.data_ptr()) : nullptr,
                                db.defined() ? static_cast<T*>(db.data_ptr()) : nullptr, l.M, l.N);
  });
  return {dx, dw, db};
}

}  // namespace kernels

}  // namespace graft
