// Reductions: sum, mean, amax/amin, max/min (values and indices), argmax/argmin, var/std, norm,
// logsumexp, and sum_to.
//
// Every reduction is written once, as a Reducer, and run by one driver (run_reduction):
//   acc_t chunk(const T* p, int64_t n, int64_t first)  reduces p[0, n), whose elements are
//                                                       elements first, first+1, ... of the row
//   void merge(acc_t& left, const acc_t& right)         joins two adjacent pieces, left first
//   void write(int64_t out_index, const acc_t& acc)     finishes and stores one output
// Each output reduces a "row" of `len` elements (the reduced dims, row-major). The driver reads
// the input in one of three ways, without a copy whenever the memory allows:
// - rows:    memory is [n_out, len] (reduced dims innermost), each row is contiguous;
// - blocked: memory is [outer, len, inner] (reduced dims in the middle, e.g. dim 0 of a matrix);
//            tiles of up to 16 neighbouring columns are transposed into a small buffer and
//            reduced as rows, so memory is read in order and every Reducer works unchanged;
// - copy:    anything else (transposes, gaps, broadcasts) is copied to [n_out, len] first.
// Rows longer than kChunk are always cut into the same kChunk pieces and merged left to right,
// on one thread or many and on every path, so results and tie-breaking depend on the shape only,
// never on the thread count.
//
// Sums over the outer dims of a contiguous tensor (bias gradients, sum_to) skip the tiles and
// accumulate whole columns (sum_columns), which vectorises.
//
// sum and mean of bfloat16/float16 (and a sum asked for in a 16-bit dtype) read the input as it
// is, widen each element to float (exact), accumulate in double as float32 does, and round once
// to the result dtype; a requested float32/float64 result (sum(x, dtype=kFloat32)) is
// not rounded to the input's dtype, as PyTorch. The other reductions take the float fallback.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>

#include "ops/cpu_kernels.h"
#include "ops/kernel_utils.h"
#include "ops/reduce_plan.h"
#include "ops/scalar_math.h"
#include "ops/ops.h"
#include "ops/vec_math.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

constexpr int64_t kChunk = kGrainSize;

template <class T>
inline bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return v != v;
  else return false;
}

// ---- layout ----

// x's storage seen with other sizes/strides: no dispatch, no copy.
Tensor restrided(const Tensor& x, Shape sizes, Shape strides) {
  return Tensor(std::make_shared<TensorImpl>(x.impl()->storage(), x.dtype(), std::move(sizes), std::move(strides),
                                             x.storage_offset()));
}

enum class Path { Rows, Blocked, Copy };
struct Access {
  Path path = Path::Copy;
  int64_t outer = 1, inner = 1;
};

// How to read x for this reduction (see the top of the file).
Access plan_access(const Tensor& x, const ReduceLayout& p) {
  Access a;
  Shape rs, rst;
  reordered(x, p, false, rs, rst);
  if (is_contiguous_layout(rs, rst)) {
    a.path = Path::Rows;
    return a;
  }
  Shape bs, bst;
  blocked_order(x, p, bs, bst, a.outer, a.inner);
  if (is_contiguous_layout(bs, bst)) a.path = Path::Blocked;
  return a;
}

// x copied to contiguous [n_out, len] rows of `dtype`.
Tensor copy_to_rows(const Tensor& x, const ReduceLayout& p, DType dtype) {
  Shape sizes, strides;
  reordered(x, p, false, sizes, strides);
  return contiguous_cpu(restrided(x, std::move(sizes), std::move(strides)), dtype);
}

// ---- the reduction loop ----

template <class T, class R>
typename R::acc_t reduce_row(const R& r, const T* row, int64_t len) {
  if (len <= kChunk) return r.chunk(row, len, 0);
  auto acc = r.chunk(row, kChunk, 0);
  for (int64_t b = kChunk; b < len; b += kChunk) r.merge(acc, r.chunk(row + b, std::min(len - b, kChunk), b));
  return acc;
}

