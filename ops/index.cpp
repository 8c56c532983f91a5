// Indexing ops on CPU: embedding (+ backward), index_select, index_add, gather, scatter_add, one_hot.
//
// Every index is validated in a serial pass before any parallel work starts, so a bad index is a
// clean graft::Error (never UB, never an exception escaping an OpenMP region). Indices are never
// wrapped: negative values are out of bounds, as in PyTorch's indexing kernels.
#include <algorithm>
#include <cstring>

#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

// Scalars index like 1-element vectors (PyTorch treats a 0-d tensor as size 1 along dim 0).
Shape sizes_or_1(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.sizes(); }
Shape strides_or_1(const Tensor& t) { return t.dim() == 0 ? Shape{1} : t.strides(); }

// Throws unless every value of the contiguous int64 `idx` lies in [0, size).
void check_indices(const int64_t* idx, int64_t n, int64_t size, int64_t dim, const char* op) {
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = idx[i];
    GRAFT_CHECK(v >= 0 && v < size, op, ": index ", v, " is out of bounds for dimension ", dim, " with size ", size);
  }
}

// Product of sizes in [b, e).
int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t p = 1;
  for (size_t i = b; i < e; ++i) p *= s[i];
  return p;
}

template <class T>
inline void accumulate(T& dst, T v) {
  if constexpr (std::is_same_v<T, bool>) dst = dst || v;  // bool "addition" saturates, as PyTorch
  else dst += v;
}

// Walks a shape with one dim (`inner`) as the innermost loop; every position of the other dims is
// a "row". The scatter kernels make the scattered dim innermost so that distinct rows never write
// the same output element and rows can run in parallel without atomics.
struct RowWalk {
  Shape row_sizes;
  int64_t inner_size = 1, rows = 1;
  RowWalk(const Shape& sizes, int64_t inner) {
    for (int64_t d = 0; d < static_cast<int64_t>(sizes.size()); ++d) {
      if (d == inner) inner_size = sizes[d];
      else row_sizes.push_back(sizes[d]);
    }
    rows = shape_numel(row_sizes);
  }
  // `strides` without the inner dim.
  static Shape row_strides(const Shape& strides, int64_t inner) {
    Shape s = strides;
    s.erase(s.begin() + inner);
    return s;
  }
  // Element offset of the first element of row r for a tensor with these row strides.
  int64_t offset(const Shape& rstrides, int64_t r) const {
    int64_t off = 0;
    for (int64_t d = static_cast<int64_t>(row_sizes.size()) - 1; d >= 0; --d) {
      off += (r % row_sizes[d]) * rstrides[d];
      r /= row_sizes[d];
    }
    return off;
  }
};

int64_t row_grain(int64_t inner) { return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, inner)); }

// out[o, j, i] = x[o, idx[j], i] for contiguous x viewed as [outer, n_x, inner]; out is [outer, n, inner].
void index_select_blocks(const Tensor& out, const Tensor& x, const int64_t* idx, int64_t n, int64_t outer,
                         int64_t n_x, int64_t inner) {
  size_t es = element_size(x.dtype());
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  size_t block = static_cast<size_t>(inner) * es;
  if (block == 0) return;
  parallel_for(0, outer * n, row_grain(inner), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t o = k / n, j = k % n;
      std::memcpy(dst + static_cast<size_t>(k) * block, src + static_cast<size_t>(o * n_x + idx[j]) * block, block);
    }
  });
}

// ---- embedding ----

// weight [V, D], indices [*] (int64) -> [*, D]. padding_idx only affects the backward.
Tensor embedding_cpu(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  check_defined(weight, "embedding", "weight");
  check_defined(indices, "embedding", "indices");
  check_dim(weight, 2, "embedding", "weight");
  check_index_dtype(indices, "embedding");
  int64_t V = weight.sizes()[0], D = weight.sizes()[1];
  GRAFT_CHECK(padding_idx >= -1 && padding_idx < V, "embedding: padding_idx ", padding_idx,
              " is out of range for a weight with ", V, " rows (use -1 for none)");
  Tensor idx = contiguous_cpu(indices);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  check_indices(ip, n, V, 0, "embedding");
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(D);
  Tensor out = new_tensor(out_sizes, weight.dtype(), weight.device());
  index_select_blocks(out, contiguous_cpu(weight), ip, n, 1, V, D);
  return out;
}

