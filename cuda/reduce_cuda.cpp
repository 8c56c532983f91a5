// Reductions on CUDA: sum, mean, amax/amin, max/min (all and .dim), argmax/argmin, var/std, norm,
// logsumexp. Same argument checks, error messages, output shapes and dtype rules as ops/reduce.cpp
// (the layout helpers below are that file's, line for line); the kernels are in
// cuda/kernels/reduce.cu, which documents accumulation and tie-breaking.
//
// How x reaches the kernels: read in place when the reduced dims are innermost and contiguous
// ([n_out, len] rows) or when they sit in the middle of a contiguous tensor with a wide enough
// inner block ([outer, len, inner]); anything else (transposes, gaps, broadcasts, a dtype change)
// is first copied on the device to contiguous rows.
#include <cmath>
#include <limits>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/reduce.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "ops/reduce_plan.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::check_defined;
using kernels::new_tensor;
namespace rh = reduce_helpers;

// ---- layout: ops/reduce_plan.h ----

using kernels::ReduceLayout;
using kernels::plan_reduction;
using kernels::check_nonempty_reduction;
using kernels::blocked_order;

// What the launchers read: x itself, or a contiguous rows copy of x in `dtype` (kept alive here
// until the launch is queued).
struct ReduceInput {
  Tensor data;
  ReduceShape shape;
};

ReduceInput reduce_input(const Tensor& x, const ReduceLayout& p, DType dtype) {
  ReduceInput in;
  in.shape.n_out = p.n_out;
  in.shape.len = p.len;
  Shape rs, rst;
  kernels::reordered(x, p, /*reduced_first=*/false, rs, rst);
  if (x.dtype() == dtype) {
    if (is_contiguous_layout(rs, rst)) {
      in.data = x;
      return in;
    }
    Shape bs, bst;
    int64_t outer, inner;
    blocked_order(x, p, bs, bst, outer, inner);
    if (is_contiguous_layout(bs, bst) && reduce_use_blocked(p.n_out, p.len, inner)) {
      in.data = x;
      in.shape.blocked = true;
      in.shape.outer = outer;
      in.shape.inner = inner;
      return in;
    }
  }
  in.data = new_tensor(rs, dtype, x.device());
  rh::copy_strided(in.data, raw_view(x, rs, rst, x.storage_offset()));
  return in;
}

// Runs launch(x_ptr, shape, scratch_ptr) for the reduction p of x read as `dtype`.
template <class Launch>
void run(const Tensor& x, const ReduceLayout& p, DType dtype, const Launch& launch) {
  if (p.n_out == 0) return;
  ReduceInput in = reduce_input(x, p, dtype);
  Tensor scratch = rh::scratch(reduce_scratch_bytes(in.shape), x.device());
  launch(in.data.data_ptr(), in.shape, scratch.defined() ? scratch.data_ptr() : nullptr);
}

// ---- sum / mean ----

Tensor sum_impl(const Tensor& x, const Shape& dims, bool keepdim, DType out_dtype, bool mean, const char* op) {
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(p.out_sizes, out_dtype, x.device());
  run(x, p, x.dtype(), [&](const void* data, const ReduceShape& s, void* scratch) {
    launch_sum(data, x.dtype(), out.data_ptr(), out_dtype, mean, s, scratch, current_stream());
  });
  return out;
}

// ---- max / min ----

Tensor extremum_impl(const Tensor& x, const Shape& dims, bool keepdim, bool is_max, const char* op) {
  check_defined(x, op, "self");
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  check_nonempty_reduction(x, p, op);
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(p.out_sizes, x.dtype(), x.device());
  run(x, p, x.dtype(), [&](const void* data, const ReduceShape& s, void* scratch) {
    launch_extremum(data, x.dtype(), out.data_ptr(), is_max, s, scratch, current_stream());
  });
  return out;
}

