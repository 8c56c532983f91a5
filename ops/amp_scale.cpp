// GradScaler's ops on the CPU: the non-finite check fused with the unscale, and the scale update.
//
// Invariants:
// 1. One pass over the gradient: each element is read once, tested for inf/NaN and multiplied by
//    inv_scale (in float for float32/bfloat16/float16 gradients, in double for float64 ones), as
//    PyTorch's kernel; an inv_scale of exactly 1 leaves every element as it is.
// 2. A bfloat16/float16 gradient is converted to float a chunk at a time (ops/reduced_float.h) and
//    rounded once on the way back, so unscaling by a power of two is exact unless the result is
//    subnormal or overflows, as for float32.
// 3. found_inf is only ever set to 1 (never cleared): one found_inf serves every gradient of a
//    device, as PyTorch's foreach op.
#include <algorithm>
#include <atomic>
#include <cmath>

#include "ops/amp_scale_plan.h"
#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/reduced_float.h"
#include "runtime/parallel.h"

namespace graft::kernels {

namespace {
void check_scalar(const char* op, const char* name, const Tensor& t, DType dtype, Device device) {
  GRAFT_CHECK(t.defined(), op, ": ", name, " is undefined");
  GRAFT_CHECK(t.numel() == 1, op, ": ", name, " must be a 1-element tensor, got ", describe(t));
  GRAFT_CHECK(t.dtype() == dtype, op, ": ", name, " must be a ", dtype, " tensor, got ", describe(t));
  GRAFT_CHECK(t.device() == device, op, ": ", name, " (", describe(t), ") must be on ", device);
}

// Tests and unscales x[0, n) in compute type T; returns whether any element was inf or NaN.
template <class T>
bool check_and_unscale_row(T* x, int64_t n, T inv) {
  bool bad = false;
  if (inv == T(1)) {
    for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(x[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) {
      bad |= !std::isfinite(x[i]);
      x[i] = x[i] * inv;
    }
  }
  return bad;
}
}  // namespace

void check_amp_unscale(const Tensor& self, const Tensor& found_inf, const Tensor& inv_scale) {
  const char* op = "_amp_non_finite_check_and_unscale_";
  GRAFT_CHECK(self.defined(), op, ": self is undefined");
  GRAFT_CHECK(is_floating(self.dtype()), op, ": expected a floating point gradient, got ", describe(self));
  check_scalar(op, "found_inf", found_inf, DType::Float32, self.device());
  check_scalar(op, "inv_scale", inv_scale, DType::Float32, self.device());
}

void check_amp_update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                            int64_t growth_interval) {
  const char* op = "_amp_update_scale_";
  GRAFT_CHECK(scale.defined(), op, ": self (the scale) is undefined");
  check_scalar(op, "self (the scale)", scale, DType::Float32, scale.device());
  check_scalar(op, "growth_tracker", growth_tracker, DType::Int32, scale.device());
  check_scalar(op, "found_inf", found_inf, DType::Float32, scale.device());
  GRAFT_CHECK(growth_interval >= 1, op, ": growth_interval must be positive, got ", growth_interval);
}

// ---- kernels (declared in ops/cpu_kernels.h, registered from codegen/ops/factory.yaml) ----

void amp_non_finite_check_and_unscale_cpu(const Tensor& self, const Tensor& found_inf, const Tensor& inv_scale) {
  check_amp_unscale(self, found_inf, inv_scale);
  // A strided gradient goes through a contiguous copy that is written back: .grad is normally
  // contiguous, and this keeps the loop a plain row.
  Tensor x = self.is_contiguous() ? self : ops::contiguous(self);
  const float inv = *inv_scale.data_ptr<float>();
  std::atomic<bool> bad{false};
  const int64_t n = x.numel();
  if (self.dtype() == DType::Float64) {
    double* d = x.data_ptr<double>();
    parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
      if (check_and_unscale_row<double>(d + lo, hi - lo, static_cast<double>(inv))) bad = true;
    });
  } else {
    dispatch_float_or_reduced(self.dtype(), "_amp_non_finite_check_and_unscale_", [&]<class P>() {
      P* d = x.data_ptr<P>();
      parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
        if constexpr (std::is_same_v<P, float>) {
          if (check_and_unscale_row<float>(d + lo, hi - lo, inv)) bad = true;
        } else {
          constexpr int64_t kChunk = 512;
          float buf[kChunk];
          bool b = false;
          for (int64_t c = lo; c < hi; c += kChunk) {
            const int64_t len = std::min(kChunk, hi - c);
            to_float(d + c, buf, len);
            b |= check_and_unscale_row<float>(buf, len, inv);
            if (inv != 1.0f) from_float(buf, d + c, len);
          }
          if (b) bad = true;
        }
      });
    });
  }
  if (!x.is_same(self)) ops::copy_(const_cast<Tensor&>(self), x);
  if (bad) *found_inf.data_ptr<float>() = 1.0f;
}

Tensor amp_update_scale_cpu(const Tensor& self, const Tensor& growth_tracker, const Tensor& found_inf,
                            double scale_growth_factor, double scale_backoff_factor, int64_t growth_interval) {
  check_amp_update_scale(self, growth_tracker, found_inf, growth_interval);
  amp_update_scale(self.data_ptr<float>(), growth_tracker.data_ptr<int32_t>(), *found_inf.data_ptr<float>(),
                   scale_growth_factor, scale_backoff_factor, growth_interval);
  return self;
}

}  // namespace graft::kernels
