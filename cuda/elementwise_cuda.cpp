// CudaIter: broadcasting, checks, overlap separation and dim coalescing for the CUDA elementwise
// kernels (see elementwise_cuda.h). A port of ops/tensor_iterator.cpp's logic with element strides
// and device copies; the error messages are the CPU's, so both devices fail the same way.
#include "cuda/elementwise_cuda.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "cuda/cuda_context.h"
#include "cuda/kernels/copy.h"
#include "ops/kernel_utils.h"
#include "ops/tensor_iterator.h"

namespace graft::cuda {

void elementwise_internal_error(const char* launcher, DType dtype, int op) {
  GRAFT_ERROR(launcher, ": internal error: no CUDA kernel for dtype ", dtype, " and op code ", op);
}

namespace {

// Element range [lo, hi) a strided tensor can touch, in bytes (empty tensors touch nothing).
std::pair<const char*, const char*> memory_range(const Tensor& t) {
  const char* lo = static_cast<const char*>(t.data_ptr());
  if (t.numel() == 0) return {lo, lo};
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.sizes()[d] - 1) * std::abs(t.strides()[d]);
  auto es = static_cast<int64_t>(t.element_size());
  return {lo, lo + span * es};
}

bool ranges_overlap(const Tensor& a, const Tensor& b) {
  auto [alo, ahi] = memory_range(a);
  auto [blo, bhi] = memory_range(b);
  return alo < bhi && blo < ahi;
}

Tensor fresh_copy(const Tensor& t) {
  Tensor copy = kernels::new_tensor(t.sizes(), t.dtype(), t.device());
  copy_on_device(copy, t);
  return copy;
}

}  // namespace

ScalarArg to_scalar_arg(const Scalar& s) {
  ScalarArg a;
  a.f = s.to<double>();
  a.i = s.to<int64_t>();
  a.b = s.to<bool>();
  return a;
}

Tensor raw_view(const Tensor& t, const Shape& sizes, const Shape& strides) {
  return Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), t.dtype(), sizes, strides, t.storage_offset()));
}

CudaIter& CudaIter::add_output(const Tensor& out) {
  GRAFT_CHECK(nops_ == 1 && !have_output_, op_, ": internal error: the output must be added first and once");
  kernels::check_defined(out, op_, "out");
  ops_[0] = out;
  have_output_ = true;
  return *this;
}

CudaIter& CudaIter::add_input(const Tensor& in) {
  GRAFT_CHECK(nops_ < kMaxOperands, op_, ": internal error: too many inputs");
  kernels::check_defined(in, op_, "input");
  ops_[nops_++] = in;
  return *this;
}

CudaIter& CudaIter::add_input(const Tensor& in, DType as) {
  kernels::check_defined(in, op_, "input");
  if (in.dtype() == as) return add_input(in);
  return add_input(contiguous_cuda(in, as));
}

CudaIter& CudaIter::build(DType out_dtype) {
  build_impl(!have_output_, out_dtype);
  return *this;
}

CudaIter& CudaIter::build() {
  GRAFT_CHECK(have_output_, op_, ": internal error: build() without an output needs the output dtype");
  build_impl(false, ops_[0].dtype());
  return *this;
}

bool CudaIter::try_flat(bool allocate, DType out_dtype) {
  const Shape& sizes = allocate ? ops_[1].sizes() : ops_[0].sizes();
  if (!allocate && !ops_[0].is_contiguous()) return false;
  for (int k = 1; k < nops_; ++k)
    if (!ops_[k].is_contiguous() || ops_[k].sizes() != sizes) return false;
  if (allocate) {
    ops_[0] = kernels::new_tensor(sizes, out_dtype, ops_[1].device());
  } else {
    for (int k = 1; k < nops_; ++k) {
      // Contiguous with equal shapes: either exactly the output's memory or a shifted window of it.
      const Tensor& in = ops_[k];
      if (in.is_alias_of(ops_[0]) && in.data_ptr() != ops_[0].data_ptr() && ranges_overlap(in, ops_[0]))
        ops_[k] = fresh_copy(in);
    }
  }
  geom_.numel = ops_[0].numel();
  geom_.ndim = 1;
  geom_.sizes[0] = geom_.numel;
  for (int k = 0; k < nops_; ++k) geom_.strides[0][k] = 1;
  finish();
  return true;
}

