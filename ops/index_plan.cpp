// Checks and shapes shared by the CPU and CUDA indexing ops (index_plan.h).
#include "ops/index_plan.h"

#include "ops/kernel_utils.h"

namespace graft::kernels {

Shape sizes_or_1(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.sizes(); }
Shape strides_or_1(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

int64_t size_product(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

void index_out_of_bounds_error(int64_t value, int64_t dim, int64_t size, const char* op) {
  GRAFT_ERROR(op, ": index ", value, " is out of bounds for dimension ", dim, " with size ", size);
}

EmbeddingPlan plan_embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_defined(weight, "embedding", "weight");
  check_defined(indices, "embedding", "indices");
  check_dim(weight, 2, "embedding", "weight");
  check_index_dtype(indices, "embedding");
  EmbeddingPlan p{weight.sizes()[0], weight.sizes()[1]};
  GRAFT_CHECK(padding_idx >= -1 && padding_idx < p.V, "embedding: padding_idx ", padding_idx,
              " is out of range for a weight with ", p.V, " rows (use -1 for none)");
  return p;
}

int64_t plan_embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  check_defined(grad, "embedding_backward", "grad");
  check_defined(indices, "embedding_backward", "indices");
  check_floating(grad, "embedding_backward");
  check_index_dtype(indices, "embedding_backward");
  GRAFT_CHECK(num_weights >= 0, "embedding_backward: num_weights must be non-negative, got ", num_weights);
  GRAFT_CHECK(padding_idx >= -1 && padding_idx < num_weights, "embedding_backward: padding_idx ", padding_idx,
              " is out of range for ", num_weights, " rows (use -1 for none)");
  Shape want = indices.sizes();
  GRAFT_CHECK(grad.dim() == indices.dim() + 1 && Shape(grad.sizes().begin(), grad.sizes().end() - 1) == want,
              "embedding_backward: grad of shape ", shape_str(grad.sizes()),
              " does not match indices of shape ", shape_str(want), " followed by the embedding dim");
  return grad.sizes().back();
}

namespace {

IndexPlan index_geometry(const Tensor& x, int64_t dim) {
  IndexPlan p;
  p.dim = dim;
  p.xs = sizes_or_1(x);
  p.outer = size_product(p.xs, 0, static_cast<size_t>(dim));
  p.n_x = p.xs[dim];
  p.inner = size_product(p.xs, static_cast<size_t>(dim) + 1, p.xs.size());
  return p;
}

// Shape rules shared by gather and scatter_add (PyTorch's).
void check_gather_shapes(const Tensor& x, int64_t dim, const Tensor& index, const Tensor* src, const char* op) {
  GRAFT_CHECK(index.dim() == x.dim(), op, ": index ", describe(index), " must have as many dimensions as self ",
              describe(x));
  if (src) {
    GRAFT_CHECK(src->dim() == x.dim(), op, ": src ", describe(*src), " must have as many dimensions as self ",
                describe(x));
  }
  for (int64_t d = 0; d < index.dim(); ++d) {
    GRAFT_CHECK(d == dim || index.sizes()[d] <= x.sizes()[d], op, ": index of shape ", shape_str(index.sizes()),
                " is larger than self of shape ", shape_str(x.sizes()), " at dimension ", d, " (",
                index.sizes()[d], " > ", x.sizes()[d], ")");
    if (src)
      GRAFT_CHECK(index.sizes()[d] <= src->sizes()[d], op, ": index of shape ", shape_str(index.sizes()),
                  " is larger than src of shape ", shape_str(src->sizes()), " at dimension ", d, " (",
                  index.sizes()[d], " > ", src->sizes()[d], ")");
  }
}

}  // namespace

IndexPlan plan_index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "index_select", "self");
  check_defined(index, "index_select", "index");
  check_index_dtype(index, "index_select");
  GRAFT_CHECK(index.dim() <= 1, "index_select: index must be 0-D or 1-D, got ", describe(index));
  return index_geometry(x, wrap_dim(dim, x.dim(), "index_select"));
}

Shape index_select_out_sizes(const IndexPlan& p, const Tensor& x, const Tensor& index, int64_t n) {
  if (x.dim() == 0) {
    GRAFT_CHECK(n == 1, "index_select: index for a 0-d tensor must have one element, got ", describe(index));
    return {};
  }
  Shape out_sizes = p.xs;
  out_sizes[p.dim] = n;
  return out_sizes;
}

IndexPlan plan_index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined(x, "index_add", "self");
  check_defined(index, "index_add", "index");
  check_defined(src, "index_add", "source");
  check_index_dtype(index, "index_add");
  check_same_dtype(x, src, "index_add");
  GRAFT_CHECK(index.dim() <= 1, "index_add: index must be 0-D or 1-D, got ", describe(index));
  IndexPlan p = index_geometry(x, wrap_dim(dim, x.dim(), "index_add"));
  int64_t n = index.numel();
  Shape want = p.xs;
  want[p.dim] = n;
  GRAFT_CHECK(sizes_or_1(src) == want, "index_add: source of shape ", shape_str(src.sizes()),
              " does not match self of shape ", shape_str(x.sizes()), " with dimension ", p.dim,
              " replaced by the index length ", n, " (expected ", shape_str(want), ")");
  return p;
}

int64_t plan_gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "gather", "self");
  check_defined(index, "gather", "index");
  check_index_dtype(index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  check_gather_shapes(x, dim, index, nullptr, "gather");
  return dim;
}

int64_t plan_scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined(x, "scatter_add", "self");
  check_defined(index, "scatter_add", "index");
  check_defined(src, "scatter_add", "src");
  check_index_dtype(index, "scatter_add");
  check_same_dtype(x, src, "scatter_add");
  dim = wrap_dim(dim, x.dim(), "scatter_add");
  check_gather_shapes(x, dim, index, &src, "scatter_add");
  return dim;
}

void check_one_hot(const Tensor& indices, int64_t num_classes) {
  check_defined(indices, "one_hot", "self");
  GRAFT_CHECK(indices.dtype() == kInt64, "one_hot: expected an int64 tensor of class indices, got ",
              describe(indices));
  GRAFT_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or non-negative, got ", num_classes);
}

void one_hot_negative_error(int64_t value) {
  GRAFT_ERROR("one_hot: class values must be non-negative, got index ", value);
}

void check_one_hot_inferable(const Tensor& indices, int64_t n) {
  GRAFT_CHECK(n > 0, "one_hot: cannot infer num_classes from an empty tensor ", describe(indices));
}

}  // namespace graft::kernels
