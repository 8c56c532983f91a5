#pragma once
// The CUDA backend's memory: one CachingAllocator per device over cudaMalloc/cudaFree, installed
// for DeviceType::CUDA when libgraft loads (only when a CUDA device exists), and a caching pinned
// host allocator installed with set_pinned_host_allocator.
//
// The installed allocator serves each request from the caching allocator of the *current* device
// (kernels make the output's device current with a DeviceGuard before allocating), tagging the
// block with that device's current stream. Its stats() and reset_peak_stats() are the current
// device's; its empty_cache() empties every device's cache.
//
// Both allocators are leaked on purpose: storages may be destroyed after main() returns, and their
// deleters call back into the allocator that made them.
// Compiled only with the CUDA backend; nothing above cuda/ includes this header.
#include <cuda_runtime.h>

#include "cuda/caching_allocator.h"
#include "runtime/tensor.h"

namespace graft::cuda {

// Marks `t`'s memory as used by work queued on `stream`: when its storage is freed, the block is
// not reused until that work has finished. Needed only when a tensor allocated on one stream is
// used on another one; an empty tensor needs nothing.
void record_stream(const Tensor& t, cudaStream_t stream);

// The caching allocator of `device`; throws graft::Error when there is no such CUDA device.
CachingAllocator& device_allocator(int device);
CachingAllocatorStats allocator_stats(int device);

}  // namespace graft::cuda
