#pragma once
// TensorImpl: one view of a Storage.
//
// Invariants:
// - sizes_.size() == strides_.size(); strides are in elements; element (i0, i1, ...) lives at
//   storage->data() + (offset_ + sum(ik * strides_[k])) * element_size(dtype_).
// - Every element a view can address lies inside its storage (views are built from checked shapes).
// - numel_, is_contiguous_ and the two channels-last flags are caches of sizes_/strides_; they are
//   recomputed by every setter, so readers on the hot path never loop over dims.
// - The version counter lives in the Storage (see storage.h for why): all views of one storage,
//   and detach(), observe the same version.
// - autograd_meta_ is an opaque slot owned by the autograd layer (runtime must not know autograd);
//   it is null for tensors that never took part in autograd, which keeps plain tensors small.
#include <cstdint>
#include <memory>

#include "runtime/dtype.h"
#include "runtime/memory_format.h"
#include "runtime/shape.h"
#include "runtime/storage.h"

namespace graft {

// Base of whatever the autograd layer keeps per tensor (grad, grad_fn, hooks, ...).
struct AutogradMetaInterface {
  virtual ~AutogradMetaInterface() = default;
  virtual bool requires_grad() const = 0;
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<Storage> storage, DType dtype, Shape sizes, Shape strides, int64_t offset);
  // A fresh contiguous tensor.
  TensorImpl(std::shared_ptr<Storage> storage, DType dtype, Shape sizes);

  const Shape& sizes() const { return sizes_; }
  const Shape& strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t storage_offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device(); }
  bool is_contiguous() const { return is_contiguous_; }
  bool is_contiguous(MemoryFormat f) const {
    return f == MemoryFormat::ChannelsLast ? is_channels_last_contiguous_ : is_contiguous_;
  }
  // ChannelsLast when the strides are ordered like NHWC (see memory_format.h), else Contiguous.
  MemoryFormat suggest_memory_format() const {
    return channels_last_like_ ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  }
  const std::shared_ptr<Storage>& storage() const { return storage_; }
  void* data() const {
    return static_cast<char*>(storage_->data()) + offset_ * static_cast<int64_t>(element_size(dtype_));
  }

  int64_t version() const { return storage_->version(); }
  void bump_version() { storage_->bump_version(); }

  void set_sizes_and_strides(Shape sizes, Shape strides, int64_t offset);
  // Points this impl at other's memory and layout (storage, dtype, sizes, strides, offset) and
  // keeps its own autograd meta: the runtime half of Tensor::set_data.
  void shallow_copy_data_from(const TensorImpl& other);

  AutogradMetaInterface* autograd_meta() const { return autograd_meta_.get(); }
  void set_autograd_meta(std::unique_ptr<AutogradMetaInterface> m) { autograd_meta_ = std::move(m); }

 private:
  void refresh();

  std::shared_ptr<Storage> storage_;
  Shape sizes_, strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  DType dtype_;
  bool is_contiguous_ = true;
  bool is_channels_last_contiguous_ = false;
  bool channels_last_like_ = false;
  std::unique_ptr<AutogradMetaInterface> autograd_meta_;
};

}  // namespace graft
