#pragma once
// Helpers shared by the CPU kernels: dtype dispatch, undispatched allocation, strided loops and
// argument checks. Kernels allocate outputs with new_tensor() (not ops::empty) so that nothing they
// do internally goes through the dispatcher or bumps a version counter.
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "runtime/error.h"
#include "runtime/tensor.h"

namespace graft::kernels {

// Calls f.template operator()<T>() with T the C++ type of `t`, for the dtypes kernels compute in
// (float32, float64, int64, bool). bfloat16/float16 reach a kernel through its compute type
// (opmath_t: float) or the registration's float fallback (ops/reduced_precision_fallback.h), and
// uint8/int32 through int64, so a kernel written for these four needs no 16-bit arithmetic.
template <class F>
decltype(auto) dispatch_dtype(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<bool>();
    default: break;
  }
  GRAFT_ERROR(op, ": unsupported dtype ", t);
}
// Every dtype, storage types included: for kernels that only move or convert elements (copy,
// fill, gather, cat, random fills), where T is read and written but never computed with.
template <class F>
decltype(auto) dispatch_all_dtypes(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::Bool: return f.template operator()<bool>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float16: return f.template operator()<Half>();
    case DType::UInt8: return f.template operator()<uint8_t>();
    case DType::Int32: return f.template operator()<int32_t>();
  }
  GRAFT_ERROR(op, ": unsupported dtype ", t);
}
template <class F>
decltype(auto) dispatch_floating(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: break;
  }
  GRAFT_ERROR(op, ": expected a floating point tensor (float32 or float64), got ", t);
}
// float32, bfloat16 and float16: kernels with a native 16-bit path (load a row, compute in float,
// store it rounded once) dispatch through this; float64 goes its own way.
template <class F>
decltype(auto) dispatch_float_or_reduced(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f.template operator()<float>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float16: return f.template operator()<Half>();
    default: break;
  }
  GRAFT_ERROR(op, ": expected float32, bfloat16 or float16, got ", t);
}

// float32, float64, bfloat16 and float16: kernels that compute the 16-bit dtypes in float
// (math::opmath_t) next to their float32/float64 paths.
template <class F>
decltype(auto) dispatch_floating_or_reduced(DType t, const char* op, F&& f) {
  if (is_reduced_floating(t)) return dispatch_float_or_reduced(t, op, std::forward<F>(f));
  return dispatch_floating(t, op, std::forward<F>(f));
}

// A fresh, contiguous, uninitialised tensor. Never dispatched, version 0.
Tensor new_tensor(const Shape& sizes, DType dtype, Device device, bool pinned = false);
Tensor new_tensor_like(const Tensor& t);  // same sizes/dtype/device, contiguous
Tensor new_strided(const Shape& sizes, const Shape& strides, DType dtype, Device device);
// A fresh tensor shaped like `t` (dtype and device given) laid out in `f`: Contiguous, ChannelsLast
// (4-D only) or Preserve (t's own strides when t is dense without overlap, else Contiguous).
Tensor new_tensor_in_format(const Tensor& t, MemoryFormat f, DType dtype, Device device);
inline Tensor new_tensor_in_format(const Tensor& t, MemoryFormat f) {
  return new_tensor_in_format(t, f, t.dtype(), t.device());
}

// The strides that read `t` broadcast to `target` (0 where t's dim is 1 or missing). `target` must
// be a valid broadcast of t's shape.
Shape broadcast_strides(const Tensor& t, const Shape& target);

// Undispatched CPU building blocks other kernels reuse (defined in ops/copy.cpp).
void strided_copy(const Tensor& dst, const Tensor& src, const Shape& src_strides);
Tensor contiguous_cpu(const Tensor& t, DType dtype);  // t itself when already contiguous in dtype
inline Tensor contiguous_cpu(const Tensor& t) { return contiguous_cpu(t, t.dtype()); }
Tensor fill_cpu(const Tensor& self, Scalar value);