// grad [*, D], indices [*] -> grad_weight [V, D]; repeated indices accumulate, padding_idx rows stay 0.
Tensor embedding_backward_cpu(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
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
  int64_t D = grad.sizes().back();
  Tensor idx = contiguous_cpu(indices);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  check_indices(ip, n, num_weights, 0, "embedding_backward");
  Tensor g = contiguous_cpu(grad);
  Tensor out = new_tensor({num_weights, D}, grad.dtype(), grad.device());
  fill_cpu(out, 0);
  dispatch_floating(grad.dtype(), "embedding_backward", [&]<class T>() {
    const T* gp = static_cast<const T*>(g.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    // Threads own disjoint column ranges, so repeated indices never race.
    parallel_for(0, D, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, n)), [&](int64_t b, int64_t e) {
      for (int64_t i = 0; i < n; ++i) {
        if (ip[i] == padding_idx) continue;
        T* row = op + ip[i] * D;
        const T* gr = gp + i * D;
        for (int64_t c = b; c < e; ++c) row[c] += gr[c];
      }
    });
  });
  return out;
}

// ---- index_select / index_add ----

// x [..., n_x, ...], index [n] -> [..., n, ...]
Tensor index_select_cpu(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "index_select", "self");
  check_defined(index, "index_select", "index");
  check_index_dtype(index, "index_select");
  GRAFT_CHECK(index.dim() <= 1, "index_select: index must be 0-D or 1-D, got ", describe(index));
  dim = wrap_dim(dim, x.dim(), "index_select");
  Shape xs = sizes_or_1(x);
  Tensor idx = contiguous_cpu(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  check_indices(ip, n, xs[dim], dim, "index_select");
  Shape out_sizes = xs;
  out_sizes[dim] = n;
  if (x.dim() == 0) {
    GRAFT_CHECK(n == 1, "index_select: index for a 0-d tensor must have one element, got ", describe(index));
    out_sizes = {};
  }
  Tensor out = new_tensor(out_sizes, x.dtype(), x.device());
  index_select_blocks(out, contiguous_cpu(x), ip, n, prod(xs, 0, dim), xs[dim], prod(xs, dim + 1, xs.size()));
  return out;
}