// data: [n, len] contiguous. Output i gets the reduction of row i.
template <class T, class R>
void reduce_rows(const T* data, int64_t n, int64_t len, const R& r) {
  if (n == 0) return;
  int64_t nchunks = (len + kChunk - 1) / kChunk;
  if (nchunks > 1 && n < get_num_threads()) {
    // A few long rows (e.g. a full reduction): the threads share each row's pieces.
    std::vector<typename R::acc_t> part(static_cast<size_t>(nchunks));
    for (int64_t i = 0; i < n; ++i) {
      const T* row = data + i * len;
      parallel_for(0, nchunks, 1, [&](int64_t b, int64_t e) {
        for (int64_t c = b; c < e; ++c)
          part[c] = r.chunk(row + c * kChunk, std::min(kChunk, len - c * kChunk), c * kChunk);
      });
      for (int64_t c = 1; c < nchunks; ++c) r.merge(part[0], part[c]);
      r.write(i, part[0]);
    }
    return;
  }
  int64_t grain = grain_for(len);
  parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) r.write(i, reduce_row(r, data + i * len, len));
  });
}

// data: [outer, len, inner] contiguous; output o * inner + j reduces data[o, :, j]. Works on
// tiles of h rows (one kChunk piece) by w columns, transposed into a private buffer.
template <class T, class R>
void reduce_blocked(const T* data, int64_t outer, int64_t len, int64_t inner, const R& r) {
  constexpr int64_t kTileElems = 65536, kMaxWidth = 16;
  int64_t h = std::max<int64_t>(1, std::min(len, kChunk));
  int64_t w = std::clamp<int64_t>(kTileElems / h, 1, kMaxWidth);
  int64_t nb = (inner + w - 1) / w, tasks = outer * nb;
  if (tasks == 0) return;
  int64_t grain = grain_for(len * w);
  parallel_for(0, tasks, grain, [&](int64_t tb, int64_t te) {
    std::unique_ptr<T[]> buffer(new T[static_cast<size_t>(w * h)]);  // not std::vector: vector<bool>
    T* tile = buffer.get();
    std::vector<typename R::acc_t> acc(static_cast<size_t>(w));
    for (int64_t t = tb; t < te; ++t) {
      int64_t o = t / nb, j0 = (t % nb) * w, wc = std::min(w, inner - j0);
      const T* base = data + o * len * inner + j0;
      if (len == 0)
        for (int64_t k = 0; k < wc; ++k) acc[k] = r.chunk(tile, 0, 0);
      for (int64_t rb = 0; rb < len; rb += h) {
        int64_t hh = std::min(h, len - rb);
        for (int64_t i = 0; i < hh; ++i) {
          const T* src = base + (rb + i) * inner;
          for (int64_t k = 0; k < wc; ++k) tile[k * h + i] = src[k];
        }
        for (int64_t k = 0; k < wc; ++k) {
          auto a = r.chunk(tile + k * h, hh, rb);
          if (rb == 0) acc[k] = a;
          else r.merge(acc[k], a);
        }
      }
      for (int64_t k = 0; k < wc; ++k) r.write(o * inner + j0 + k, acc[k]);
    }
  });
}

// Runs reducer r (element type T) over x for the reduction p, choosing how to read x.
template <class T, class R>
void run_reduction(const Tensor& x, const ReduceLayout& p, const R& r) {
  if (p.n_out == 0) return;
  Access a = x.dtype() == dtype_v<T> ? plan_access(x, p) : Access{};
  if (a.path == Path::Blocked) {
    reduce_blocked(static_cast<const T*>(x.data_ptr()), a.outer, p.len, a.inner, r);
    return;
  }
  Tensor rows = a.path == Path::Rows ? x : copy_to_rows(x, p, dtype_v<T>);
  reduce_rows(static_cast<const T*>(rows.data_ptr()), p.n_out, p.len, r);
}

// ---- sum / mean ----

// Pairwise summation: error grows with log(n) instead of n. Elements are cast to O first (sum's
// dtype argument means "cast, then sum", as PyTorch) and accumulated in A.
template <class A, class O, class T>
A pairwise_sum(const T* p, int64_t n) {
  if (n <= 128) {
    A s[4] = {A(0), A(0), A(0), A(0)};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
      for (int k = 0; k < 4; ++k) s[k] += static_cast<A>(static_cast<O>(p[i + k]));
    for (; i < n; ++i) s[0] += static_cast<A>(static_cast<O>(p[i]));
    return (s[0] + s[1]) + (s[2] + s[3]);
  }
  int64_t half = (n / 2) & ~int64_t{3};
  return pairwise_sum<A, O>(p, half) + pairwise_sum<A, O>(p + half, n - half);
}

