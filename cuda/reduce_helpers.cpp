#include "cuda/reduce_helpers.h"

#include <algorithm>
#include <limits>

#include "cuda/cuda_context.h"
#include "cuda/kernels/index.h"
#include "cuda/kernels/join.h"
#include "ops/kernel_utils.h"

namespace graft::cuda {

[[noreturn]] void reduce_area_internal_error(const char* launcher, DType dtype) {
  GRAFT_ERROR("internal error: ", launcher, " was asked for unsupported dtype ", dtype);
}

namespace reduce_helpers {

void copy_strided(const Tensor& dst, const Tensor& src) {
  GRAFT_CHECK(dst.sizes() == src.sizes(), "internal error: copy_strided between shapes ", shape_str(dst.sizes()),
              " and ", shape_str(src.sizes()));
  int64_t n = dst.numel();
  if (n == 0) return;
  cudaStream_t stream = current_stream();
  if (dst.is_contiguous() && src.is_contiguous() && dst.dtype() == src.dtype()) {
    GRAFT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  // Drop size-1 dims and merge neighbours that are contiguous in both operands (innermost first),
  // so the kernel decomposes as few indices as possible.
  std::vector<int64_t> sz, ss, ds;
  for (int64_t d = dst.dim() - 1; d >= 0; --d) {
    int64_t s = dst.sizes()[d];
    if (s == 1) continue;
    if (!sz.empty() && ss.back() * sz.back() == src.strides()[d] && ds.back() * sz.back() == dst.strides()[d]) {
      sz.back() *= s;
      continue;
    }
    sz.push_back(s);
    ss.push_back(src.strides()[d]);
    ds.push_back(dst.strides()[d]);
  }
  GRAFT_CHECK(static_cast<int>(sz.size()) <= kCopyMaxDims, "copy: tensors of ", sz.size(),
              " non-mergeable dims are not supported on CUDA (at most ", kCopyMaxDims, ")");
  CopyGeometry g;
  g.ndim = static_cast<int>(sz.size());
  g.numel = n;
  for (int i = 0; i < g.ndim; ++i) {  // back to outermost first
    g.sizes[i] = sz[g.ndim - 1 - i];
    g.src_strides[i] = ss[g.ndim - 1 - i];
    g.dst_strides[i] = ds[g.ndim - 1 - i];
  }
  launch_strided_copy(src.data_ptr(), src.dtype(), dst.data_ptr(), dst.dtype(), g, stream);
}

void fill_dense(const Tensor& t, double value) {
  launch_fill_dense(t.data_ptr(), t.dtype(), t.numel(), value, current_stream());
}

void zero_dense(const Tensor& t) {
  if (t.numel() == 0) return;
  GRAFT_CUDA_CHECK(cudaMemsetAsync(t.data_ptr(), 0, t.nbytes(), current_stream()));
}

Tensor scratch(int64_t bytes, Device device) {
  if (bytes <= 0) return Tensor();
  // float64 elements: the allocator's blocks are at least 8-byte aligned, and in practice 512.
  return kernels::new_tensor({(bytes + 15) / 8 + 1}, kFloat64, device);
}

namespace {

// The first element outside [lo, last] (inclusive), skipping `ignore`.
std::optional<int64_t> first_outside(const Tensor& idx, int64_t lo, int64_t last, std::optional<int64_t> ignore) {
  int64_t n = idx.numel();
  if (n == 0) return std::nullopt;
  cudaStream_t stream = current_stream();
  Tensor flag = kernels::new_tensor({1}, kInt64, idx.device());
  auto* first = static_cast<unsigned long long*>(flag.data_ptr());
  GRAFT_CUDA_CHECK(cudaMemsetAsync(first, 0xff, sizeof(unsigned long long), stream));
  launch_find_bad_index(static_cast<const int64_t*>(idx.data_ptr()), n, lo, last, ignore.has_value(),
                        ignore.value_or(0), first, stream);
  unsigned long long pos = 0;
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(&pos, first, sizeof(pos), cudaMemcpyDeviceToHost, stream));
  GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  if (pos == ~0ull) return std::nullopt;
  int64_t value = 0;
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(&value, static_cast<const int64_t*>(idx.data_ptr()) + pos, sizeof(value),
                                   cudaMemcpyDeviceToHost, stream));
  GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return value;
}

}  // namespace

std::optional<int64_t> first_bad_index(const Tensor& idx, int64_t lo, int64_t hi, std::optional<int64_t> ignore) {
  return first_outside(idx, lo, hi - 1, ignore);  // hi >= lo >= 0 here, so hi - 1 cannot overflow
}

std::optional<int64_t> first_negative(const Tensor& idx) {
  return first_outside(idx, 0, std::numeric_limits<int64_t>::max(), std::nullopt);
}

int64_t max_index(const Tensor& idx) {
  cudaStream_t stream = current_stream();
  Tensor result = kernels::new_tensor({1}, kInt64, idx.device());
  auto* r = static_cast<long long*>(result.data_ptr());
  GRAFT_CUDA_CHECK(cudaMemsetAsync(r, 0, sizeof(long long), stream));
  launch_max_index(static_cast<const int64_t*>(idx.data_ptr()), idx.numel(), r, stream);
  long long m = 0;
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(&m, r, sizeof(m), cudaMemcpyDeviceToHost, stream));
  GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream));
  return static_cast<int64_t>(m);
}

}  // namespace reduce_helpers
}  // namespace graft::cuda
