// graft:: views, joins, indexing, copies and conversions (declared in functional.h), each with its
// derivative rule.
// Views record the base they view (for in-place rebasing) whenever grad mode is on, so an in-place
// op through a view later still updates the base's history, as in PyTorch.
#include <algorithm>
#include <numeric>

#include "autograd/rules.h"

namespace graft {
using namespace autograd;
using namespace autograd::rules;

namespace {

const Shape& in_shape(const OpNode& n, size_t i = 0) { return n.inputs[i].shape; }

// Writes `g` into the region a view covers of a zero tensor shaped like its input. Done with the
// autograd-aware in-place copy on a view, so under create_graph it is itself differentiable.
template <class MakeView>
Tensor into_zeros(const OpNode& n, const Tensor& g, MakeView&& make_view) {
  Tensor r = zeros_of(n.inputs[0]);
  Tensor v = make_view(r);
  graft::copy_(v, g);
  return r;
}

// ---------------- what the rules keep ----------------
struct TransposeSaved {
  int64_t dim0 = 0, dim1 = 0;
};
struct PermuteSaved {
  Shape dims;  // wrapped
};
struct SliceSaved {
  int64_t dim = 0, start = 0, end = 0, step = 1;  // dim wrapped, start/end clamped to the input
};
struct SelectSaved {
  int64_t dim = 0, index = 0;  // both wrapped
};
struct AsStridedSaved {
  Shape base_strides;  // of the input (its sizes are in n.inputs[0])
  int64_t base_offset = 0;
  Shape view_strides;  // of the output (its sizes are those of the gradient)
  int64_t view_offset = 0;
};
struct DimSaved {  // cat, stack, split: the (wrapped) dim they join or split along
  int64_t dim = 0;
};
struct PadSaved {
  Shape pad;
};
struct IndexSaved {  // index_select, index_add, gather, scatter_add
  int64_t dim = 0;     // wrapped
  SavedVariable index;
};
struct EmbeddingSaved {
  int64_t padding_idx = 0;
  SavedVariable indices;
};

// ---------------- the table ----------------
variable_list d_reshape(OpNode& n, NoSaved&, const variable_list& g) { return {graft::reshape(g[0], in_shape(n))}; }
variable_list d_transpose(OpNode&, TransposeSaved& s, const variable_list& g) {
  return {graft::transpose(g[0], s.dim0, s.dim1)};
}
variable_list d_permute(OpNode&, PermuteSaved& s, const variable_list& g) {  // inverse permutation
  Shape inv(s.dims.size());
  for (size_t i = 0; i < s.dims.size(); ++i) inv[s.dims[i]] = static_cast<int64_t>(i);
  return {graft::permute(g[0], inv)};
}
variable_list d_expand(OpNode& n, NoSaved&, const variable_list& g) { return {graft::sum_to(g[0], in_shape(n))}; }
variable_list d_slice(OpNode& n, SliceSaved& s, const variable_list& g) {
  return {into_zeros(n, g[0], [&](Tensor& r) { return graft::slice(r, s.dim, s.start, s.end, s.step); })};
}
variable_list d_select(OpNode& n, SelectSaved& s, const variable_list& g) {
  return {into_zeros(n, g[0], [&](Tensor& r) { return graft::select(r, s.dim, s.index); })};
}
variable_list d_as_strided(OpNode& n, AsStridedSaved& s, const variable_list& g) {
  Geometry base{in_shape(n), s.base_strides, s.base_offset};
  Geometry view{g[0].sizes(), s.view_strides, s.view_offset};
  Tensor r = as_strided_backward(g[0], base, view);
  if (building_graph()) r = mark_not_twice_differentiable(r, "AsStrided", {&g[0]});
  return {r};
}
variable_list d_identity(OpNode&, NoSaved&, const variable_list& g) { return {g[0]}; }
variable_list d_to_device(OpNode& n, NoSaved&, const variable_list& g) { return {graft::to(g[0], n.inputs[0].device)}; }
variable_list d_to_dtype(OpNode& n, NoSaved&, const variable_list& g) { return {graft::to(g[0], n.inputs[0].dtype)}; }
variable_list d_sum_to(OpNode& n, NoSaved&, const variable_list& g) { return {graft::expand(g[0], in_shape(n))}; }
variable_list d_cat(OpNode& n, DimSaved& s, const variable_list& g) {
  variable_list out(n.inputs.size());
  int64_t off = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    const Shape& shape = n.inputs[i].shape;
    if (shape.size() == 1 && shape[0] == 0 && g[0].dim() != 1) continue;  // legacy empty inputs take no part
    int64_t len = shape[s.dim];
    if (n.needs(i)) out[i] = graft::slice(g[0], s.dim, off, off + len);
    off += len;
  }
  return out;
}
variable_list d_stack(OpNode& n, DimSaved& s, const variable_list& g) {
  variable_list out(n.inputs.size());
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (n.needs(i)) out[i] = graft::select(g[0], s.dim, static_cast<int64_t>(i));
  return out;
}
variable_list d_split(OpNode&, DimSaved& s, const variable_list& g) {  // grads of the pieces, joined back
  return {graft::cat(g, s.dim)};
}
variable_list d_pad(OpNode&, PadSaved& s, const variable_list& g) {  // crop with the negated pads
  Shape neg(s.pad.size());
  for (size_t i = 0; i < neg.size(); ++i) neg[i] = -s.pad[i];
  return {graft::pad(g[0], neg, 0.0)};
}
variable_list d_index_select(OpNode& n, IndexSaved& s, const variable_list& g) {  // x, index
  return {graft::index_add(zeros_of(n.inputs[0]), s.dim, n.unpack(s.index), g[0]), Tensor()};
}
variable_list d_index_add(OpNode& n, IndexSaved& s, const variable_list& g) {  // x, index, src
  return {g[0], Tensor(), n.needs(2) ? graft::index_select(g[0], s.dim, n.unpack(s.index)) : Tensor()};
}
variable_list d_gather(OpNode& n, IndexSaved& s, const variable_list& g) {  // x, index
  return {graft::scatter_add(zeros_of(n.inputs[0]), s.dim, n.unpack(s.index), g[0]), Tensor()};
}
variable_list d_scatter_add(OpNode& n, IndexSaved& s, const variable_list& g) {  // x, index, src
  if (!n.needs(2)) return {g[0], Tensor(), Tensor()};
  Tensor gs = graft::gather(g[0], s.dim, n.unpack(s.index));  // shaped like index
  // src may be larger than index (only its leading index-shaped block is read): zeros elsewhere.
  const Shape& src = n.inputs[2].shape;
  if (gs.sizes() != src) {
    Shape pads;
    for (int64_t d = gs.dim() - 1; d >= 0; --d) pads.insert(pads.end(), {0, src[d] - gs.size(d)});
    gs = graft::pad(gs, pads, 0.0);
  }
  return {g[0], Tensor(), gs};
}
variable_list d_embedding(OpNode& n, EmbeddingSaved& s, const variable_list& g) {  // weight, indices
  Tensor idx = n.unpack(s.indices);
  Tensor gw = ops::embedding_backward(g[0], idx, n.inputs[0].shape[0], s.padding_idx);
  if (building_graph()) gw = mark_not_twice_differentiable(gw, "Embedding", {&g[0]});
  return {gw, Tensor()};
}

// ---------------- forward wrappers ----------------
// `fill(n)` (n a RuleNode<Saved>&) stores what the rule needs in n.saved, once the node exists.
// A view op: records `fn` and links the output to its base for in-place rebasing.
template <class Saved, class Fill>
Tensor view_op(const char* name, Rule<Saved> fn, const Tensor& x, Tensor y, Fill&& fill) {
  if (!is_recording_enabled()) return y;
  if (auto n = record_op(name, fn, {&x})) {
    set_output(n, y);
    fill(*n);
  }
  set_view_of(y, x);
  return y;
}
template <class Saved, class Fill>
Tensor plain_op(const char* name, Rule<Saved> fn, std::initializer_list<const Tensor*> ins, Tensor y, Fill&& fill) {
  if (auto n = record_op(name, fn, ins)) {
    set_output(n, y);
    fill(*n);
  }
  return y;
}
constexpr auto nothing = [](auto&) {};

}  // namespace

