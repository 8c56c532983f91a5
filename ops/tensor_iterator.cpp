// TensorIterator: broadcasting, stride computation and dim coalescing (see tensor_iterator.h).
#include "ops/tensor_iterator.h"

#include <algorithm>
#include <sstream>

namespace graft::kernels {

namespace {

// Byte range [lo, hi) a strided tensor can touch (empty tensors touch nothing).
std::pair<const char*, const char*> memory_range(const Tensor& t) {
  const char* lo = static_cast<const char*>(t.data_ptr());
  if (t.numel() == 0) return {lo, lo};
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.sizes()[d] - 1) * std::abs(t.strides()[d]);
  int64_t neg = 0;
  for (int64_t d = 0; d < t.dim(); ++d)
    if (t.strides()[d] < 0) neg += (t.sizes()[d] - 1) * t.strides()[d];
  auto es = static_cast<int64_t>(t.element_size());
  return {lo + neg * es, lo + (neg + span) * es};
}

// On the operand's own device (device_copy), so one iterator serves every backend. A dense layout
// is kept: the flat path pairs elements by memory position, so the copy must lie like the original.
Tensor fresh_copy(const Tensor& t) {
  Tensor copy = new_tensor_in_format(t, MemoryFormat::Preserve);
  device_copy(copy, t);
  return copy;
}

}  // namespace

bool ranges_overlap(const Tensor& a, const Tensor& b) {
  auto [alo, ahi] = memory_range(a);
  auto [blo, bhi] = memory_range(b);
  return alo < bhi && blo < ahi;
}

DType combine_categories(DType higher, DType lower) {
  if (is_floating(higher)) return higher;
  if (higher == kBool || is_floating(lower)) return promote_types(higher, lower);
  return higher;  // integral over integral or bool
}

DType result_type(const Tensor& a, const Tensor& b) {
  const bool za = a.dim() == 0, zb = b.dim() == 0;
  if (za == zb) return promote_types(a.dtype(), b.dtype());
  return za ? combine_categories(b.dtype(), a.dtype()) : combine_categories(a.dtype(), b.dtype());
}

DType result_type(const Tensor& a, const Tensor& b, const Tensor& c) {
  bool have_dim = false, have_zero = false;
  DType dim = kBool, zero = kBool;
  for (const Tensor* t : {&a, &b, &c}) {
    DType& r = t->dim() == 0 ? zero : dim;
    bool& have = t->dim() == 0 ? have_zero : have_dim;
    r = have ? promote_types(r, t->dtype()) : t->dtype();
    have = true;
  }
  if (!have_dim) return zero;
  return have_zero ? combine_categories(dim, zero) : dim;
}

DType result_type(DType t, const Scalar& s) {
  // A Scalar takes part as its category's default dtype (PyTorch's wrapped numbers).
  return combine_categories(t, s.is_bool() ? kBool : s.is_integral() ? kInt64 : kFloat32);
}

bool can_cast(DType from, DType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  if (from != kBool && to == kBool) return false;
  return true;
}

void check_inplace_cast(const char* op, DType result, const Tensor& self) {
  GRAFT_CHECK(can_cast(result, self.dtype()), op, ": result type ", dtype_type_name(result),
              " can't be cast to the desired output type ", dtype_type_name(self.dtype()), " (self is ",
              describe(self), ")");
}

void check_no_internal_overlap(const char* op, const Tensor& out) {
  if (out.numel() == 0) return;  // no element, so none shares an address
  for (int64_t d = 0; d < out.dim(); ++d)
    GRAFT_CHECK(out.strides()[d] != 0 || out.sizes()[d] <= 1, op,
                ": unsupported operation: more than one element of the written-to tensor refers to a single memory "
                "location (output ",
                describe(out), " with strides ", shape_str(out.strides()),
                "). Please clone() the tensor before performing the operation.");
}

TensorIterator& TensorIterator::add_output(const Tensor& out) {
  GRAFT_CHECK(nops_ == 1 && !have_output_, op_, ": internal error: the output must be added first and once");
  check_defined(out, op_, "out");
  ops_[0] = out;
  have_output_ = true;
  return *this;
}

TensorIterator& TensorIterator::add_input(const Tensor& in) {
  GRAFT_CHECK(nops_ < kIterMaxOperands, op_, ": internal error: too many inputs");
  check_defined(in, op_, "input");
  ops_[nops_++] = in;
  return *this;
}

TensorIterator& TensorIterator::add_input(const Tensor& in, DType as) {
  check_defined(in, op_, "input");
  if (in.dtype() == as) return add_input(in);
  return add_input(contiguous_as(in, as));
}

TensorIterator& TensorIterator::build(DType out_dtype) {
  build_impl(!have_output_, out_dtype);
  return *this;
}

