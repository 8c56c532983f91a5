#pragma once
// Device side of the reduce area's data movement: a strided, casting copy and a fill. cat, stack
// and pad are built from them, and the reduce-area glue uses the copy to make the reduced dims
// innermost (or to cast) before a kernel that wants contiguous rows.
// Plain launch functions over raw device pointers: they launch on `stream` and check the launch.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

// As the CPU iterator: any tensor the CPU accepts can be walked (after coalescing, far fewer).
inline constexpr int kCopyMaxDims = 25;

// One walk over `sizes` (row-major, outermost first) reading src and writing dst through their
// own element strides. Both pointers address element (0, ..., 0).
struct CopyGeometry {
  int ndim = 0;
  int64_t numel = 0;
  int64_t sizes[kCopyMaxDims] = {};
  int64_t src_strides[kCopyMaxDims] = {};
  int64_t dst_strides[kCopyMaxDims] = {};
};

// dst = cast(src) element by element; casts as the CPU's strided_copy (to bool: v != 0).
void launch_strided_copy(const void* src, DType src_dtype, void* dst, DType dst_dtype, const CopyGeometry& g,
                         cudaStream_t stream);

// dst[0, n) = value converted as Scalar(double).to<T>() (bool: value != 0; int64: truncation).
void launch_fill_dense(void* dst, DType dtype, int64_t n, double value, cudaStream_t stream);

// Defined in cuda_context.cpp: turns a failed launch into a graft::Error naming the kernel.
void check_launch(const char* kernel_name);
// Defined in cuda/reduce_helpers.cpp: a dtype the glue should never have passed to a launcher.
[[noreturn]] void reduce_area_internal_error(const char* launcher, DType dtype);

}  // namespace graft::cuda