Tensor view(const Tensor& x, const Shape& s) { return view_op("ViewBackward", d_reshape, x, ops::view(x, s), nothing); }
Tensor reshape(const Tensor& x, const Shape& s) {
  Tensor y = ops::reshape(x, s);
  if (y.is_alias_of(x)) return view_op("ViewBackward", d_reshape, x, y, nothing);
  return plain_op("ReshapeAliasBackward", d_reshape, {&x}, y, nothing);
}
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1) {
  return view_op("TransposeBackward", d_transpose, x, ops::transpose(x, d0, d1), [&](auto& n) {
    n.saved.dim0 = d0;
    n.saved.dim1 = d1;
  });
}
Tensor permute(const Tensor& x, const Shape& dims) {
  return view_op("PermuteBackward", d_permute, x, ops::permute(x, dims), [&](auto& n) {
    n.saved.dims.resize(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) n.saved.dims[i] = wrap_dim(dims[i], x.dim(), "permute");
  });
}
Tensor slice(const Tensor& x, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Tensor y = ops::slice(x, dim, start, end, step);
  return view_op("SliceBackward", d_slice, x, y, [&](auto& n) {
    int64_t d = wrap_dim(dim, x.dim(), "slice"), len = x.size(d);
    int64_t s0 = std::clamp<int64_t>(start < 0 ? start + len : start, 0, len);
    int64_t e0 = std::clamp<int64_t>(end < 0 ? end + len : end, s0, len);
    n.saved = {d, s0, e0, step};
  });
}
Tensor select(const Tensor& x, int64_t dim, int64_t index) {
  return view_op("SelectBackward", d_select, x, ops::select(x, dim, index), [&](auto& n) {
    int64_t d = wrap_dim(dim, x.dim(), "select");
    n.saved = {d, index < 0 ? index + x.size(d) : index};
  });
}
Tensor expand(const Tensor& x, const Shape& s) { return view_op("ExpandBackward", d_expand, x, ops::expand(x, s), nothing); }
Tensor squeeze(const Tensor& x, std::optional<int64_t> d) {
  return view_op("SqueezeBackward", d_reshape, x, ops::squeeze(x, d), nothing);
}
Tensor unsqueeze(const Tensor& x, int64_t d) {
  return view_op("UnsqueezeBackward", d_reshape, x, ops::unsqueeze(x, d), nothing);
}
Tensor flatten(const Tensor& x, int64_t s, int64_t e) {
  int64_t nd = x.dim();
  if (nd == 0) return graft::reshape(x, {1});
  s = wrap_dim(s, nd, "flatten");
  e = wrap_dim(e, nd, "flatten");
  GRAFT_CHECK(s <= e, "flatten: start_dim (", s, ") cannot come after end_dim (", e, ")");
  Shape out(x.sizes().begin(), x.sizes().begin() + s);
  int64_t m = 1;
  for (int64_t d = s; d <= e; ++d) m *= x.size(d);
  out.push_back(m);
  out.insert(out.end(), x.sizes().begin() + e + 1, x.sizes().end());
  return graft::reshape(x, out);
}
Tensor as_strided(const Tensor& x, const Shape& sizes, const Shape& strides, int64_t offset) {
  return view_op("AsStridedBackward", d_as_strided, x, ops::as_strided(x, sizes, strides, offset), [&](auto& n) {
    n.saved.base_strides = x.strides();
    n.saved.base_offset = x.storage_offset();
    n.saved.view_strides = strides;
    n.saved.view_offset = offset;
  });
}
Tensor clone(const Tensor& x, MemoryFormat f) {
  return plain_op("CloneBackward", d_identity, {&x}, ops::clone(x, f), nothing);
}
Tensor contiguous(const Tensor& x) { return x.is_contiguous() ? x : graft::clone(x); }
Tensor contiguous(const Tensor& x, MemoryFormat f) {
  if (f == MemoryFormat::Preserve) return x;
  return x.is_contiguous(f) ? x : graft::clone(x, f);
}
Tensor detach(const Tensor& x) { return ops::alias(x); }
Tensor to(const Tensor& x, DType d) {
  if (x.dtype() == d) return x;
  Tensor y = ops::to_dtype(x, d);
  if (!is_floating(d)) return y;  // integer results carry no gradient
  return plain_op("ToCopyBackward", d_to_dtype, {&x}, y, nothing);
}
Tensor to(const Tensor& x, Device dev, bool nb) {
  if (x.device() == dev) return x;
  return plain_op("ToCopyBackward", d_to_device, {&x}, ops::to_device(x, dev, nb), nothing);
}
Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.sizes() == shape) return x;
  return plain_op("SumToBackward", d_sum_to, {&x}, ops::sum_to(x, shape), nothing);
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  Tensor y = ops::cat(ts, dim);
  if (auto n = record_op("CatBackward", d_cat, ts)) {
    set_output(n, y);
    n->saved.dim = wrap_dim(dim, y.dim(), "cat");
  }
  return y;
}
Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  Tensor y = ops::stack(ts, dim);
  if (auto n = record_op("StackBackward", d_stack, ts)) {
    set_output(n, y);
    n->saved.dim = wrap_dim(dim, y.dim(), "stack");
  }
  return y;
}
static std::vector<Tensor> split_views(const char* name, const Tensor& x, std::vector<Tensor> parts, int64_t dim) {
  if (!is_recording_enabled()) return parts;
  if (auto n = record_op(name, d_split, {&x})) {
    n->saved.dim = wrap_dim(dim, x.dim(), name);
    for (auto& p : parts) set_output(n, p);
  }
  for (auto& p : parts) set_view_of(p, x);
  return parts;
}
std::vector<Tensor> split(const Tensor& x, int64_t s, int64_t d) { return split_views("SplitBackward", x, ops::split(x, s, d), d); }
std::vector<Tensor> chunk(const Tensor& x, int64_t c, int64_t d) { return split_views("SplitBackward", x, ops::chunk(x, c, d), d); }
Tensor pad(const Tensor& x, const Shape& p, double v) {
  return plain_op("ConstantPadNdBackward", d_pad, {&x}, ops::pad(x, p, v), [&](auto& n) { n.saved.pad = p; });
}
Tensor index_select(const Tensor& x, int64_t d, const Tensor& i) {
  return plain_op("IndexSelectBackward", d_index_select, {&x, &i}, ops::index_select(x, d, i), [&](auto& n) {
    n.saved.dim = wrap_dim(d, x.dim(), "index_select");
    n.save(n.saved.index, i);
  });
}
Tensor index_add(const Tensor& x, int64_t d, const Tensor& i, const Tensor& s) {
  return plain_op("IndexAddBackward", d_index_add, {&x, &i, &s}, ops::index_add(x, d, i, s), [&](auto& n) {
    n.saved.dim = wrap_dim(d, x.dim(), "index_add");
    n.save(n.saved.index, i);
  });
}
Tensor gather(const Tensor& x, int64_t d, const Tensor& i) {
  return plain_op("GatherBackward", d_gather, {&x, &i}, ops::gather(x, d, i), [&](auto& n) {
    n.saved.dim = wrap_dim(d, x.dim(), "gather");
    n.save(n.saved.index, i);
  });
}
Tensor scatter_add(const Tensor& x, int64_t d, const Tensor& i, const Tensor& s) {
  return plain_op("ScatterAddBackward", d_scatter_add, {&x, &i, &s}, ops::scatter_add(x, d, i, s), [&](auto& n) {
    n.saved.dim = wrap_dim(d, x.dim(), "scatter_add");
    n.save(n.saved.index, i);
  });
}
Tensor embedding(const Tensor& w, const Tensor& i, int64_t p) {
  return plain_op("EmbeddingBackward", d_embedding, {&w, &i}, ops::embedding(w, i, p), [&](auto& n) {
    n.saved.padding_idx = p;
    n.save(n.saved.indices, i);
  });
}
Tensor one_hot(const Tensor& i, int64_t n) { return ops::one_hot(i, n); }

}  // namespace graft
