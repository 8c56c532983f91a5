// graft:: matrix products, convolution and pooling (declared in functional.h), each with its
// derivative rule. matmul and linear on N-d inputs are composed from mm/bmm and views, so their
// gradients (and higher orders) follow from those rules.
#include "autograd/rules.h"

namespace graft {
using namespace autograd;
using namespace autograd::rules;

namespace {

// ---------------- what the rules keep ----------------
// Matrix products keep each side only when the other side needs a gradient.
struct ProductSaved { SavedVariable a, b; };
struct LinearSaved { SavedVariable x, weight; };
struct ConvSaved {
  Shape stride, padding, dilation;  // two entries each
  int64_t groups = 1;
  SavedVariable x, weight;
};
struct MaxPoolSaved { SavedVariable x, indices; };
struct AvgPoolSaved {
  Shape kernel, stride, padding;  // two entries each
  bool ceil_mode = false, count_include_pad = true;
  SavedVariable x;
};

// The gradient of input i as the product l @ r. The node it flows to may take it straight into a
// leaf's .grad (AccumulateGrad::accumulate_directly decides), so no weight-sized temporary exists.
Tensor product_grad(OpNode& n, size_t i, const Tensor& l, const Tensor& r) {
  const Edge& e = n.next_edges()[i];
  if (e.is_valid() && e.function->accumulate_directly([&](Tensor& acc) { ops::mm_accumulate_(acc, l, r); }))
    return Tensor();
  return graft::mm(l, r);
}

// ---------------- the table ----------------
variable_list d_mm(OpNode& n, ProductSaved& s, const variable_list& g) {  // a [n,k], b [k,m]: g b^T, a^T g
  return {n.needs(0) ? product_grad(n, 0, g[0], n.unpack(s.b).t()) : Tensor(),
          n.needs(1) ? product_grad(n, 1, n.unpack(s.a).t(), g[0]) : Tensor()};
}
variable_list d_bmm(OpNode& n, ProductSaved& s, const variable_list& g) {  // a [B,n,k], b [B,k,m]
  return {n.needs(0) ? graft::bmm(g[0], graft::transpose(n.unpack(s.b), 1, 2)) : Tensor(),
          n.needs(1) ? graft::bmm(graft::transpose(n.unpack(s.a), 1, 2), g[0]) : Tensor()};
}
// x [N,in], w [out,in], b [out]: g w, g^T x, sum_N g
variable_list d_linear(OpNode& n, LinearSaved& s, const variable_list& g) {
  return {n.needs(0) ? graft::mm(g[0], n.unpack(s.weight)) : Tensor(),
          n.needs(1) ? product_grad(n, 1, g[0].t(), n.unpack(s.x)) : Tensor(),
          n.needs(2) ? graft::sum(g[0], {0}) : Tensor()};
}
variable_list d_conv2d(OpNode& n, ConvSaved& s, const variable_list& g) {  // input, weight, bias
  Tensor x = n.unpack(s.x), w = n.unpack(s.weight);
  Tensor gx, gw, gb;
  if (n.needs(0)) gx = ops::conv2d_backward_input(g[0], x.sizes(), w, s.stride, s.padding, s.dilation, s.groups);
  if (n.needs(1)) gw = ops::conv2d_backward_weight(g[0], x, w.sizes(), s.stride, s.padding, s.dilation, s.groups);
  if (n.needs(2)) gb = graft::sum(g[0], x.dim() == 4 ? Shape{0, 2, 3} : Shape{1, 2});
  if (building_graph()) {
    gx = mark_not_twice_differentiable(gx, "Convolution", {&g[0], &w});
    gw = mark_not_twice_differentiable(gw, "Convolution", {&g[0], &x});
  }
  return {gx, gw, gb};
}
variable_list d_max_pool2d(OpNode& n, MaxPoolSaved& s, const variable_list& g) {  // input
  Tensor gx = ops::max_pool2d_backward(g[0], n.unpack(s.x), n.unpack(s.indices));
  if (building_graph()) gx = mark_not_twice_differentiable(gx, "MaxPool2DWithIndices", {&g[0]});
  return {gx};
}
variable_list d_avg_pool2d(OpNode& n, AvgPoolSaved& s, const variable_list& g) {  // input
  Tensor gx = ops::avg_pool2d_backward(g[0], n.unpack(s.x), s.kernel, s.stride, s.padding, s.ceil_mode,
                                       s.count_include_pad);
  if (building_graph()) gx = mark_not_twice_differentiable(gx, "AvgPool2D", {&g[0]});
  return {gx};
}

Tensor mm_impl(const Tensor& a, const Tensor& b) {
  Tensor y = ops::mm(a, b);
  if (auto n = record_op("MmBackward", d_mm, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, n->has_edge(1) ? a : Tensor());
    n->save(n->saved.b, n->has_edge(0) ? b : Tensor());
  }
  return y;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) { return mm_impl(a, b); }

Tensor bmm(const Tensor& a, const Tensor& b) {
  Tensor y = ops::bmm(a, b);
  if (auto n = record_op("BmmBackward", d_bmm, {&a, &b})) {
    set_output(n, y);
    n->save(n->saved.a, n->has_edge(1) ? a : Tensor());
    n->save(n->saved.b, n->has_edge(0) ? b : Tensor());
  }
  return y;
}

// torch.matmul semantics, built from mm/bmm and views.
Tensor matmul(const Tensor& a, const Tensor& b) {
  GRAFT_CHECK(a.defined() && b.defined(), "matmul: undefined tensor argument");
  GRAFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need at least 1 dimension, got shapes ",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  bool needs_grad = is_recording_enabled() && (tensor_requires_grad(a) || tensor_requires_grad(b));
  if (!needs_grad) return ops::matmul(a, b);  // one kernel call, no intermediate views
  int64_t da = a.dim(), db = b.dim();
  if (da == 1 && db == 1) {
    GRAFT_CHECK(a.size(0) == b.size(0), "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                " cannot be multiplied (", a.size(0), " != ", b.size(0), ")");
    return graft::sum(a * b);
  }
  if (da == 2 && db == 2) return mm_impl(a, b);
  if (da == 1 && db == 2) return graft::squeeze(mm_impl(graft::unsqueeze(a, 0), b), 0);
  if (da == 2 && db == 1) return graft::squeeze(mm_impl(a, graft::unsqueeze(b, 1)), 1);
  if (db <= 2 && da >= 3) {
    // Fold a's batch dims into its rows: one mm instead of a batched product.
    Tensor b2 = db == 1 ? graft::unsqueeze(b, 1) : b;
    Shape out = a.sizes();
    out.back() = b2.size(1);
    GRAFT_CHECK(a.size(-1) == b2.size(0), "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
                " cannot be multiplied (", a.size(-1), " != ", b2.size(0), ")");
    Tensor y = graft::reshape(mm_impl(graft::reshape(a, {-1, a.size(-1)}), b2), out);
    return db == 1 ? graft::squeeze(y, -1) : y;
  }
  // General batched case: broadcast the batch dims, then bmm.
  Tensor a3 = da == 1 ? graft::unsqueeze(a, 0) : a;
  Tensor b3 = db == 1 ? graft::unsqueeze(b, 1) : b;
  int64_t n = a3.size(-2), k = a3.size(-1), k2 = b3.size(-2), m = b3.size(-1);
  GRAFT_CHECK(k == k2, "matmul: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " cannot be multiplied (", k, " != ", k2, ")");
  Shape ba(a3.sizes().begin(), a3.sizes().end() - 2), bb(b3.sizes().begin(), b3.sizes().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul");
  int64_t B = shape_numel(batch);
  Shape ea = batch, eb = batch;
  ea.insert(ea.end(), {n, k});
  eb.insert(eb.end(), {k, m});
  Tensor y = bmm(graft::reshape(graft::expand(a3, ea), {B, n, k}), graft::reshape(graft::expand(b3, eb), {B, k, m}));
  Shape out = batch;
  if (da > 1) out.push_back(n);
  if (db > 1) out.push_back(m);
  return graft::reshape(y, out);
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  GRAFT_CHECK(x.defined() && w.defined(), "linear: undefined input or weight");
  if (x.dim() != 2) {
    GRAFT_CHECK(x.dim() >= 1, "linear: input must have at least 1 dimension, got ", describe(x));
    Shape out = x.sizes();
    out.back() = w.size(0);
    return graft::reshape(linear(graft::reshape(x, {-1, x.size(-1)}), w, b), out);
  }
  Tensor y = ops::linear(x, w, b);
  if (auto n = record_op("AddmmBackward", d_linear, {&x, &w, &b})) {
    set_output(n, y);
    n->save(n->saved.x, n->has_edge(1) ? x : Tensor());
    n->save(n->saved.weight, n->has_edge(0) ? w : Tensor());
  }
  return y;
}

Tensor conv2d(const Tensor& in, const Tensor& w, const Tensor& b, const Shape& s, const Shape& p, const Shape& d,
              int64_t groups) {
  Tensor y = ops::conv2d(in, w, b, s, p, d, groups);
  if (auto n = record_op("ConvolutionBackward", d_conv2d, {&in, &w, &b})) {
    set_output(n, y);
    auto two = [](const Shape& v) { return v.size() == 1 ? Shape{v[0], v[0]} : v; };
    n->saved.stride = two(s);
    n->saved.padding = two(p);
    n->saved.dilation = two(d);
    n->saved.groups = groups;
    n->save(n->saved.x, in);
    n->save(n->saved.weight, w);
  }
  return y;
}

Tensor max_pool2d(const Tensor& in, const Shape& k, const Shape& s, const Shape& p, const Shape& d, bool c) {
  bool needs_grad = is_recording_enabled() && tensor_requires_grad(in);
  if (!needs_grad) return ops::max_pool2d(in, k, s, p, d, c);
  auto r = ops::max_pool2d_with_indices(in, k, s, p, d, c);
  if (auto n = record_op("MaxPool2DWithIndicesBackward", d_max_pool2d, {&in})) {
    set_output(n, r[0]);
    n->save(n->saved.x, in);
    n->save(n->saved.indices, r[1]);
  }
  return r[0];
}

Tensor avg_pool2d(const Tensor& in, const Shape& k, const Shape& s, const Shape& p, bool c, bool cip) {
  Tensor y = ops::avg_pool2d(in, k, s, p, c, cip);
  if (auto n = record_op("AvgPool2DBackward", d_avg_pool2d, {&in})) {
    set_output(n, y);
    auto two = [](const Shape& v, const Shape& dflt) { return v.empty() ? dflt : (v.size() == 1 ? Shape{v[0], v[0]} : v); };
    n->saved.kernel = two(k, k);
    n->saved.stride = two(s, n->saved.kernel);
    n->saved.padding = two(p, Shape{0, 0});
    n->saved.ceil_mode = c;
    n->saved.count_include_pad = cip;
    n->save(n->saved.x, in);
  }
  return y;
}

}  // namespace graft