template <class T, class O, class A>
struct SumReducer : scalar_math::SumWrite<O> {
  using acc_t = A;
  A chunk(const T* p, int64_t n, int64_t) const { return pairwise_sum<A, O>(p, n); }
  void merge(A& a, const A& b) const { a += b; }
};

// acc[j] += wide(rows[r * stride + j]) for r < count, j < width, each column added in row order;
// `wide` widens a stored element to double exactly. Four rows per pass over acc: a quarter of its
// loads and stores, the same order of additions.
template <class S, class Wide>
[[gnu::always_inline]] inline void add_rows(const S* rows, int64_t stride, int64_t count, int64_t width, double* acc,
                                           Wide wide) {
  int64_t r = 0;
  for (; r + 4 <= count; r += 4) {
    const S *r0 = rows + r * stride, *r1 = r0 + stride, *r2 = r1 + stride, *r3 = r2 + stride;
    for (int64_t j = 0; j < width; ++j) {
      double a = acc[j];
      a += wide(r0[j]);
      a += wide(r1[j]);
      a += wide(r2[j]);
      a += wide(r3[j]);
      acc[j] = a;
    }
  }
  for (; r < count; ++r) {
    const S* row = rows + r * stride;
    for (int64_t j = 0; j < width; ++j) acc[j] += wide(row[j]);
  }
}

// add_rows for float32 and for bfloat16 bits (a bias gradient under autocast), multiversioned: the
// build targets generic x86-64, where the loop would convert two lanes at a time. Every clone adds
// in the same order, so every clone gives the same bits.
GRAFT_VECTOR_CLONES void add_rows_f32(const float* rows, int64_t stride, int64_t count, int64_t width, double* acc) {
  add_rows(rows, stride, count, width, acc, [](float v) { return static_cast<double>(v); });
}
GRAFT_VECTOR_CLONES void add_rows_bf16(const uint16_t* rows, int64_t stride, int64_t count, int64_t width, double* acc) {
  add_rows(rows, stride, count, width, acc, [](uint16_t b) { return static_cast<double>(half_bits::bf16_to_float(b)); });
}

// data: [len, n] row-major; out[j] = sum over r of data[r, j]. The inner loop runs along a
// contiguous row, so it vectorises and reads memory once.
template <class T, class O, class A>
void sum_columns(const T* data, int64_t len, int64_t n, O* out, bool mean) {
  auto accumulate = [&](int64_t rb, int64_t re, int64_t jb, int64_t je, A* acc) {
    std::fill(acc, acc + (je - jb), A(0));
    // Where casting to O first changes nothing (O holds every T), the widening loops apply.
    constexpr bool wide_o = std::is_same_v<O, float> || std::is_same_v<O, double>;
    if constexpr (std::is_same_v<T, float> && std::is_same_v<A, double> && wide_o) {
      add_rows_f32(data + rb * n + jb, n, re - rb, je - jb, acc);
      return;
    }
    if constexpr (std::is_same_v<T, BFloat16> && std::is_same_v<A, double> && (wide_o || std::is_same_v<O, BFloat16>)) {
      add_rows_bf16(reinterpret_cast<const uint16_t*>(data) + rb * n + jb, n, re - rb, je - jb, acc);
      return;
    }
    for (int64_t r = rb; r < re; ++r) {
      const T* row = data + r * n;
      for (int64_t j = jb; j < je; ++j) acc[j - jb] += static_cast<A>(static_cast<O>(row[j]));
    }
  };
  // Tall (a bias gradient's [N * L, C], or [1e6, 2]): split the rows into bands, each summed over
  // whole rows (contiguous, so it vectorises), and add the bands' sums in a fixed order. The split
  // depends on the shape only, so results do not change with threads. Splitting the columns
  // instead would read each row in short strided pieces.
  const scalar_math::SumWrite<O> writer{out, mean, len};
  int64_t total = len * n;
  if (total > 2 * kGrainSize && len >= 64) {
    int64_t parts = std::min<int64_t>({64, total / kGrainSize, len / 16});
    std::vector<A> partial(static_cast<size_t>(parts * n));
    parallel_for(0, parts, 1, [&](int64_t b, int64_t e) {
      for (int64_t c = b; c < e; ++c)
        accumulate(c * len / parts, (c + 1) * len / parts, 0, n, partial.data() + c * n);
    });
    for (int64_t j = 0; j < n; ++j) {
      A s = partial[j];
      for (int64_t c = 1; c < parts; ++c) s += partial[c * n + j];
      writer.write(j, s);
    }
    return;
  }
  int64_t grain = grain_for(len);
  parallel_for(0, n, grain, [&](int64_t jb, int64_t je) {
    std::vector<A> acc(static_cast<size_t>(je - jb));
    accumulate(0, len, jb, je, acc.data());
    for (int64_t j = jb; j < je; ++j) writer.write(j, acc[j - jb]);
  });
}

