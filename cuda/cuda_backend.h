#pragma once
// The CUDA backend registers itself with runtime/ (device hooks) when libgraft loads, so code above
// it asks graft::cuda_is_available() and never includes CUDA headers.
#include <string>

namespace graft::cuda {

// True when this build of graft contains the CUDA backend (it may still find no GPU at run time).
bool built_with_cuda();

}  // namespace graft::cuda
