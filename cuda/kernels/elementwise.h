#pragma once
// The contract between the g++-compiled glue (cuda/*_cuda.cpp) and the nvcc-compiled elementwise
// kernels (cuda/kernels/*.cu): plain structs of pointers, sizes and strides, no graft tensors.
//
// Invariants:
// - Operand 0 is the output; inputs follow (at most 3). data[k] points at operand k's first element.
// - Dims are innermost first, already broadcast and coalesced by the glue (cuda/elementwise_cuda.h);
//   strides are in elements of the operand's own dtype, 0 for a broadcast dim.
// - `contiguous` means one flat dim with stride 1 for every operand: the kernels then index plainly
//   and may use vector loads.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "ops/math/device_math.h"
#include "runtime/dtype.h"

namespace graft::cuda {

inline constexpr int kMaxOperands = 4;
// As the CPU iterator (kIterMaxDims): any tensor the CPU accepts can be walked on the device.
inline constexpr int kMaxDims = 25;

struct ElementwiseGeometry {
  int nops = 0;
  int ndim = 0;
  int64_t numel = 0;
  bool contiguous = false;
  void* data[kMaxOperands] = {};
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][kMaxOperands] = {};
};

// A Scalar argument already converted the ways Scalar::to<T>() converts it, so device code picks
// the member for its T and never needs graft::Scalar (the one definition both devices share).
using math::ScalarArg;
using math::scalar_as;

// Defined in cuda_context.cpp: turns a failed launch into a graft::Error naming the kernel.
void check_launch(const char* kernel_name);
// Defined in elementwise_cuda.cpp: a dtype/op combination the glue should never have asked for.
[[noreturn]] void elementwise_internal_error(const char* launcher, DType dtype, int op);

}  // namespace graft::cuda