Tensor sum_impl(const Tensor& x, const Shape& dims, bool keepdim, DType out_dtype, bool mean, const char* op) {
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  Tensor out = new_tensor(p.out_sizes, out_dtype, x.device());
  if (p.n_out == 0) return out;
  Access a = plan_access(x, p);
  bool columns = a.path == Path::Blocked && a.outer == 1;
  auto run = [&]<class T>() {
    dispatch_dtype(out_dtype, op, [&]<class O>() {
      using A = std::conditional_t<std::is_floating_point_v<O>, double, int64_t>;
      O* o = static_cast<O*>(out.data_ptr());
      if (columns) sum_columns<T, O, A>(static_cast<const T*>(x.data_ptr()), p.len, p.n_out, o, mean);
      else run_reduction<T>(x, p, SumReducer<T, O, A>{{o, mean, p.len}});
    });
  };
  // A 16-bit input is read as it is and widened element by element (exact), so no float32 copy
  // of it is ever made: a bias gradient's sum costs no extra memory.
  if (is_reduced_floating(x.dtype()))
    dispatch_float_or_reduced(x.dtype(), op, run);
  else
    dispatch_dtype(x.dtype(), op, run);
  return out;
}

// ---- max / min ----

template <bool Max, class T>
inline bool better(T a, T b) {
  if constexpr (Max) return a > b;
  else return a < b;
}

// amax/amin and max()/min(): any NaN in the row makes the result NaN.
template <class T, bool Max>
struct ExtremumReducer {
  struct acc_t {
    T v{};
    bool nan = false;
  };
  T* out;
  acc_t chunk(const T* p, int64_t n, int64_t) const {
    T v = p[0];
    bool nan = is_nan(v);
    for (int64_t i = 1; i < n; ++i) {
      T x = p[i];
      nan = nan || is_nan(x);
      v = better<Max>(x, v) ? x : v;
    }
    return {v, nan};
  }
  void merge(acc_t& a, const acc_t& b) const {
    a.nan = a.nan || b.nan;
    if (better<Max>(b.v, a.v)) a.v = b.v;
  }
  void write(int64_t i, const acc_t& a) const {
    if constexpr (std::is_floating_point_v<T>) out[i] = a.nan ? std::numeric_limits<T>::quiet_NaN() : a.v;
    else out[i] = a.v;
  }
};

// max.dim/min.dim and argmax/argmin: the first occurrence wins ties; the first NaN wins outright.
template <class T, bool Max>
struct ArgReducer {
  struct acc_t {
    T v{};
    int64_t i = 0;
  };
  T* values;  // may be null (argmax)
  int64_t* indices;
  acc_t chunk(const T* p, int64_t n, int64_t first) const {
    acc_t a{p[0], first};
    for (int64_t j = 1; j < n && !is_nan(a.v); ++j)
      if (is_nan(p[j]) || better<Max>(p[j], a.v)) a = {p[j], first + j};
    return a;
  }
  void merge(acc_t& a, const acc_t& b) const {
    if (!is_nan(a.v) && (is_nan(b.v) || better<Max>(b.v, a.v))) a = b;
  }
  void write(int64_t i, const acc_t& a) const {
    if (values) values[i] = a.v;
    indices[i] = a.i;
  }
};

