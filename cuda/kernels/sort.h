#pragma once
// Device side of topk (raw device pointers; the glue is cuda/sort_cuda.cpp, the checks and the
// geometry ops/sort_plan.h). Launches on `stream` and checks the launch.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

// rows: contiguous [n_rows, len] of `dtype` (any but bool). Row r = o * inner + i writes its best
// k, best first, to values/indices [o * k * inner + j * inner + i] for j < k. "Best" is larger
// (smaller) first, NaN above every number, ties by ascending index. values may be null (only the
// indices are wanted).
void launch_topk(DType dtype, const void* rows, int64_t n_rows, int64_t len, int64_t k, int64_t inner, bool largest,
                 void* values, int64_t* indices, cudaStream_t stream);

}  // namespace graft::cuda
