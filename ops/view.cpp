// View ops: each returns a new TensorImpl over the same Storage (so the same version counter).
// Nothing here copies, except reshape() when no view can express the result.
#include <algorithm>
#include <numeric>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "ops/view_plan.h"
#include "runtime/dispatcher.h"

namespace graft {
namespace kernels {
namespace {

Tensor make_view(const Tensor& self, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::make_shared<TensorImpl>(self.impl()->storage(), self.dtype(), std::move(sizes),
                                             std::move(strides), offset));
}

}  // namespace

// The view kernels (one per view op, every device: views are metadata only; registered from
// codegen/ops/view.yaml).

Tensor as_strided_k(const Tensor& self, const Shape& sizes, const Shape& strides, int64_t offset) {
  GRAFT_CHECK(sizes.size() == strides.size(), "as_strided: sizes ", shape_str(sizes), " and strides ",
              shape_str(strides), " differ in length");
  int64_t last = offset;
  bool empty = false;
  for (size_t i = 0; i < sizes.size(); ++i) {
    GRAFT_CHECK(sizes[i] >= 0 && strides[i] >= 0, "as_strided: negative size or stride (", shape_str(sizes), ", ",
                shape_str(strides), ")");
    if (sizes[i] == 0) empty = true;
    last += (sizes[i] - 1) * strides[i];
  }
  int64_t cap = static_cast<int64_t>(self.impl()->storage()->nbytes() / element_size(self.dtype()));
  GRAFT_CHECK(offset >= 0 && (empty || last < cap), "as_strided: view with sizes ", shape_str(sizes), ", strides ",
              shape_str(strides), " and offset ", offset, " is out of bounds for a storage of ", cap, " elements");
  return make_view(self, sizes, strides, offset);
}

Tensor alias_k(const Tensor& self) {
  return make_view(self, self.sizes(), self.strides(), self.storage_offset());
}

// Resolves one -1 in `shape` against numel; throws naming the op.
Shape infer_size(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      GRAFT_CHECK(infer < 0, op, ": only one dimension can be inferred in shape ", shape_str(shape));
      infer = static_cast<int64_t>(i);
    } else {
      GRAFT_CHECK(out[i] >= 0, op, ": invalid shape dimension ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    GRAFT_CHECK(known != 0 && numel % known == 0, op, ": shape ", shape_str(shape),
                " is invalid for input of size ", numel, " (shape ", shape_str(from), ")");
    out[infer] = numel / known;
  } else {
    GRAFT_CHECK(known == numel, op, ": shape ", shape_str(shape), " is invalid for input of size ", numel,
                " (shape ", shape_str(from), ")");
  }
  return out;
}