template <bool Max>
Tensor extremum_impl(const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
  check_defined(x, op, "self");
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  check_nonempty_reduction(x, p, op);
  Tensor out = new_tensor(p.out_sizes, x.dtype(), x.device());
  dispatch_dtype(x.dtype(), op, [&]<class T>() {
    run_reduction<T>(x, p, ExtremumReducer<T, Max>{static_cast<T*>(out.data_ptr())});
  });
  return out;
}

template <bool Max>
std::vector<Tensor> arg_impl(const Tensor& x, const Shape& dims, bool keepdim, bool with_values, const char* op) {
  check_defined(x, op, "self");
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  check_nonempty_reduction(x, p, op);
  Tensor values = with_values ? new_tensor(p.out_sizes, x.dtype(), x.device()) : Tensor();
  Tensor indices = new_tensor(p.out_sizes, kInt64, x.device());
  dispatch_dtype(x.dtype(), op, [&]<class T>() {
    T* v = with_values ? static_cast<T*>(values.data_ptr()) : nullptr;
    run_reduction<T>(x, p, ArgReducer<T, Max>{v, static_cast<int64_t*>(indices.data_ptr())});
  });
  if (with_values) return {values, indices};
  return {indices};
}

// ---- var / std ----

// Count, mean and sum of squared deviations of a piece; pieces merge with Chan et al.'s formula.
// Each piece is two-pass (mean first), which is exact enough that no Welford update is needed.
template <class T>
struct VarReducer {
  using acc_t = scalar_math::MomentAcc;
  T* out;
  int64_t len, correction;
  bool take_sqrt;
  acc_t chunk(const T* p, int64_t n, int64_t) const {
    acc_t a;
    a.n = static_cast<double>(n);
    if (n == 0) return a;
    a.mean = pairwise_sum<double, double>(p, n) / a.n;
    double m2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      double d = static_cast<double>(p[i]) - a.mean;
      m2 += d * d;
    }
    a.m2 = m2;
    return a;
  }
  void merge(acc_t& a, const acc_t& b) const { scalar_math::merge_moments(a, b); }
  void write(int64_t i, const acc_t& a) const {
    double divisor = std::max<double>(0.0, static_cast<double>(len - correction));
    double v = a.m2 / divisor;  // len <= correction gives inf or NaN, as PyTorch
    out[i] = static_cast<T>(take_sqrt ? std::sqrt(v) : v);
  }
};

Tensor var_impl(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim, bool take_sqrt, const char* op) {
  check_defined(x, op, "self");
  GRAFT_CHECK(is_floating(x.dtype()), op, ": expected a floating point input, got ", describe(x));
  ReduceLayout p = plan_reduction(x, dims, keepdim, op);
  Tensor out = new_tensor(p.out_sizes, x.dtype(), x.device());
  dispatch_floating(x.dtype(), op, [&]<class T>() {
    run_reduction<T>(x, p, VarReducer<T>{static_cast<T*>(out.data_ptr()), p.len, correction, take_sqrt});
  });
  return out;
}

// ---- norm ----

template <class T>
struct NormReducer {
  using acc_t = double;
  T* out;
  NormKind kind;
  double p;
  double chunk(const T* row, int64_t n, int64_t) const {
    double a = 0;
    switch (kind) {
      case NormKind::Zero:
        for (int64_t i = 0; i < n; ++i) a += row[i] != T(0) ? 1.0 : 0.0;
        break;
      case NormKind::One:
        for (int64_t i = 0; i < n; ++i) a += std::abs(static_cast<double>(row[i]));
        break;
      case NormKind::Two:
        for (int64_t i = 0; i < n; ++i) a += static_cast<double>(row[i]) * static_cast<double>(row[i]);
        break;
      case NormKind::Inf:
      case NormKind::NegInf: {
        bool mx = kind == NormKind::Inf;
        a = std::abs(static_cast<double>(row[0]));  // n > 0: empty inf-norms are rejected up front
        for (int64_t i = 1; i < n && !is_nan(a); ++i) {
          double v = std::abs(static_cast<double>(row[i]));
          if (is_nan(v) || (mx ? v > a : v < a)) a = v;
        }
        break;
      }
      case NormKind::General:
        for (int64_t i = 0; i < n; ++i) a += std::pow(std::abs(static_cast<double>(row[i])), p);
        break;
    }
    return a;
  }
  void merge(double& a, const double& b) const {
    if (kind == NormKind::Inf || kind == NormKind::NegInf) {
      bool mx = kind == NormKind::Inf;
      if (!is_nan(a) && (is_nan(b) || (mx ? b > a : b < a))) a = b;
    } else {
      a += b;
    }
  }
  void write(int64_t i, const double& a) const {
    double r = a;
    if (kind == NormKind::Two) r = std::sqrt(a);
    else if (kind == NormKind::General) r = std::pow(a, 1.0 / p);
    out[i] = static_cast<T>(r);
  }
};

