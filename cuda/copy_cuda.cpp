// copy_, fill_, clone, _to_copy and tril/triu on CUDA, including every host<->device and
// device<->device transfer (the dispatcher routes a copy_ between any CPU/CUDA pair here;
// ops::to_device routes CPU->CUDA through copy_ and everything else through _to_copy, see
// ops/copy.cpp).
//
// Transfers:
// - host<->device: one cudaMemcpyAsync on the device's current stream between dense buffers of the
//   destination's shape and dtype. A source that is strided, broadcast or of another dtype is first
//   made dense on its own side (CPU loop on the host, kernel on the device); a strided destination
//   receives through a dense buffer on its side.
// - The host never waits unless it must: with non_blocking and the caller's own host tensor pinned
//   the copy stays asynchronous (as PyTorch); otherwise the stream is synchronised before returning,
//   so the host memory may be read, written or freed right away.
// - device<->device on one GPU: cudaMemcpyAsync for dense same-dtype copies, else the strided
//   copy kernel with conversion. Across GPUs: the source made dense on its device, then
//   cudaMemcpyPeerAsync; both ends are synchronised because the two devices' streams are not
//   ordered against each other (rare path, kept obviously correct).
#include "cuda/cuda_kernels.h"
#include "cuda/cuda_context.h"
#include "cuda/elementwise_cuda.h"
#include "cuda/kernels/copy.h"
#include "ops/kernel_utils.h"
#include "runtime/dispatcher.h"

namespace graft::cuda {
namespace {

using kernels::broadcast_strides;
using kernels::new_tensor;

// src as a tensor of dst's shape (a broadcast view when the shapes differ).
Tensor broadcast_to(const Tensor& src, const Shape& sizes) {
  if (src.sizes() == sizes) return src;
  return raw_view(src, sizes, broadcast_strides(src, sizes));
}

bool dense_as(const Tensor& t, const Shape& sizes, DType dtype) {
  return t.is_contiguous() && t.sizes() == sizes && t.dtype() == dtype;
}

void sync(cudaStream_t stream) { GRAFT_CUDA_CHECK(cudaStreamSynchronize(stream)); }

// self (CUDA) <- src (CPU).
void copy_host_to_device(const Tensor& self, const Tensor& src, bool non_blocking) {
  DeviceGuard guard(self.device().index);
  cudaStream_t stream = current_stream();
  Tensor host = src;
  if (!dense_as(src, self.sizes(), self.dtype())) {
    host = new_tensor(self.sizes(), self.dtype(), kCPU);
    kernels::strided_copy(host, src, broadcast_strides(src, self.sizes()));
  }
  Tensor dev = self.is_contiguous() ? self : new_tensor(self.sizes(), self.dtype(), self.device());
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(dev.data_ptr(), host.data_ptr(), self.nbytes(), cudaMemcpyHostToDevice, stream));
  if (!dev.is_same(self)) copy_on_device(self, dev);
  // A staging buffer dies on return, and pageable memory may be reused by the caller at once.
  bool async = non_blocking && host.is_same(src) && src.is_pinned();
  if (!async) sync(stream);
}

// self (CPU) <- src (CUDA).
void copy_device_to_host(const Tensor& self, const Tensor& src, bool non_blocking) {
  DeviceGuard guard(src.device().index);
  cudaStream_t stream = current_stream();
  Tensor dev = src;
  if (!dense_as(src, self.sizes(), self.dtype())) {
    dev = new_tensor(self.sizes(), self.dtype(), src.device());
    copy_on_device(dev, broadcast_to(src, self.sizes()));
  }
  Tensor host = self.is_contiguous() ? self : new_tensor(self.sizes(), self.dtype(), kCPU);
  GRAFT_CUDA_CHECK(cudaMemcpyAsync(host.data_ptr(), dev.data_ptr(), self.nbytes(), cudaMemcpyDeviceToHost, stream));
  if (!host.is_same(self)) {
    sync(stream);
    kernels::strided_copy(self, host, host.strides());
    return;
  }
  // A device staging buffer may be released at once: the caching allocator reuses it in stream order.
  if (!(non_blocking && self.is_pinned())) sync(stream);
}

// self (CUDA i) <- src (CUDA j), i != j.
void copy_peer(const Tensor& self, const Tensor& src) {
  Tensor dense;
  {
    DeviceGuard guard(src.device().index);
    dense = src;
    if (!dense_as(src, self.sizes(), self.dtype())) {
      dense = new_tensor(self.sizes(), self.dtype(), src.device());
      copy_on_device(dense, broadcast_to(src, self.sizes()));
    }
    sync(current_stream());  // src's producers (and the conversion) are done before the peer copy
  }
  DeviceGuard guard(self.device().index);
  cudaStream_t stream = current_stream();
  Tensor dev = self.is_contiguous() ? self : new_tensor(self.sizes(), self.dtype(), self.device());
  GRAFT_CUDA_CHECK(cudaMemcpyPeerAsync(dev.data_ptr(), self.device().index, dense.data_ptr(), src.device().index,
                                       self.nbytes(), stream));
  if (!dev.is_same(self)) copy_on_device(self, dev);
  sync(stream);  // `dense` may be freed and reused on src's device once we return
}

// self <- src for any pair of devices of which at least one is CUDA; shapes already checked.
void copy_any(const Tensor& self, const Tensor& src, bool non_blocking) {
  if (self.numel() == 0) return;
  if (self.is_cuda() && src.is_cuda()) {
    if (self.device() == src.device()) {
      DeviceGuard guard(self.device().index);
      copy_on_device(self, src);
    } else {
      copy_peer(self, src);
    }
  } else if (self.is_cuda()) {
    copy_host_to_device(self, src, non_blocking);
  } else if (src.is_cuda()) {
    copy_device_to_host(self, src, non_blocking);
  } else {
    kernels::strided_copy(self, src, broadcast_strides(src, self.sizes()));
  }
}

// tril (lower) or triu: self made contiguous on the device, then one pass that copies the kept
// elements and zeroes the rest (kernels/copy.cu). Checks and the clamped diagonal:
// kernels::plan_triangle.
Tensor triangle_cuda(const Tensor& self, int64_t diagonal, bool lower, const char* op) {
  const kernels::TrianglePlan p = kernels::plan_triangle(self, diagonal, op);
  DeviceGuard guard(self.device().index);
  Tensor out = new_tensor(self.sizes(), self.dtype(), self.device());
  Tensor src = kernels::contiguous_as(self);
  launch_triangle(self.dtype(), src.data_ptr(), out.data_ptr(), p.batch, p.rows, p.cols, p.diagonal, lower,
                  current_stream());
  return out;
}

}  // namespace

