#include "runtime/tensor_impl.h"

namespace graft {

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, DType dtype, Shape sizes, Shape strides, int64_t offset)
    : storage_(std::move(storage)), sizes_(std::move(sizes)), strides_(std::move(strides)), offset_(offset),
      dtype_(dtype) {
  refresh();
}

TensorImpl::TensorImpl(std::shared_ptr<Storage> storage, DType dtype, Shape sizes)
    : storage_(std::move(storage)), sizes_(std::move(sizes)), dtype_(dtype) {
  strides_ = contiguous_strides(sizes_);
  refresh();
}

void TensorImpl::set_sizes_and_strides(Shape sizes, Shape strides, int64_t offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::shallow_copy_data_from(const TensorImpl& other) {
  storage_ = other.storage_;
  dtype_ = other.dtype_;
  set_sizes_and_strides(other.sizes_, other.strides_, other.offset_);
}

void TensorImpl::refresh() {
  numel_ = shape_numel(sizes_);
  is_contiguous_ = is_contiguous_layout(sizes_, strides_);
  bool four_d = sizes_.size() == 4;
  is_channels_last_contiguous_ = four_d && is_channels_last_contiguous(sizes_, strides_);
  channels_last_like_ = four_d && strides_like_channels_last(sizes_, strides_);
}

}  // namespace graft
