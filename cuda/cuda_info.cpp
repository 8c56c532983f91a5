#include "cuda/cuda_backend.h"

namespace graft::cuda {

bool built_with_cuda() {
#if defined(GRAFT_HAVE_CUDA) && GRAFT_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace graft::cuda
