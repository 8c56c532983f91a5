// Checks and shapes shared by the CPU and CUDA cat, stack and pad (join_plan.h).
#include "ops/join_plan.h"

#include <algorithm>

#include "ops/kernel_utils.h"

namespace graft::kernels {

bool is_legacy_empty(const Tensor& t) { return t.dim() == 1 && t.sizes()[0] == 0; }

CatPlan plan_cat(const std::vector<Tensor>& tensors, int64_t dim) {
  GRAFT_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  CatPlan p;
  const Tensor* ref = nullptr;
  p.dtype = kBool;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    GRAFT_CHECK(t.defined(), "cat: tensor number ", i, " in the list is undefined");
    GRAFT_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (tensor number ", i, " in the list) cannot be concatenated");
    p.dtype = i == 0 ? t.dtype() : promote_types(p.dtype, t.dtype());
    if (!ref && !is_legacy_empty(t)) ref = &t;
  }
  p.device = tensors[0].device();
  if (!ref) {
    p.only_legacy_empty = true;
    p.out_sizes = {0};
    return p;
  }
  int64_t nd = ref->dim();
  p.dim = wrap_dim(dim, nd, "cat");
  p.out_sizes = ref->sizes();
  p.out_sizes[p.dim] = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (is_legacy_empty(t)) continue;
    GRAFT_CHECK(t.dim() == nd, "cat: tensors must have the same number of dimensions: got ", nd, " (shape ",
                shape_str(ref->sizes()), ") and ", t.dim(), " (shape ", shape_str(t.sizes()), ") for tensor number ",
                i, " in the list");
    for (int64_t d = 0; d < nd; ++d) {
      GRAFT_CHECK(d == p.dim || t.sizes()[d] == ref->sizes()[d], "cat: sizes of tensors must match except in "
                  "dimension ", p.dim, ". Expected size ", ref->sizes()[d], " but got size ", t.sizes()[d],
                  " for tensor number ", i, " in the list (shapes ", shape_str(ref->sizes()), " and ",
                  shape_str(t.sizes()), ")");
    }
    p.out_sizes[p.dim] += t.sizes()[p.dim];
  }
  for (int64_t d = 0; d < p.dim; ++d) p.outer *= p.out_sizes[d];
  for (int64_t d = p.dim + 1; d < nd; ++d) p.inner *= p.out_sizes[d];
  return p;
}

std::vector<Tensor> stack_views(const std::vector<Tensor>& tensors, int64_t& dim) {
  GRAFT_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    GRAFT_CHECK(tensors[i].defined(), "stack: tensor number ", i, " in the list is undefined");
    GRAFT_CHECK(tensors[i].sizes() == tensors[0].sizes(), "stack: expects each tensor to be equal size, but got ",
                shape_str(tensors[0].sizes()), " at entry 0 and ", shape_str(tensors[i].sizes()), " at entry ", i);
  }
  int64_t nd = tensors[0].dim();
  dim = wrap_dim(dim, nd + 1, "stack");
  std::vector<Tensor> views;
  views.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    Shape sz = t.sizes(), st = t.strides();
    sz.insert(sz.begin() + dim, 1);
    st.insert(st.begin() + dim, dim < nd ? sz[dim + 1] * st[dim] : 1);
    views.push_back(Tensor(std::make_shared<TensorImpl>(t.impl()->storage(), t.dtype(), sz, st, t.storage_offset())));
  }
  return views;
}

PadPlan plan_pad(const Tensor& self, const Shape& pads) {
  check_defined(self, "pad", "self");
  int64_t nd = self.dim(), npairs = static_cast<int64_t>(pads.size()) / 2;
  GRAFT_CHECK(pads.size() % 2 == 0, "pad: padding length must be even (pairs of before/after), got ",
              shape_str(pads));
  GRAFT_CHECK(npairs <= nd, "pad: padding ", shape_str(pads), " has ", npairs, " pairs but the input ",
              describe(self), " has only ", nd, " dimensions");
  PadPlan p;
  p.out_sizes = self.sizes();
  p.len = self.sizes();
  Shape in_start(nd, 0), out_start(nd, 0);
  for (int64_t k = 0; k < npairs; ++k) {
    int64_t d = nd - 1 - k, before = pads[2 * k], after = pads[2 * k + 1];
    int64_t size = self.sizes()[d] + before + after;
    GRAFT_CHECK(size >= 0, "pad: padding (", before, ", ", after, ") of dimension ", d, " with size ",
                self.sizes()[d], " gives a negative output size ", size);
    p.out_sizes[d] = size;
    in_start[d] = std::max<int64_t>(0, -before);
    out_start[d] = std::max<int64_t>(0, before);
    p.len[d] = std::max<int64_t>(0, self.sizes()[d] - in_start[d] - std::max<int64_t>(0, -after));
    p.len[d] = std::min(p.len[d], size);
    p.fill = p.fill || before > 0 || after > 0;
  }
  Shape out_strides = contiguous_strides(p.out_sizes);
  p.in_offset = self.storage_offset();
  for (int64_t d = 0; d < nd; ++d) {
    p.in_offset += in_start[d] * self.strides()[d];
    p.out_offset += out_start[d] * out_strides[d];
  }
  return p;
}

}  // namespace graft::kernels