// Strides for viewing (sizes, strides) as `target` without copying, or empty when impossible.
// Walks both shapes in chunks of dims whose elements are contiguous with each other.
std::optional<Shape> view_strides(const Shape& sizes, const Shape& strides, const Shape& target) {
  Shape out(target.size());
  if (shape_numel(sizes) == 0 || target.empty() || sizes.empty()) {
    Shape c = contiguous_strides(target);
    return c;
  }
  int64_t view_d = static_cast<int64_t>(target.size()) - 1;
  int64_t chunk_base_stride = strides.empty() ? 1 : strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= sizes[d];
    if (d == 0 || (sizes[d - 1] != 1 && strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || target[view_d] == 1)) {
        out[view_d] = view_numel * chunk_base_stride;
        view_numel *= target[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return out;
}

Tensor view_k(const Tensor& self, const Shape& shape) {
  Shape target = infer_size(shape, self.numel(), "view", self.sizes());
  auto st = view_strides(self.sizes(), self.strides(), target);
  GRAFT_CHECK(st.has_value(), "view: size ", shape_str(shape), " is not compatible with input of size ",
              shape_str(self.sizes()), " and strides ", shape_str(self.strides()),
              " (at least one dimension spans across two contiguous subspaces); use reshape() instead");
  return make_view(self, target, *st, self.storage_offset());
}

Tensor transpose_k(const Tensor& self, int64_t d0, int64_t d1) {
  int64_t nd = self.dim();
  d0 = wrap_dim(d0, nd, "transpose");
  d1 = wrap_dim(d1, nd, "transpose");
  Shape sz = self.sizes(), st = self.strides();
  if (nd > 0) {
    std::swap(sz[d0], sz[d1]);
    std::swap(st[d0], st[d1]);
  }
  return make_view(self, sz, st, self.storage_offset());
}

Tensor permute_k(const Tensor& self, const Shape& dims) {
  int64_t nd = self.dim();
  GRAFT_CHECK(static_cast<int64_t>(dims.size()) == nd, "permute: number of dims in ", shape_str(dims),
              " does not match the input's ", nd, " dims (shape ", shape_str(self.sizes()), ")");
  Shape sz(nd), st(nd);
  std::vector<bool> seen(nd, false);
  for (int64_t i = 0; i < nd; ++i) {
    int64_t d = wrap_dim(dims[i], nd, "permute");
    GRAFT_CHECK(!seen[d], "permute: repeated dim ", dims[i], " in ", shape_str(dims));
    seen[d] = true;
    sz[i] = self.sizes()[d];
    st[i] = self.strides()[d];
  }
  return make_view(self, sz, st, self.storage_offset());
}

Tensor slice_k(const Tensor& self, int64_t dim, int64_t start, int64_t end, int64_t step) {
  GRAFT_CHECK(self.dim() > 0, "slice: cannot slice a 0-d tensor");
  dim = wrap_dim(dim, self.dim(), "slice");
  GRAFT_CHECK(step > 0, "slice: step must be positive, got ", step);
  int64_t n = self.sizes()[dim];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape sz = self.sizes(), st = self.strides();
  sz[dim] = (end - start + step - 1) / step;
  st[dim] *= step;
  return make_view(self, sz, st, self.storage_offset() + start * self.strides()[dim]);
}

Tensor select_k(const Tensor& self, int64_t dim, int64_t index) {
  GRAFT_CHECK(self.dim() > 0, "select: cannot select on a 0-d tensor");
  dim = wrap_dim(dim, self.dim(), "select");
  int64_t n = self.sizes()[dim];
  GRAFT_CHECK(index >= -n && index < n, "select: index ", index, " is out of bounds for dimension ", dim,
              " with size ", n);
  if (index < 0) index += n;
  Shape sz = self.sizes(), st = self.strides();
  int64_t off = self.storage_offset() + index * st[dim];
  sz.erase(sz.begin() + dim);
  st.erase(st.begin() + dim);
  return make_view(self, sz, st, off);
}

Tensor expand_k(const Tensor& self, const Shape& sizes) {
  int64_t nd = static_cast<int64_t>(sizes.size()), sd = self.dim();
  GRAFT_CHECK(nd >= sd, "expand: the number of sizes provided (", nd,
              ") must be greater or equal to the number of dimensions in the tensor (", sd, ")");
  Shape out(nd), st(nd);
  for (int64_t i = nd - 1; i >= 0; --i) {
    int64_t j = i - (nd - sd);
    if (j >= 0) {
      int64_t have = self.sizes()[j];
      int64_t want = sizes[i] == -1 ? have : sizes[i];
      GRAFT_CHECK(have == want || have == 1, "expand: the expanded size of the tensor (", want,
                  ") must match the existing size (", have, ") at non-singleton dimension ", i,
                  ". Target sizes: ", shape_str(sizes), ". Tensor sizes: ", shape_str(self.sizes()));
      out[i] = want;
      st[i] = have == want ? self.strides()[j] : 0;
    } else {
      GRAFT_CHECK(sizes[i] >= 0, "expand: the expanded size ", sizes[i], " is not allowed in a leading dimension");
      out[i] = sizes[i];
      st[i] = 0;
    }
  }
  return make_view(self, out, st, self.storage_offset());
}

Tensor squeeze_k(const Tensor& self, std::optional<int64_t> dim) {
  Shape sz, st;
  std::optional<int64_t> d;
  if (dim) d = wrap_dim(*dim, self.dim(), "squeeze");
  for (int64_t i = 0; i < self.dim(); ++i) {
    bool drop = self.sizes()[i] == 1 && (!d || *d == i);
    if (!drop) {
      sz.push_back(self.sizes()[i]);
      st.push_back(self.strides()[i]);
    }
  }
  return make_view(self, sz, st, self.storage_offset());
}

Tensor unsqueeze_k(const Tensor& self, int64_t dim) {
  dim = wrap_dim(dim, self.dim() + 1, "unsqueeze");
  Shape sz = self.sizes(), st = self.strides();
  int64_t stride = dim < self.dim() ? sz[dim] * st[dim] : 1;
  sz.insert(sz.begin() + dim, 1);
  st.insert(st.begin() + dim, stride);
  return make_view(self, sz, st, self.storage_offset());
}

Shape flatten_shape(const Shape& sizes, int64_t start_dim, int64_t end_dim) {
  int64_t nd = static_cast<int64_t>(sizes.size());
  if (nd == 0) return {1};
  start_dim = wrap_dim(start_dim, nd, "flatten");
  end_dim = wrap_dim(end_dim, nd, "flatten");
  GRAFT_CHECK(start_dim <= end_dim, "flatten: start_dim (", start_dim, ") cannot come after end_dim (", end_dim, ")");
  Shape sz(sizes.begin(), sizes.begin() + start_dim);
  int64_t m = 1;
  for (int64_t d = start_dim; d <= end_dim; ++d) m *= sizes[d];
  sz.push_back(m);
  sz.insert(sz.end(), sizes.begin() + end_dim + 1, sizes.end());
  return sz;
}

}  // namespace kernels

namespace ops {

Tensor reshape(const Tensor& self, const Shape& sizes) {
  Shape target = kernels::infer_size(sizes, self.numel(), "reshape", self.sizes());
  if (kernels::view_strides(self.sizes(), self.strides(), target)) return view(self, target);
  return view(clone(self), target);
}
Tensor flatten(const Tensor& self, int64_t start_dim, int64_t end_dim) {
  Shape target = kernels::flatten_shape(self.sizes(), start_dim, end_dim);
  return target == self.sizes() ? self : reshape(self, target);
}

}  // namespace ops
}  // namespace graft
