// layer_norm over the trailing `normalized_shape` dims, and its backward.
//
// x is seen as [M, N]: M rows (the leading dims) of N normalised elements.
//   forward:  mean = sum(x) / N, rstd = 1 / sqrt(sum((x - mean)^2) / N + eps)
//             xhat = (x - mean) * rstd, y = xhat * w + b
//   backward: g = dy * w
//             dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
//             dw = sum over rows of dy * xhat, db = sum over rows of dy
// Row statistics accumulate in double. dw/db are summed per fixed piece of rows into private
// buffers and the pieces are added in order, so there are no races and the result does not
// depend on the thread count.
#include <algorithm>
#include <cmath>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/layer_norm_plan.h"
#include "ops/ops.h"
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

// x, y: [M, N]; mean, rstd: [M].
template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* mean, T* rstd, int64_t M, int64_t N,
                        double eps) {
  parallel_for(0, M, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(N, 1)), [&](int64_t rb, int64_t re) {
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
  // At most 16 pieces of rows: enough for the threads, few enough that the private dw/db buffers
  // (pieces x N doubles) stay small for any M.
  int64_t pieces = std::clamp<int64_t>((M * N + kGrainSize - 1) / kGrainSize, 1, 16);
  pieces = std::min(pieces, std::max<int64_t>(M, 1));
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

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

std::vector<Tensor> native_layer_norm_cpu(const Tensor& x, const Shape& normalized_shape, const Tensor& weight, const Tensor& bias,
                                   double eps) {
  NormLayout l = plan_layer_norm(x, normalized_shape, weight, bias, "layer_norm");
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