// ---- logsumexp ----

// m + log(sum exp(x - m)) with m the row max, so nothing overflows. A row whose max is infinite
// gives that infinity (all -inf rows give -inf); any NaN gives NaN.
template <class T>
struct LogSumExpReducer {
  struct acc_t {
    double m = -std::numeric_limits<double>::infinity();
    double s = 0;
  };
  T* out;
  acc_t chunk(const T* row, int64_t n, int64_t) const {
    T m = -std::numeric_limits<T>::infinity();
    for (int64_t i = 0; i < n && m == m; ++i)
      if (row[i] > m || row[i] != row[i]) m = row[i];
    acc_t a;
    a.m = static_cast<double>(m);
    if (std::isnan(m) || std::isinf(m)) return a;
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(std::exp(row[i] - m));
    a.s = s;
    return a;
  }
  void merge(acc_t& a, const acc_t& b) const {
    constexpr double inf = std::numeric_limits<double>::infinity();
    if (std::isnan(a.m) || std::isnan(b.m)) a.m = std::numeric_limits<double>::quiet_NaN();
    else if (b.m == -inf) return;
    else if (a.m == -inf) a = b;
    else if (a.m == inf || b.m == inf) a.m = inf;
    else {
      double m = std::max(a.m, b.m);
      a.s = a.s * std::exp(a.m - m) + b.s * std::exp(b.m - m);
      a.m = m;
    }
  }
  void write(int64_t i, const acc_t& a) const {
    out[i] = static_cast<T>(std::isnan(a.m) || std::isinf(a.m) ? a.m : a.m + std::log(a.s));
  }
};

// sum/mean where the input or the result is bfloat16/float16 (see the header).
Tensor sum_via_float(const Tensor& x, const Shape& dims, bool keepdim, DType out_dtype, bool mean, const char* op) {
  const DType compute = out_dtype == kFloat64 ? kFloat64 : is_reduced_floating(out_dtype) ? kFloat32 : out_dtype;
  Tensor r = sum_impl(x, dims, keepdim, compute, mean, op);
  return r.dtype() == out_dtype ? r : contiguous_cpu(r, out_dtype);
}

}  // namespace

// ---- kernels (declared in ops/cpu_kernels.h, registered from the op declarations) ----

Tensor sum_cpu(const Tensor& x, const Shape& dims, bool keepdim, std::optional<DType> dtype) {
  const DType od = sum_dtype(x, dtype);
  if (is_reduced_floating(x.dtype()) || is_reduced_floating(od)) return sum_via_float(x, dims, keepdim, od, false, "sum");
  return sum_impl(x, dims, keepdim, od, false, "sum");
}

Tensor mean_cpu(const Tensor& x, const Shape& dims, bool keepdim) {
  check_mean(x);
  if (is_reduced_floating(x.dtype())) return sum_via_float(x, dims, keepdim, x.dtype(), true, "mean");
  return sum_impl(x, dims, keepdim, x.dtype(), true, "mean");
}

Tensor amax_cpu(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_impl<true>(x, dims, keepdim, "amax");
}

Tensor amin_cpu(const Tensor& x, const Shape& dims, bool keepdim) {
  return extremum_impl<false>(x, dims, keepdim, "amin");
}

