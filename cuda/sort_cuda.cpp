// topk on CUDA. Checks, messages and geometry from the shared plan (ops/sort_plan.h), as on the
// CPU; the kernel is in cuda/kernels/sort.cu, which documents its order of ties (ascending index).
//
// x reaches the kernel as contiguous rows [outer * inner, len]: itself when `dim` is innermost
// and x is contiguous, else a device copy through a view with `dim` moved last.
#include <limits>

#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/sort.h"
#include "cuda/reduce_helpers.h"
#include "ops/kernel_utils.h"
#include "ops/sort_plan.h"

namespace graft::cuda {
namespace {

// x's elements as contiguous [rows, len] rows, row o * inner + i holding x[o, :, i].
Tensor topk_rows(const Tensor& x, const kernels::TopkPlan& p) {
  if (x.is_contiguous() && p.inner == 1) return x;
  Shape sizes, strides;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != p.dim) {
      sizes.push_back(x.sizes()[d]);
      strides.push_back(x.strides()[d]);
    }
  sizes.push_back(x.sizes()[p.dim]);
  strides.push_back(x.strides()[p.dim]);
  Tensor rows = kernels::new_tensor(sizes, x.dtype(), x.device());
  reduce_helpers::copy_strided(rows, raw_view(x, sizes, strides, x.storage_offset()));
  return rows;
}

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

std::vector<Tensor> topk_cuda(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  (void)sorted;  // the kernel always writes the selection best first, which sorted=false allows
  const kernels::TopkPlan p = kernels::plan_topk(x, k, dim);
  Tensor values = kernels::new_tensor(p.out_sizes, x.dtype(), x.device());
  Tensor indices = kernels::new_tensor(p.out_sizes, kInt64, x.device());
  const int64_t n_rows = p.outer * p.inner;
  if (p.k == 0 || n_rows == 0) return {values, indices};
  GRAFT_CHECK(n_rows <= std::numeric_limits<int32_t>::max(), "topk: at most 2^31 - 1 rows on CUDA, got ", n_rows,
              " (", describe(x), ")");
  DeviceGuard guard(x.device().index);
  Tensor rows = topk_rows(x, p);
  launch_topk(x.dtype(), rows.data_ptr(), n_rows, p.len, p.k, p.inner, largest, values.data_ptr(),
              static_cast<int64_t*>(indices.data_ptr()), current_stream());
  return {values, indices};
}

}  // namespace graft::cuda