TensorIterator& TensorIterator::build() {
  GRAFT_CHECK(have_output_, op_, ": internal error: build() without an output needs the output dtype");
  build_impl(false, ops_[0].dtype());
  return *this;
}

// Whether every operand from `first` on has `ref`'s sizes and exactly its strides.
static bool same_layout(const std::array<Tensor, kIterMaxOperands>& ops, int first, int n, const Tensor& ref) {
  for (int k = first; k < n; ++k)
    if (ops[k].sizes() != ref.sizes() || ops[k].strides() != ref.strides()) return false;
  return true;
}

// A dense layout other than row-major (channels-last, a permuted copy) that a fresh tensor can take.
static bool is_dense_permuted(const Tensor& t) {
  if (t.is_contiguous()) return false;
  for (int64_t s : t.strides())
    if (s < 0) return false;
  return is_non_overlapping_and_dense(t.sizes(), t.strides());
}

// The fast path: every input contiguous with one shape (and so is a given output), or every
// operand dense in one shared permuted layout (channels-last activations): one flat dim over memory
// order, and an allocated output takes that layout.
bool TensorIterator::try_flat(bool allocate, DType out_dtype) {
  const Shape& sizes = allocate ? ops_[1].sizes() : ops_[0].sizes();
  bool contiguous = allocate || ops_[0].is_contiguous();
  for (int k = 1; k < nops_ && contiguous; ++k) contiguous = ops_[k].is_contiguous() && ops_[k].sizes() == sizes;
  if (!contiguous) {
    const Tensor& ref = allocate ? ops_[1] : ops_[0];
    if (!is_dense_permuted(ref) || !same_layout(ops_, 1, nops_, ref)) return false;
  }
  if (allocate) {
    ops_[0] = contiguous ? new_tensor(sizes, out_dtype, ops_[1].device())
                         : new_strided(sizes, ops_[1].strides(), out_dtype, ops_[1].device());
  } else {
    for (int k = 1; k < nops_; ++k) {
      // Contiguous with equal shapes: either exactly the output's memory or a shifted window of it.
      const Tensor& in = ops_[k];
      if (in.is_alias_of(ops_[0]) && in.data_ptr() != ops_[0].data_ptr() && ranges_overlap(in, ops_[0]))
        ops_[k] = fresh_copy(in);
    }
  }
  numel_ = ops_[0].numel();
  ndim_ = 1;
  shape_[0] = numel_;
  for (int k = 0; k < nops_; ++k) {
    base_[k] = static_cast<char*>(ops_[k].data_ptr());
    strides_[0][k] = static_cast<int64_t>(ops_[k].element_size());
  }
  return true;
}

void TensorIterator::build_impl(bool allocate, DType out_dtype) {
  GRAFT_CHECK(nops_ >= 2 || !allocate, op_, ": internal error: an elementwise op needs at least one input");
  if (!allocate) check_no_internal_overlap(op_, ops_[0]);
  if (try_flat(allocate, out_dtype)) return;

  // Broadcast shape of the inputs, right-aligned, in fixed storage.
  int nd = 0;
  for (int k = 1; k < nops_; ++k) nd = std::max(nd, static_cast<int>(ops_[k].dim()));
  if (!allocate) nd = std::max(nd, static_cast<int>(ops_[0].dim()));
  GRAFT_CHECK(nd <= kIterMaxDims, op_, ": tensors with more than ", kIterMaxDims, " dimensions are not supported");
  int64_t bshape[kIterMaxDims];
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
    // The output follows the first input that spans the whole result in a dense permuted layout
    // (a channels-last activation plus a broadcast bias stays channels-last), else row-major. An
    // input expanded to the result's shape (stride 0 over a dim of size > 1) says nothing about
    // layout and is passed over, as PyTorch does: a channels-last tensor times an expanded
    // gradient (a sum's backward) stays channels-last.
    Shape out_shape(bshape, bshape + nd);
    auto expanded = [](const Tensor& t) {
      for (int64_t d = 0; d < t.dim(); ++d)
        if (t.stride(d) == 0 && t.size(d) > 1) return true;
      return false;
    };
    const Tensor* like = nullptr;
    for (int k = 1; k < nops_ && !like; ++k)
      if (ops_[k].sizes() == out_shape && !expanded(ops_[k])) like = &ops_[k];
    ops_[0] = like && is_dense_permuted(*like) ? new_strided(out_shape, like->strides(), out_dtype, ops_[1].device())
                                               : new_tensor(out_shape, out_dtype, ops_[1].device());
  } else {
    const Shape& os = ops_[0].sizes();
    if (nops_ == 1) {
      std::copy(os.begin(), os.end(), bshape);  // the output alone (a fill): its own shape
    } else {
      bool match = static_cast<int>(os.size()) == nd && std::equal(os.begin(), os.end(), bshape);
      GRAFT_CHECK(match, op_, ": output with shape ", shape_str(os), " doesn't match the broadcast shape ",
                  shape_str(Shape(bshape, bshape + nd)));
    }
    separate_overlapping_inputs();
  }

  numel_ = ops_[0].numel();
  // Innermost first; operands with fewer dims, or size 1 where the result is larger, get stride 0.
  for (int i = 0; i < nd; ++i) {
    int o = nd - 1 - i;
    shape_[i] = bshape[o];
    for (int k = 0; k < nops_; ++k) {
      const Tensor& t = ops_[k];
      int j = o - (nd - static_cast<int>(t.dim()));
      bool bcast = j < 0 || (t.sizes()[j] == 1 && bshape[o] != 1);
      strides_[i][k] = bcast ? 0 : t.strides()[j] * static_cast<int64_t>(t.element_size());
    }
  }
  ndim_ = nd;
  for (int k = 0; k < nops_; ++k) base_[k] = static_cast<char*>(ops_[k].data_ptr());
  if (!ops_[0].is_contiguous()) reorder_by_output();
  coalesce();
}