// ---- kernels (declared in cuda/cuda_kernels.h, registered from the op declarations) ----

Tensor copy_cuda(const Tensor& self, const Tensor& src, bool non_blocking) {
  kernels::check_defined(self, "copy_", "self");
  kernels::check_defined(src, "copy_", "src");
  Shape b = broadcast_shapes(self.sizes(), src.sizes(), "copy_");
  GRAFT_CHECK(b == self.sizes(), "copy_: source of shape ", shape_str(src.sizes()),
              " cannot be broadcast to the destination's shape ", shape_str(self.sizes()));
  if (self.numel() == 0) return self;
  kernels::check_no_internal_overlap(self, "copy_");
  copy_any(self, src, non_blocking);
  return self;
}

Tensor fill_cuda(const Tensor& self, Scalar value) {
  kernels::check_defined(self, "fill_", "self");
  kernels::check_no_internal_overlap(self, "fill_");
  if (self.numel() == 0) return self;
  DeviceGuard guard(self.device().index);
  kernels::TensorIterator it("fill_");
  it.add_output(self).build();
  launch_fill(self.dtype(), geometry_of(it), to_scalar_arg(value), current_stream());
  return self;
}

Tensor clone_cuda(const Tensor& self, MemoryFormat memory_format) {
  kernels::check_defined(self, "clone", "self");
  DeviceGuard guard(self.device().index);
  Tensor out = kernels::new_tensor_in_format(self, memory_format);
  copy_on_device(out, self);
  return out;
}

Tensor to_copy_cuda(const Tensor& self, DType dtype, Device device, bool non_blocking, bool pinned) {
  kernels::check_defined(self, "to", "self");
  Tensor out;
  if (device.is_cuda()) {
    GRAFT_CHECK(!pinned, "to: only CPU tensors can be pinned (asked for ", device, ")");
    DeviceGuard guard(device.index);
    out = new_tensor(self.sizes(), dtype, device);
  } else {
    out = new_tensor(self.sizes(), dtype, device, pinned);
  }
  copy_any(out, self, non_blocking);
  return out;
}

Tensor tril_cuda(const Tensor& self, int64_t diagonal) { return triangle_cuda(self, diagonal, true, "tril"); }
Tensor triu_cuda(const Tensor& self, int64_t diagonal) { return triangle_cuda(self, diagonal, false, "triu"); }

}  // namespace graft::cuda