std::vector<Tensor> arg_impl(const Tensor& x, const Shape& dims, bool keepdim, bool with_values, bool is_max,
                             const char* op) {
  check_defined(x, op, "self");
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  check_nonempty_reduction(x, p, op);
  DeviceGuard guard(x.device().index);
  Tensor values = with_values ? new_tensor(p.out_sizes, x.dtype(), x.device()) : Tensor();
  Tensor indices = new_tensor(p.out_sizes, kInt64, x.device());
  run(x, p, x.dtype(), [&](const void* data, const ReduceShape& s, void* scratch) {
    launch_arg_extremum(data, x.dtype(), with_values ? values.data_ptr() : nullptr,
                        static_cast<int64_t*>(indices.data_ptr()), is_max, s, scratch, current_stream());
  });
  if (with_values) return {values, indices};
  return {indices};
}

// ---- var / std ----

Tensor var_impl(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim, bool take_sqrt,
                const char* op) {
  check_defined(x, op, "self");
  GRAFT_CHECK(is_floating(x.dtype()), op, ": expected a floating point input, got ", describe(x));
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(p.out_sizes, x.dtype(), x.device());
  run(x, p, x.dtype(), [&](const void* data, const ReduceShape& s, void* scratch) {
    launch_var(data, x.dtype(), out.data_ptr(), correction, take_sqrt, s, scratch, current_stream());
  });
  return out;
}

// ---- norm ----

// ---- logsumexp ----

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor sum_cuda(const Tensor& x, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  return sum_impl(x, dims, keepdim, kernels::sum_dtype(x, dtype), false, "sum");
}

Tensor mean_cuda(const Tensor& x, const Shape& dims, bool keepdim) {
  kernels::check_mean(x);
  return sum_impl(x, dims, keepdim, x.dtype(), true, "mean");
}

Tensor amax_cuda(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_impl(x, dims, keepdim, true, "amax");
}

Tensor amin_cuda(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_impl(x, dims, keepdim, false, "amin");
}

Tensor max_cuda(const Tensor& x) {
  check_defined(x, "max", "self");
  GRAFT_CHECK(x.numel() > 0, "max: expected a non-empty tensor, got ", describe(x),
              " (specify the reduction dim with max(dim) to reduce an empty tensor)");
  return extremum_impl(x, {}, false, true, "max");
}

Tensor min_cuda(const Tensor& x) {
  check_defined(x, "min", "self");
  GRAFT_CHECK(x.numel() > 0, "min: expected a non-empty tensor, got ", describe(x),
              " (specify the reduction dim with min(dim) to reduce an empty tensor)");
  return extremum_impl(x, {}, false, false, "min");
}

std::vector<Tensor> max_dim_cuda(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_impl(x, {dim}, keepdim, true, true, "max");
}

std::vector<Tensor> min_dim_cuda(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_impl(x, {dim}, keepdim, true, false, "min");
}

// dim none = the index into the flattened tensor (keepdim then gives all-ones dims, as PyTorch).
Tensor argmax_cuda(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_impl(x, dim ? Shape{*dim} : Shape{}, keepdim, false, true, "argmax")[0];
}

Tensor argmin_cuda(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_impl(x, dim ? Shape{*dim} : Shape{}, keepdim, false, false, "argmin")[0];
}

Tensor var_cuda(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return var_impl(x, dims, correction, keepdim, false, "var");
}

Tensor std_cuda(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return var_impl(x, dims, correction, keepdim, true, "std");
}

Tensor norm_cuda(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  auto [kind, lay] = kernels::plan_norm(x, p, dims, keepdim);
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(lay.out_sizes, x.dtype(), x.device());
  run(x, lay, x.dtype(), [&](const void* data, const ReduceShape& s, void* scratch) {
    launch_norm(data, x.dtype(), out.data_ptr(), kind, p, s, scratch, current_stream());
  });
  return out;
}

// Integer inputs are computed in float32 (PyTorch promotes them to the default float dtype).
Tensor logsumexp_cuda(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined(x, "logsumexp", "self");
  DType dt = is_floating(x.dtype()) ? x.dtype() : kFloat32;
  ReduceLayout p = plan_reduction(x, dims, keepdim, "logsumexp");
  DeviceGuard guard(x.device().index);
  Tensor out = new_tensor(p.out_sizes, dt, x.device());
  run(x, p, dt, [&](const void* data, const ReduceShape& s, void* scratch) {
    launch_logsumexp(data, dt, out.data_ptr(), s, scratch, current_stream());
  });
  return out;
}

}  // namespace graft::cuda