Tensor max_cpu(const Tensor& x) {
  check_defined(x, "max", "self");
  GRAFT_CHECK(x.numel() > 0, "max: expected a non-empty tensor, got ", describe(x),
              " (specify the reduction dim with max(dim) to reduce an empty tensor)");
  return extremum_impl<true>(x, {}, false, "max");
}

Tensor min_cpu(const Tensor& x) {
  check_defined(x, "min", "self");
  GRAFT_CHECK(x.numel() > 0, "min: expected a non-empty tensor, got ", describe(x),
              " (specify the reduction dim with min(dim) to reduce an empty tensor)");
  return extremum_impl<false>(x, {}, false, "min");
}

std::vector<Tensor> max_dim_cpu(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_impl<true>(x, {dim}, keepdim, true, "max");
}

std::vector<Tensor> min_dim_cpu(const Tensor& x, int64_t dim, bool keepdim) {
  return arg_impl<false>(x, {dim}, keepdim, true, "min");
}

// dim none = the index into the flattened tensor (keepdim then gives all-ones dims, as PyTorch).
Tensor argmax_cpu(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_impl<true>(x, dim ? Shape{*dim} : Shape{}, keepdim, false, "argmax")[0];
}

Tensor argmin_cpu(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  return arg_impl<false>(x, dim ? Shape{*dim} : Shape{}, keepdim, false, "argmin")[0];
}

Tensor var_cpu(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return var_impl(x, dims, correction, keepdim, false, "var");
}

Tensor std_cpu(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  return var_impl(x, dims, correction, keepdim, true, "std");
}

Tensor norm_cpu(const Tensor& x, double p, const Shape& dims, bool keepdim) {
  auto [kind, lay] = plan_norm(x, p, dims, keepdim);
  Tensor out = new_tensor(lay.out_sizes, x.dtype(), x.device());
  dispatch_floating(x.dtype(), "norm", [&]<class T>() {
    run_reduction<T>(x, lay, NormReducer<T>{static_cast<T*>(out.data_ptr()), kind, p});
  });
  return out;
}

// Integer inputs are computed in float32 (PyTorch promotes them to the default float dtype).
Tensor logsumexp_cpu(const Tensor& x, const Shape& dims, bool keepdim) {
  check_defined(x, "logsumexp", "self");
  DType dt = is_floating(x.dtype()) ? x.dtype() : kFloat32;
  ReduceLayout p = plan_reduction(x, dims, keepdim, "logsumexp");
  Tensor out = new_tensor(p.out_sizes, dt, x.device());
  dispatch_floating(dt, "logsumexp", [&]<class T>() {
    run_reduction<T>(x, p, LogSumExpReducer<T>{static_cast<T*>(out.data_ptr())});
  });
  return out;
}

}  // namespace kernels

namespace ops {

// A composite of sum (and a view), so every backend that has sum gets it and dispatch modes see
// ordinary ops. Returns grad itself when nothing was broadcast.
Tensor sum_to(const Tensor& grad, const Shape& shape) {
  kernels::check_defined(grad, "sum_to", "grad");
  int64_t nd = grad.dim(), ns = static_cast<int64_t>(shape.size());
  GRAFT_CHECK(ns <= nd, "sum_to: cannot sum a gradient of shape ", shape_str(grad.sizes()), " to shape ",
              shape_str(shape), " (the target has more dims)");
  int64_t lead = nd - ns;
  Shape dims;
  bool only_leading = true;
  for (int64_t i = 0; i < lead; ++i) dims.push_back(i);
  for (int64_t i = 0; i < ns; ++i) {
    int64_t g = grad.size(lead + i);
    GRAFT_CHECK(shape[i] == g || shape[i] == 1, "sum_to: cannot sum a gradient of shape ", shape_str(grad.sizes()),
                " to shape ", shape_str(shape), " (size ", g, " vs ", shape[i], " at dim ", lead + i, ")");
    if (shape[i] == 1 && g != 1) {
      dims.push_back(lead + i);
      only_leading = false;
    }
  }
  if (dims.empty()) return grad;
  DType dt = grad.dtype();
  if (only_leading) return sum(grad, dims, false, dt);
  return view(sum(grad, dims, true, dt), shape);
}

}  // namespace ops
}  // namespace graft