// Out-of-place index_add: out = x; out[..., index[j], ...] += src[..., j, ...]
Tensor index_add_cpu(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined(x, "index_add", "self");
  check_defined(index, "index_add", "index");
  check_defined(src, "index_add", "source");
  check_index_dtype(index, "index_add");
  check_same_dtype(x, src, "index_add");
  GRAFT_CHECK(index.dim() <= 1, "index_add: index must be 0-D or 1-D, got ", describe(index));
  dim = wrap_dim(dim, x.dim(), "index_add");
  Shape xs = sizes_or_1(x), ss = sizes_or_1(src);
  int64_t n = index.numel();
  Shape want = xs;
  want[dim] = n;
  GRAFT_CHECK(ss == want, "index_add: source of shape ", shape_str(src.sizes()), " does not match self of shape ",
              shape_str(x.sizes()), " with dimension ", dim, " replaced by the index length ", n, " (expected ",
              shape_str(want), ")");
  Tensor idx = contiguous_cpu(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  check_indices(ip, n, xs[dim], dim, "index_add");
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  strided_copy(out, x, x.strides());
  Tensor s = contiguous_cpu(src);
  int64_t outer = prod(xs, 0, dim), inner = prod(xs, dim + 1, xs.size()), n_x = xs[dim];
  dispatch_dtype(x.dtype(), "index_add", [&]<class T>() {
    const T* sp = static_cast<const T*>(s.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    // Each task owns whole output slices (outer indices or inner columns): repeated indices never race.
    auto run = [&](int64_t o0, int64_t o1, int64_t i0, int64_t i1) {
      for (int64_t o = o0; o < o1; ++o)
        for (int64_t j = 0; j < n; ++j) {
          T* orow = op + (o * n_x + ip[j]) * inner;
          const T* srow = sp + (o * n + j) * inner;
          for (int64_t i = i0; i < i1; ++i) accumulate(orow[i], srow[i]);
        }
    };
    if (outer >= inner)
      parallel_for(0, outer, row_grain(n * inner), [&](int64_t b, int64_t e) { run(b, e, 0, inner); });
    else
      parallel_for(0, inner, row_grain(n * outer), [&](int64_t b, int64_t e) { run(0, outer, b, e); });
  });
  return out;
}

// ---- gather / scatter_add ----

// Shape rules shared by gather and scatter_add (PyTorch's): same ndim, index no larger than
// `self` outside `dim` (and no larger than `src` anywhere, for scatter).
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

// out[p] = x[p with p[dim] replaced by index[p]]; out has index's shape.
Tensor gather_cpu(const Tensor& x, int64_t dim, const Tensor& index) {
  check_defined(x, "gather", "self");
  check_defined(index, "gather", "index");
  check_index_dtype(index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  check_gather_shapes(x, dim, index, nullptr, "gather");
  Tensor out = new_tensor(index.sizes(), x.dtype(), x.device());
  Tensor idx = contiguous_cpu(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  Shape xs = sizes_or_1(x), xst = strides_or_1(x), is = sizes_or_1(idx);
  check_indices(ip, n, xs[dim], dim, "gather");
  if (n == 0) return out;
  // out and idx are contiguous with the same shape: walk rows of the last dim.
  int64_t last = static_cast<int64_t>(is.size()) - 1;
  RowWalk w(is, last);
  Shape xrs = RowWalk::row_strides(xst, last);
  if (dim != last) xrs[dim] = 0;  // the index supplies the position along dim
  int64_t x_inner = dim == last ? 0 : xst[last], x_dim = xst[dim];
  dispatch_dtype(x.dtype(), "gather", [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    int64_t m = w.inner_size;
    parallel_for(0, w.rows, row_grain(m), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const T* xr = xp + w.offset(xrs, r);
        const int64_t* ir = ip + r * m;
        T* orow = op + r * m;
        for (int64_t i = 0; i < m; ++i) orow[i] = xr[i * x_inner + ir[i] * x_dim];
      }
    });
  });
  return out;
}

// Out-of-place scatter_add: out = x; out[p with p[dim] replaced by index[p]] += src[p].
Tensor scatter_add_cpu(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_defined(x, "scatter_add", "self");
  check_defined(index, "scatter_add", "index");
  check_defined(src, "scatter_add", "src");
  check_index_dtype(index, "scatter_add");
  check_same_dtype(x, src, "scatter_add");
  dim = wrap_dim(dim, x.dim(), "scatter_add");
  check_gather_shapes(x, dim, index, &src, "scatter_add");
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  strided_copy(out, x, x.strides());
  Tensor idx = contiguous_cpu(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  Shape xs = sizes_or_1(x), is = sizes_or_1(idx);
  check_indices(ip, n, xs[dim], dim, "scatter_add");
  if (n == 0) return out;
  // dim innermost: each row writes only its own line of `out`, so rows can run in parallel.
  RowWalk w(is, dim);
  Shape ors = RowWalk::row_strides(strides_or_1(out), dim), irs = RowWalk::row_strides(strides_or_1(idx), dim),
        srs = RowWalk::row_strides(strides_or_1(src), dim);
  int64_t o_dim = strides_or_1(out)[dim], i_dim = strides_or_1(idx)[dim], s_dim = strides_or_1(src)[dim];
  dispatch_dtype(x.dtype(), "scatter_add", [&]<class T>() {
    const T* sp = static_cast<const T*>(src.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    int64_t m = w.inner_size;
    parallel_for(0, w.rows, row_grain(m), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        T* orow = op + w.offset(ors, r);
        const int64_t* ir = ip + w.offset(irs, r);
        const T* sr = sp + w.offset(srs, r);
        for (int64_t i = 0; i < m; ++i) accumulate(orow[ir[i * i_dim] * o_dim], sr[i * s_dim]);
      }
    });
  });
  return out;
}

// ---- one_hot ----

// indices [*] (int64) -> [*, num_classes] int64; num_classes = -1 infers max + 1.
Tensor one_hot_cpu(const Tensor& indices, int64_t num_classes) {
  check_defined(indices, "one_hot", "self");
  GRAFT_CHECK(indices.dtype() == kInt64, "one_hot: expected an int64 tensor of class indices, got ",
              describe(indices));
  GRAFT_CHECK(num_classes >= -1, "one_hot: num_classes must be -1 (infer) or non-negative, got ", num_classes);
  Tensor idx = contiguous_cpu(indices);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i)
    GRAFT_CHECK(ip[i] >= 0, "one_hot: class values must be non-negative, got index ", ip[i]);
  if (num_classes == -1) {
    GRAFT_CHECK(n > 0, "one_hot: cannot infer num_classes from an empty tensor ", describe(indices));
    num_classes = *std::max_element(ip, ip + n) + 1;
  }
  int64_t cls_dim = indices.dim();
  check_indices(ip, n, num_classes, cls_dim, "one_hot");
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(num_classes);
  Tensor out = new_tensor(out_sizes, kInt64, indices.device());
  int64_t* op = static_cast<int64_t*>(out.data_ptr());
  parallel_for(0, n, row_grain(num_classes), [&](int64_t b, int64_t e) {
    if (e > b) std::memset(op + b * num_classes, 0, static_cast<size_t>((e - b) * num_classes) * sizeof(int64_t));
    for (int64_t i = b; i < e; ++i) op[i * num_classes + ip[i]] = 1;
  });
  return out;
}

}  // namespace

