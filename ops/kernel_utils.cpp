#include "ops/kernel_utils.h"

#include <algorithm>

namespace graft::kernels {

Tensor new_tensor(const Shape& sizes, DType dtype, Device device, bool pinned) {
  for (int64_t s : sizes)
    GRAFT_CHECK(s >= 0, "empty: negative dimension in size ", shape_str(sizes));
  size_t nbytes = static_cast<size_t>(shape_numel(sizes)) * element_size(dtype);
  auto storage = pinned ? std::make_shared<Storage>(nbytes, get_pinned_host_allocator(), true)
                        : std::make_shared<Storage>(get_allocator(device)->allocate_on(device, nbytes), nbytes);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), dtype, sizes));
}

Tensor new_tensor_like(const Tensor& t) { return new_tensor(t.sizes(), t.dtype(), t.device()); }

Tensor new_tensor_in_format(const Tensor& t, MemoryFormat f, DType dtype, Device device) {
  if (f == MemoryFormat::Preserve) {
    // Dense: t's exact strides, size-1 dims included (a [32, 1, 3, 3] channels-last weight is also
    // "contiguous", but its strides still say channels-last to the convolution that reads it).
    return new_strided(t.sizes(), preserve_format_strides(t.sizes(), t.strides()), dtype, device);
  }
  if (f == MemoryFormat::ChannelsLast) {
    GRAFT_CHECK(t.dim() == 4, "contiguous: memory format ChannelsLast needs a 4-D tensor, got ", describe(t));
    return new_strided(t.sizes(), channels_last_strides(t.sizes()), dtype, device);
  }
  return new_tensor(t.sizes(), dtype, device);
}

Tensor new_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device) {
  GRAFT_CHECK(sizes.size() == strides.size(), "empty_strided: sizes ", shape_str(sizes), " and strides ",
              shape_str(strides), " differ in length");
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    GRAFT_CHECK(sizes[i] >= 0 && strides[i] >= 0, "empty_strided: negative size or stride in ", shape_str(sizes),
                " / ", shape_str(strides));
    if (sizes[i] == 0) span = 0;
  }
  if (span != 0)
    for (size_t i = 0; i < sizes.size(); ++i) span += (sizes[i] - 1) * strides[i];
  size_t nbytes = static_cast<size_t>(span) * element_size(dtype);
  auto storage = std::make_shared<Storage>(get_allocator(device)->allocate_on(device, nbytes), nbytes);
  return Tensor(std::make_shared<TensorImpl>(std::move(storage), dtype, sizes, strides, 0));
}

Shape broadcast_strides(const Tensor& t, const Shape& target) {
  size_t nd = target.size(), td = static_cast<size_t>(t.dim());
  Shape st(nd, 0);
  for (size_t i = 0; i < td; ++i) {
    size_t o = nd - td + i;
    st[o] = t.sizes()[i] == 1 && target[o] != 1 ? 0 : t.strides()[i];
  }
  return st;
}

void check_defined(const Tensor& t, const char* op, const char* arg) {
  GRAFT_CHECK(t.defined(), op, ": argument '", arg, "' is an undefined tensor");
}

void check_floating(const Tensor& t, const char* op) {
  GRAFT_CHECK(is_floating(t.dtype()), op, ": expected a floating point tensor (float32 or float64), got ",
              describe(t));
}

void check_dim(const Tensor& t, int64_t ndim, const char* op, const char* arg) {
  GRAFT_CHECK(t.dim() == ndim, op, ": expected '", arg, "' to be ", ndim, "-D, got ", describe(t));
}

TrianglePlan plan_triangle(const Tensor& t, int64_t diagonal, const char* op) {
  check_defined(t, op, "self");
  GRAFT_CHECK(t.dim() >= 2, op, ": input tensor must have at least 2 dimensions, got ", describe(t));
  TrianglePlan p;
  p.rows = t.size(-2);
  p.cols = t.size(-1);
  for (int64_t d = 0; d + 2 < t.dim(); ++d) p.batch *= t.size(d);
  p.diagonal = diagonal < -p.rows ? -p.rows : diagonal > p.cols ? p.cols : diagonal;
  return p;
}

void check_same_dtype(const Tensor& a, const Tensor& b, const char* op) {
  GRAFT_CHECK(a.dtype() == b.dtype(), op, ": expected tensors of the same dtype, got ", describe(a), " and ",
              describe(b));
}

void check_index_dtype(const Tensor& index, const char* op) {
  GRAFT_CHECK(index.dtype() == kInt64, op, ": expected an int64 index tensor, got ", describe(index));
}

void check_no_internal_overlap(const Tensor& t, const char* op) {
  if (t.numel() == 0) return;  // no element, so none shares an address
  for (int64_t d = 0; d < t.dim(); ++d)
    GRAFT_CHECK(!(t.strides()[d] == 0 && t.sizes()[d] > 1), op,
                ": unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location (", describe(t), ", strides ", shape_str(t.strides()), "); clone() it first");
}

double read_as_double(const void* base, DType t, int64_t offset) {
  switch (t) {
    case DType::Float32: return static_cast<const float*>(base)[offset];
    case DType::Float64: return static_cast<const double*>(base)[offset];
    case DType::Int64: return static_cast<double>(static_cast<const int64_t*>(base)[offset]);
    case DType::Bool: return static_cast<const bool*>(base)[offset] ? 1.0 : 0.0;
    case DType::BFloat16: return static_cast<float>(static_cast<const BFloat16*>(base)[offset]);
    case DType::Float16: return static_cast<float>(static_cast<const Half*>(base)[offset]);
    case DType::UInt8: return static_cast<const uint8_t*>(base)[offset];
    case DType::Int32: return static_cast<const int32_t*>(base)[offset];
  }
  return 0;
}

}  // namespace graft::kernels