// The undispatched, device-local copy under the shared TensorIterator (dtype conversion, overlap
// copies) and every kernel's "make this contiguous": dst = src read broadcast to dst's shape and
// converted to dst's dtype. src may overlap dst only by lying exactly on it. CPU is built in; a
// device backend installs its copy when it loads (cuda/elementwise_cuda.cpp), so nothing in ops/
// includes a device header, and nothing here goes through the dispatcher (a dispatch mode never
// sees a nested clone, on any device).
using DeviceCopyFn = void (*)(const Tensor& dst, const Tensor& src);
void set_device_copy(DeviceType type, DeviceCopyFn fn);
void device_copy(const Tensor& dst, const Tensor& src);
// A contiguous copy of t in `dtype` on t's device, or t itself when it already is one.
Tensor contiguous_as(const Tensor& t, DType dtype);
inline Tensor contiguous_as(const Tensor& t) { return contiguous_as(t, t.dtype()); }
// t dense in `f` (t itself when it already is; its memory order is then f's, whatever the strides
// of its size-1 dims say), on t's device.
Tensor contiguous_in_format(const Tensor& t, MemoryFormat f);

// Checks.
void check_defined(const Tensor& t, const char* op, const char* arg);
void check_floating(const Tensor& t, const char* op);
void check_dim(const Tensor& t, int64_t ndim, const char* op, const char* arg);
void check_same_dtype(const Tensor& a, const Tensor& b, const char* op);
void check_index_dtype(const Tensor& index, const char* op);
// In-place writes into a tensor whose elements share memory (an expanded view) are errors.
void check_no_internal_overlap(const Tensor& t, const char* op);

// tril/triu (both devices): t is a batch of matrices, at least 2-D. Matrix row i keeps columns
// [0, i + diagonal + 1) for tril and [i + diagonal, cols) for triu, each bound clamped to
// [0, cols] (clamp_col); every other element becomes zero. The plan's diagonal is the argument
// clamped to [-rows, cols], which keeps the same elements and cannot overflow those sums.
struct TrianglePlan {
  int64_t batch = 1, rows = 0, cols = 0, diagonal = 0;
};
TrianglePlan plan_triangle(const Tensor& t, int64_t diagonal, const char* op);
inline int64_t clamp_col(int64_t c, int64_t cols) { return c < 0 ? 0 : c > cols ? cols : c; }

// Calls f(offset) with the element offset (in elements, from data()) of every element of a strided
// tensor in row-major order. The generic fallback for kernels that have no faster path.
template <class F>
void for_each_offset(const Shape& sizes, const Shape& strides, F&& f) {
  int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n == 0) return;
  if (nd == 0) {
    f(int64_t{0});
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (int64_t i = 0; i < n; ++i) {
    f(off);
    for (int64_t d = nd - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d]) {
        off += strides[d];
        break;
      }
      off -= strides[d] * (sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

// Two-operand version: f(offset_a, offset_b) over the same sizes with two stride sets.
template <class F>
void for_each_offset2(const Shape& sizes, const Shape& sa, const Shape& sb, F&& f) {
  int64_t nd = static_cast<int64_t>(sizes.size());
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n == 0) return;
  if (nd == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  // The innermost dim runs as a plain loop; the outer dims advance an index counter.
  int64_t inner = sizes[nd - 1], ia = sa[nd - 1], ib = sb[nd - 1];
  std::vector<int64_t> idx(nd, 0);
  int64_t oa = 0, ob = 0;
  for (int64_t outer = 0; outer < n / inner; ++outer) {
    for (int64_t i = 0; i < inner; ++i) f(oa + i * ia, ob + i * ib);
    for (int64_t d = nd - 2; d >= 0; --d) {
      if (++idx[d] < sizes[d]) {
        oa += sa[d];
        ob += sb[d];
        break;
      }
      oa -= sa[d] * (sizes[d] - 1);
      ob -= sb[d] * (sizes[d] - 1);
      idx[d] = 0;
    }
  }
}

// Reads/writes one element at an element offset, converting through double (for generic paths).
double read_as_double(const void* base, DType t, int64_t offset);

}  // namespace graft::kernels