void CudaIter::build_impl(bool allocate, DType out_dtype) {
  GRAFT_CHECK(nops_ >= 2 || !allocate, op_, ": internal error: an elementwise op needs at least one input");
  if (!allocate) kernels::check_no_internal_overlap(op_, ops_[0]);
  if (try_flat(allocate, out_dtype)) return;

  int nd = 0;
  for (int k = 1; k < nops_; ++k) nd = std::max(nd, static_cast<int>(ops_[k].dim()));
  if (!allocate) nd = std::max(nd, static_cast<int>(ops_[0].dim()));
  GRAFT_CHECK(nd <= kMaxDims, op_, ": tensors with more than ", kMaxDims, " dimensions are not supported");
  int64_t bshape[kMaxDims];
  std::fill(bshape, bshape + nd, int64_t{1});
  for (int k = 1; k < nops_; ++k) {
    const Shape& s = ops_[k].sizes();
    int off = nd - static_cast<int>(s.size());
    for (int i = 0; i < static_cast<int>(s.size()); ++i) {
      int64_t& b = bshape[off + i];
      if (s[i] == b || s[i] == 1) continue;
      if (b == 1) {
        b = s[i];
        continue;
      }
      std::ostringstream msg;
      msg << op_ << ": shapes ";
      for (int j = 1; j < nops_; ++j)
        msg << (j == 1 ? "" : j + 1 == nops_ ? " and " : ", ") << shape_str(ops_[j].sizes());
      msg << " cannot be broadcast (size " << b << " != " << s[i] << " at dimension " << off + i
          << " of the broadcast shape)";
      GRAFT_ERROR(msg.str());
    }
  }

  if (allocate) {
    ops_[0] = kernels::new_tensor(Shape(bshape, bshape + nd), out_dtype, ops_[1].device());
  } else {
    const Shape& os = ops_[0].sizes();
    if (nops_ == 1) {
      std::copy(os.begin(), os.end(), bshape);  // the output alone (fill): its own shape
    } else {
      bool match = static_cast<int>(os.size()) == nd && std::equal(os.begin(), os.end(), bshape);
      GRAFT_CHECK(match, op_, ": output with shape ", shape_str(os), " doesn't match the broadcast shape ",
                  shape_str(Shape(bshape, bshape + nd)));
    }
    separate_overlapping_inputs();
  }

  geom_.numel = ops_[0].numel();
  for (int i = 0; i < nd; ++i) {
    int o = nd - 1 - i;
    geom_.sizes[i] = bshape[o];
    for (int k = 0; k < nops_; ++k) {
      const Tensor& t = ops_[k];
      int j = o - (nd - static_cast<int>(t.dim()));
      bool bcast = j < 0 || (t.sizes()[j] == 1 && bshape[o] != 1);
      geom_.strides[i][k] = bcast ? 0 : t.strides()[j];
    }
  }
  geom_.ndim = nd;
  if (!allocate && !ops_[0].is_contiguous()) reorder_by_output();
  coalesce();
  finish();
}

void CudaIter::separate_overlapping_inputs() {
  const Tensor& out = ops_[0];
  for (int k = 1; k < nops_; ++k) {
    const Tensor& in = ops_[k];
    if (!in.is_alias_of(out) || !ranges_overlap(in, out)) continue;
    bool same = in.data_ptr() == out.data_ptr() && in.dim() == out.dim();
    for (int64_t d = 0; same && d < out.dim(); ++d)
      same = out.sizes()[d] == 1 || (in.sizes()[d] == out.sizes()[d] && in.strides()[d] == out.strides()[d]);
    if (!same) ops_[k] = fresh_copy(in);
  }
}

// Consecutive threads then write consecutive output addresses (coalesced stores).
void CudaIter::reorder_by_output() {
  int nd = geom_.ndim;
  int perm[kMaxDims];
  for (int i = 0; i < nd; ++i) perm[i] = i;
  for (int i = 1; i < nd; ++i)
    for (int j = i; j > 0 && geom_.strides[perm[j]][0] < geom_.strides[perm[j - 1]][0]; --j)
      std::swap(perm[j], perm[j - 1]);
  int64_t sizes[kMaxDims], strides[kMaxDims][kMaxOperands];
  for (int i = 0; i < nd; ++i) {
    sizes[i] = geom_.sizes[perm[i]];
    for (int k = 0; k < nops_; ++k) strides[i][k] = geom_.strides[perm[i]][k];
  }
  for (int i = 0; i < nd; ++i) {
    geom_.sizes[i] = sizes[i];
    for (int k = 0; k < nops_; ++k) geom_.strides[i][k] = strides[i][k];
  }
}

void CudaIter::coalesce() {
  int kept = 0;
  for (int i = 0; i < geom_.ndim; ++i) {
    if (geom_.sizes[i] == 1) continue;
    if (kept > 0) {
      int p = kept - 1;
      bool merge = true;
      for (int k = 0; k < nops_ && merge; ++k) merge = geom_.strides[p][k] * geom_.sizes[p] == geom_.strides[i][k];
      if (merge) {
        geom_.sizes[p] *= geom_.sizes[i];
        continue;
      }
    }
    geom_.sizes[kept] = geom_.sizes[i];
    for (int k = 0; k < nops_; ++k) geom_.strides[kept][k] = geom_.strides[i][k];
    ++kept;
  }
  if (kept == 0) {  // a single element (or 0-d operands)
    geom_.sizes[0] = 1;
    for (int k = 0; k < nops_; ++k) geom_.strides[0][k] = 1;
    kept = 1;
  }
  geom_.ndim = kept;
}

void CudaIter::finish() {
  geom_.nops = nops_;
  for (int k = 0; k < nops_; ++k) geom_.data[k] = ops_[k].data_ptr();
  bool flat = geom_.ndim == 1;
  for (int k = 0; k < nops_ && flat; ++k) flat = geom_.strides[0][k] == 1;
  geom_.contiguous = flat;
}

void copy_on_device(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0) return;
  cudaStream_t stream = current_stream(dst.device().index);
  bool disjoint = !dst.is_alias_of(src) || !ranges_overlap(dst, src);
  if (dst.dtype() == src.dtype() && dst.is_contiguous() && src.is_contiguous() && dst.sizes() == src.sizes() &&
      (disjoint || dst.data_ptr() == src.data_ptr())) {
    if (dst.data_ptr() != src.data_ptr())
      GRAFT_CUDA_CHECK(cudaMemcpyAsync(dst.data_ptr(), src.data_ptr(), dst.nbytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  Tensor s = src.sizes() == dst.sizes() ? src : raw_view(src, dst.sizes(), kernels::broadcast_strides(src, dst.sizes()));
  CudaIter it("copy_");
  it.add_output(dst).add_input(s).build();
  launch_copy(dst.dtype(), it.input(0).dtype(), it.geometry(), stream);
}

Tensor contiguous_cuda(const Tensor& t, DType dtype) {
  if (t.is_contiguous() && t.dtype() == dtype) return t;
  Tensor out = kernels::new_tensor(t.sizes(), dtype, t.device());
  copy_on_device(out, t);
  return out;
}

}  // namespace graft::cuda