// An input overlapping the output without lying exactly on it is copied first (see header).
void TensorIterator::separate_overlapping_inputs() {
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

// A given output with a permuted layout (x.t().add_(1)) is walked in its memory order.
void TensorIterator::reorder_by_output() {
  // Insertion sort of dims by the output's stride, ascending: dims are innermost first.
  int perm[kIterMaxDims];
  for (int i = 0; i < ndim_; ++i) perm[i] = i;
  for (int i = 1; i < ndim_; ++i)
    for (int j = i; j > 0 && strides_[perm[j]][0] < strides_[perm[j - 1]][0]; --j) std::swap(perm[j], perm[j - 1]);
  int64_t shape[kIterMaxDims], strides[kIterMaxDims][kIterMaxOperands];
  for (int i = 0; i < ndim_; ++i) {
    shape[i] = shape_[perm[i]];
    for (int k = 0; k < nops_; ++k) strides[i][k] = strides_[perm[i]][k];
  }
  for (int i = 0; i < ndim_; ++i) {
    shape_[i] = shape[i];
    for (int k = 0; k < nops_; ++k) strides_[i][k] = strides[i][k];
  }
}

// Drops size-1 dims and merges dim i into the previous kept dim p when, for every operand,
// stepping over all of p equals one step of i.
void TensorIterator::coalesce() {
  int kept = 0;
  for (int i = 0; i < ndim_; ++i) {
    if (shape_[i] == 1) continue;
    if (kept > 0) {
      int p = kept - 1;
      bool merge = true;
      for (int k = 0; k < nops_ && merge; ++k) merge = strides_[p][k] * shape_[p] == strides_[i][k];
      if (merge) {
        shape_[p] *= shape_[i];
        continue;
      }
    }
    shape_[kept] = shape_[i];
    for (int k = 0; k < nops_; ++k) strides_[kept][k] = strides_[i][k];
    ++kept;
  }
  if (kept == 0) {  // a single element (or 0-d operands)
    shape_[0] = 1;
    for (int k = 0; k < nops_; ++k) strides_[0][k] = static_cast<int64_t>(ops_[k].element_size());
    kept = 1;
  }
  ndim_ = kept;
}

// Walks the flat range [begin, end) of an N-d iteration space one inner row at a time.
void TensorIterator::walk(LoopRef loop, int64_t begin, int64_t end) const {
  int64_t idx[kIterMaxDims];
  char* ptrs[kIterMaxOperands];
  for (int k = 0; k < nops_; ++k) ptrs[k] = base_[k];
  int64_t rem = begin;
  for (int d = 0; d < ndim_; ++d) {
    idx[d] = rem % shape_[d];
    rem /= shape_[d];
    for (int k = 0; k < nops_; ++k) ptrs[k] += idx[d] * strides_[d][k];
  }
  int64_t pos = begin;
  while (pos < end) {
    int64_t n = std::min(shape_[0] - idx[0], end - pos);
    char* row[kIterMaxOperands];
    for (int k = 0; k < nops_; ++k) row[k] = ptrs[k];
    loop(row, strides_[0], n);
    pos += n;
    if (pos >= end) break;
    // The row is finished: back to its column 0, then one step along the outer dims.
    for (int k = 0; k < nops_; ++k) ptrs[k] -= idx[0] * strides_[0][k];
    idx[0] = 0;
    for (int d = 1; d < ndim_; ++d) {
      ++idx[d];
      for (int k = 0; k < nops_; ++k) ptrs[k] += strides_[d][k];
      if (idx[d] < shape_[d]) break;
      for (int k = 0; k < nops_; ++k) ptrs[k] -= shape_[d] * strides_[d][k];
      idx[d] = 0;
    }
  }
}

}  // namespace graft::kernels
