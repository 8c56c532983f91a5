#pragma once
// Host-side helpers shared by the reduce area's glue (cuda/reduce_cuda.cpp, softmax_loss_cuda.cpp,
// layer_norm_cuda.cpp, index_cuda.cpp, join_cuda.cpp): a strided device copy and fills that go
// through no dispatcher (so kernels never bump versions or meet dispatch modes), scratch buffers,
// and index validation whose failures become graft::Error instead of device asserts. Views and
// contiguous copies are the shared ones: raw_view (elementwise_cuda.h), kernels::contiguous_as.
// Callers hold a DeviceGuard for the tensors' device; everything runs on current_stream().
#include <cstdint>
#include <optional>

#include "runtime/tensor.h"

namespace graft::cuda::reduce_helpers {

// dst = cast(src) element by element over equal sizes; dst is written through its strides (it
// must not overlap src or itself).
void copy_strided(const Tensor& dst, const Tensor& src);
// Every element of the contiguous t set to value (converted as Scalar(double).to<T>()).
void fill_dense(const Tensor& t, double value);
void zero_dense(const Tensor& t);
// At least `bytes` of device memory (16-byte aligned) that lives as long as the returned tensor;
// undefined when bytes == 0. Freed memory is reused in stream order, so it may die right after the
// launches that use it are queued.
Tensor scratch(int64_t bytes, Device device);

// The value of the first element (in order) of the contiguous int64 idx outside [lo, hi), skipping
// `ignore`; nullopt when every index is valid. Waits for the device.
std::optional<int64_t> first_bad_index(const Tensor& idx, int64_t lo, int64_t hi,
                                       std::optional<int64_t> ignore = std::nullopt);
// The value of the first negative element of the contiguous int64 idx; nullopt when none. Waits.
std::optional<int64_t> first_negative(const Tensor& idx);
// The largest value of the non-empty contiguous int64 idx, whose values are all >= 0. Waits.
int64_t max_index(const Tensor& idx);

}  // namespace graft::cuda::reduce_helpers