GRAFT_DEFINE_OP("embedding(Tensor weight, Tensor indices, int padding_idx) -> Tensor");
GRAFT_DEFINE_OP("embedding_backward(Tensor grad, Tensor indices, int num_weights, int padding_idx) -> Tensor");
GRAFT_DEFINE_OP("index_select(Tensor self, int dim, Tensor index) -> Tensor");
GRAFT_DEFINE_OP("index_add(Tensor self, int dim, Tensor index, Tensor source) -> Tensor");
GRAFT_DEFINE_OP("gather(Tensor self, int dim, Tensor index) -> Tensor");
GRAFT_DEFINE_OP("scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor");
GRAFT_DEFINE_OP("one_hot(Tensor self, int num_classes) -> Tensor");
GRAFT_KERNEL("embedding", CPU, embedding_cpu);
GRAFT_KERNEL("embedding_backward", CPU, embedding_backward_cpu);
GRAFT_KERNEL("index_select", CPU, index_select_cpu);
GRAFT_KERNEL("index_add", CPU, index_add_cpu);
GRAFT_KERNEL("gather", CPU, gather_cpu);
GRAFT_KERNEL("scatter_add", CPU, scatter_add_cpu);
GRAFT_KERNEL("one_hot", CPU, one_hot_cpu);

}  // namespace kernels

namespace ops {

Tensor embedding(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  GRAFT_OP_HANDLE(op, "embedding");
  return call_op(op, weight, indices, padding_idx)[0];
}
Tensor embedding_backward(const Tensor& grad, const Tensor& indices, int64_t num_weights, int64_t padding_idx) {
  GRAFT_OP_HANDLE(op, "embedding_backward");
  return call_op(op, grad, indices, num_weights, padding_idx)[0];
}
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  GRAFT_OP_HANDLE(op, "index_select");
  return call_op(op, x, dim, index)[0];
}
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  GRAFT_OP_HANDLE(op, "index_add");
  return call_op(op, x, dim, index, src)[0];
}
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  GRAFT_OP_HANDLE(op, "gather");
  return call_op(op, x, dim, index)[0];
}
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  GRAFT_OP_HANDLE(op, "scatter_add");
  return call_op(op, x, dim, index, src)[0];
}
Tensor one_hot(const Tensor& indices, int64_t num_classes) {
  GRAFT_OP_HANDLE(op, "one_hot");
  return call_op(op, indices, num_classes)[0];
}

}  // namespace ops
}  // namespace graft
