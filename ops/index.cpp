// Indexing ops on CPU: embedding (+ backward), index_select, index_add, gather, scatter_add, one_hot.
//
// Every index is validated in a serial pass before any parallel work starts, so a bad index is a
// clean graft::Error (never UB, never an exception escaping an OpenMP region). Indices are never
// wrapped: negative values are out of bounds, as in PyTorch's indexing kernels.
#include <algorithm>
#include <cstring>

#include "ops/cpu_kernels.h"
#include "ops/index_plan.h"
#include "ops/kernel_utils.h"
#include "ops/ops.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

// Throws unless every value of the contiguous int64 `idx` lies in [0, size).
void check_indices(const int64_t* idx, int64_t n, int64_t size, int64_t dim, const char* op) {
  for (int64_t i = 0; i < n; ++i)
    if (idx[i] < 0 || idx[i] >= size) index_out_of_bounds_error(idx[i], dim, size, op);
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

// out[o, j, i] = x[o, idx[j], i] for contiguous x viewed as [outer, n_x, inner]; out is [outer, n, inner].
void index_select_blocks(const Tensor& out, const Tensor& x, const int64_t* idx, int64_t n, int64_t outer,
                         int64_t n_x, int64_t inner) {
  size_t es = element_size(x.dtype());
  const char* src = static_cast<const char*>(x.data_ptr());
  char* dst = static_cast<char*>(out.data_ptr());
  size_t block = static_cast<size_t>(inner) * es;
  if (block == 0) return;
  parallel_for(0, outer * n, grain_for(inner), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      int64_t o = k / n, j = k % n;
      std::memcpy(dst + static_cast<size_t>(k) * block, src + static_cast<size_t>(o * n_x + idx[j]) * block, block);
    }
  });
}

// ---- embedding ----

// ---- index_select / index_add ----

// ---- gather / scatter_add ----

// ---- one_hot ----

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

// weight [V, D], indices [*] (int64) -> [*, D]. padding_idx only affects the backward.
Tensor embedding_cpu(const Tensor& weight, const Tensor& indices, int64_t padding_idx) {
  EmbeddingPlan p = plan_embedding(weight, indices, padding_idx);
  int64_t V = p.V, D = p.D;
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
  int64_t D = plan_embedding_backward(grad, indices, num_weights, padding_idx);
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
    parallel_for(0, D, grain_for(n), [&](int64_t b, int64_t e) {
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

// x [..., n_x, ...], index [n] -> [..., n, ...]
Tensor index_select_cpu(const Tensor& x, int64_t dim, const Tensor& index) {
  IndexPlan p = plan_index_select(x, dim, index);
  Tensor idx = contiguous_cpu(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  check_indices(ip, n, p.n_x, p.dim, "index_select");
  Tensor out = new_tensor(index_select_out_sizes(p, x, index, n), x.dtype(), x.device());
  index_select_blocks(out, contiguous_cpu(x), ip, n, p.outer, p.n_x, p.inner);
  return out;
}

// Out-of-place index_add: out = x; out[..., index[j], ...] += src[..., j, ...]
Tensor index_add_cpu(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  IndexPlan p = plan_index_add(x, dim, index, src);
  int64_t n = index.numel();
  Tensor idx = contiguous_cpu(index);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  check_indices(ip, n, p.n_x, p.dim, "index_add");
  Tensor out = new_tensor(x.sizes(), x.dtype(), x.device());
  strided_copy(out, x, x.strides());
  Tensor s = contiguous_cpu(src);
  int64_t outer = p.outer, inner = p.inner, n_x = p.n_x;
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
      parallel_for(0, outer, grain_for(n * inner), [&](int64_t b, int64_t e) { run(b, e, 0, inner); });
    else
      parallel_for(0, inner, grain_for(n * outer), [&](int64_t b, int64_t e) { run(0, outer, b, e); });
  });
  return out;
}

// out[p] = x[p with p[dim] replaced by index[p]]; out has index's shape.
Tensor gather_cpu(const Tensor& x, int64_t dim, const Tensor& index) {
  dim = plan_gather(x, dim, index);
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
  dispatch_all_dtypes(x.dtype(), "gather", [&]<class T>() {  // moves elements only
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    int64_t m = w.inner_size;
    parallel_for(0, w.rows, grain_for(m), [&](int64_t b, int64_t e) {
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
  dim = plan_scatter_add(x, dim, index, src);
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
    parallel_for(0, w.rows, grain_for(m), [&](int64_t b, int64_t e) {
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

// indices [*] (int64) -> [*, num_classes] int64; num_classes = -1 infers max + 1.
Tensor one_hot_cpu(const Tensor& indices, int64_t num_classes) {
  check_one_hot(indices, num_classes);
  Tensor idx = contiguous_cpu(indices);
  const int64_t* ip = static_cast<const int64_t*>(idx.data_ptr());
  int64_t n = idx.numel();
  for (int64_t i = 0; i < n; ++i)
    if (ip[i] < 0) one_hot_negative_error(ip[i]);
  if (num_classes == -1) {
    check_one_hot_inferable(indices, n);
    num_classes = *std::max_element(ip, ip + n) + 1;
  }
  int64_t cls_dim = indices.dim();
  check_indices(ip, n, num_classes, cls_dim, "one_hot");
  Shape out_sizes = indices.sizes();
  out_sizes.push_back(num_classes);
  Tensor out = new_tensor(out_sizes, kInt64, indices.device());
  int64_t* op = static_cast<int64_t*>(out.data_ptr());
  parallel_for(0, n, grain_for(num_classes), [&](int64_t b, int64_t e) {
    if (e > b) std::memset(op + b * num_classes, 0, static_cast<size_t>((e - b) * num_classes) * sizeof(int64_t));
    for (int64_t i = b; i < e; ++i) op[i * num_classes + ip[i]] = 1;
  });
  return out;
}

}  // namespace kernels

}  // namespace graft
