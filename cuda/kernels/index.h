#pragma once
// Device side of the indexing ops: index validation, embedding/index_select copies, the
// atomicAdd scatters (embedding_backward, index_add, scatter_add), gather and one_hot.
// Plain launch functions over raw device pointers: they launch on `stream` and check the launch.
// Index tensors are contiguous int64 and already validated unless the function says otherwise.
#include <cuda_runtime.h>

#include <cstdint>

#include "runtime/dtype.h"

namespace graft::cuda {

inline constexpr int kIndexMaxDims = 25;

// *first (device, preset to ~0ull by the caller) = the smallest i with idx[i] outside [lo, last]
// (inclusive, so any int64 range can be said), skipping idx[i] == ignore when has_ignore.
// Unchanged when every index is valid.
void launch_find_bad_index(const int64_t* idx, int64_t n, int64_t lo, int64_t last, bool has_ignore, int64_t ignore,
                           unsigned long long* first, cudaStream_t stream);
// *result (device, preset by the caller to a lower bound such as 0) = max(*result, max idx).
void launch_max_index(const int64_t* idx, int64_t n, long long* result, cudaStream_t stream);

// out [outer, n, inner] = x [outer, n_x, inner] with the middle dim picked by idx[n]. Any element
// size (the copy moves raw elements of `elem_size` bytes: 1, 2, 4 or 8).
void launch_index_select(const void* x, void* out, int elem_size, const int64_t* idx, int64_t n, int64_t outer,
                         int64_t n_x, int64_t inner, cudaStream_t stream);

// out [V, D] (zeroed by the caller) [idx[i], :] += grad [n, D] [i, :], except idx[i] == padding_idx.
void launch_embedding_backward(const void* grad, DType dtype, const int64_t* idx, int64_t n, int64_t D,
                               int64_t padding_idx, void* out, cudaStream_t stream);

// out [outer, n_x, inner] (holding self) [o, idx[j], i] += src [outer, n, inner] [o, j, i].
void launch_index_add(const void* src, DType dtype, const int64_t* idx, int64_t n, int64_t outer, int64_t n_x,
                      int64_t inner, void* out, cudaStream_t stream);

// The walk of gather/scatter_add: one step per element of the (contiguous) index, whose sizes are
// `sizes`; `a_strides` address the tensor read or written through the index (with the index value
// along `dim`), `b_strides` the other operand (scatter_add's src; gather's output is contiguous).
struct GatherGeometry {
  int ndim = 0;
  int dim = 0;
  int64_t numel = 0;
  int64_t sizes[kIndexMaxDims] = {};
  int64_t a_strides[kIndexMaxDims] = {};
  int64_t b_strides[kIndexMaxDims] = {};
};

// out[p] (contiguous, index's shape) = x[p with p[dim] = idx[p]].
void launch_gather(const void* x, int elem_size, const int64_t* idx, void* out, const GatherGeometry& g,
                   cudaStream_t stream);
// out[p with p[dim] = idx[p]] += src[p]  (out holds self; a_strides: out, b_strides: src).
void launch_scatter_add(const void* src, DType dtype, const int64_t* idx, void* out, const GatherGeometry& g,
                        cudaStream_t stream);

// out [n, num_classes] (zeroed by the caller) [i, idx[i]] = 1.
void launch_one_hot(const int64_t* idx, int64_t n, int64_t num_classes, int64_t* out, cudaStream_t stream);

}  // namespace graft::cuda
