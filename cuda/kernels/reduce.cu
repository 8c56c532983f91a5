// Reduction kernels (see reduce.h for layouts, accumulation and tie-breaking).
//
// Every reduction is one Op: identity(), load(v, k) (element v at position k of its row),
// combine(a, b) (associative and, for the answers we return, commutative: the arg ops break ties
// by index rather than by arrival order) and write(i, acc). Three kernels run any Op:
// - columns: one thread per output walking its row (short rows, or the blocked layout);
// - rows:    a group of G threads per row (G = 32 for rows up to a few thousand, else 256),
//            each thread striding through the row, then a shared-memory tree;
// - partials: very long rows with few outputs are cut into `parts` segments, reduced by the rows
//            kernel into scratch, and a second kernel combines each row's segments in order.
#include "cuda/kernels/reduce.h"

#include <limits>
#include <type_traits>

#include "cuda/kernels/reduce_common.cuh"
#include "ops/scalar_math.h"

namespace graft::cuda {
using namespace rdetail;
namespace {

constexpr int64_t kThreadPerRowMaxLen = 16;
constexpr int64_t kMaxAccBytes = 32;
constexpr int64_t kSegment = 16384;
constexpr int64_t kTargetTasks = 1024;

// Shape-only, so results do not depend on the GPU.
int64_t reduce_parts(const ReduceShape& s) {
  if (s.blocked || s.len <= kThreadPerRowMaxLen) return 1;
  if (s.n_out * 4 >= kTargetTasks || s.len <= 2 * kSegment) return 1;
  int64_t parts = (s.len + kSegment - 1) / kSegment;
  int64_t cap = (kTargetTasks + s.n_out - 1) / s.n_out;
  return parts < cap ? parts : cap;
}

// ---- drivers ----

template <class T, class R>
__global__ void reduce_columns_kernel(const T* x, int64_t n_out, int64_t len, int64_t inner, R r) {
  for (int64_t i = global_thread(); i < n_out; i += global_stride()) {
    const T* p = x + (i / inner) * len * inner + i % inner;
    typename R::acc_t acc = r.identity();
    for (int64_t k = 0; k < len; ++k) r.combine(acc, r.load(p[k * inner], k));
    r.write(i, acc);
  }
}

// Task t is segment t % parts of row t / parts. With parts == 1 the result is written directly.
template <int G, class T, class R>
__global__ void reduce_rows_kernel(const T* x, int64_t n_out, int64_t len, int64_t parts, R r,
                                   typename R::acc_t* partial) {
  using Acc = typename R::acc_t;
  Acc* buf = shared_buffer<Acc>();
  constexpr int kGroups = kBlock / G;
  int g = threadIdx.x / G, lane = threadIdx.x % G;
  int64_t tasks = n_out * parts, seg = (len + parts - 1) / parts;
  // `base` is uniform across the block, so every thread reaches group_reduce's barriers.
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kGroups; base < tasks;
       base += static_cast<int64_t>(gridDim.x) * kGroups) {
    int64_t task = base + g;
    Acc acc = r.identity();
    if (task < tasks) {
      int64_t row = task / parts, b = (task % parts) * seg;
      int64_t e = b + seg < len ? b + seg : len;
      const T* p = x + row * len;
      for (int64_t k = b + lane; k < e; k += G) r.combine(acc, r.load(p[k], k));
    }
    acc = group_reduce<G>(acc, buf, [&](Acc& a, const Acc& b) { r.combine(a, b); });
    if (task < tasks && lane == 0) {
      if (parts == 1) r.write(task, acc);
      else partial[task] = acc;
    }
  }
}

template <class R>
__global__ void reduce_partials_kernel(const typename R::acc_t* partial, int64_t n_out, int64_t parts, R r) {
  for (int64_t i = global_thread(); i < n_out; i += global_stride()) {
    typename R::acc_t acc = partial[i * parts];
    for (int64_t p = 1; p < parts; ++p) r.combine(acc, partial[i * parts + p]);
    r.write(i, acc);
  }
}

template <class T, class R>
void run_reduce(const void* xv, const ReduceShape& s, const R& r, void* scratch, cudaStream_t stream) {
  using Acc = typename R::acc_t;
  static_assert(sizeof(Acc) <= kMaxAccBytes, "reduce: accumulator larger than the scratch slot");
  static_assert(std::is_trivially_copyable_v<Acc>, "reduce: accumulators live in shared memory");
  if (s.n_out == 0) return;
  const T* x = static_cast<const T*>(xv);
  if (s.blocked || s.len <= kThreadPerRowMaxLen) {
    reduce_columns_kernel<T, R><<<grid_for(s.n_out), kBlock, 0, stream>>>(x, s.n_out, s.len,
                                                                          s.blocked ? s.inner : 1, r);
    check_launch("reduce_columns_kernel");
    return;
  }
  int64_t parts = reduce_parts(s), tasks = s.n_out * parts;
  Acc* partial = parts > 1 ? static_cast<Acc*>(scratch) : nullptr;
  if (s.len / parts >= 2048) {
    reduce_rows_kernel<256, T, R><<<grid_for(tasks, 1), kBlock, 0, stream>>>(x, s.n_out, s.len, parts, r, partial);
  } else {
    reduce_rows_kernel<32, T, R><<<grid_for(tasks, kBlock / 32), kBlock, 0, stream>>>(x, s.n_out, s.len, parts, r,
                                                                                     partial);
  }
  check_launch("reduce_rows_kernel");
  if (parts > 1) {
    reduce_partials_kernel<R><<<grid_for(s.n_out), kBlock, 0, stream>>>(partial, s.n_out, parts, r);
    check_launch("reduce_partials_kernel");
  }
}

// ---- ops ----

template <class T, class O, class A>
struct SumOp : scalar_math::SumWrite<O> {
  using acc_t = A;
  __device__ A identity() const { return A(0); }
  // Cast to the output dtype first: sum's dtype argument means "cast, then sum", as PyTorch.
  // A 16-bit element goes through float (exact) on its way in or out of O.
  __device__ A load(T v, int64_t) const {
    using TM = math::opmath_t<T>;
    if constexpr (std::is_same_v<O, BFloat16> || std::is_same_v<O, Half>)
      return static_cast<A>(static_cast<float>(O(static_cast<float>(static_cast<TM>(v)))));
    else
      return static_cast<A>(static_cast<O>(static_cast<TM>(v)));
  }
  __device__ void combine(A& a, const A& b) const { a += b; }
};

template <bool Max, class T>
__device__ __forceinline__ bool better(T a, T b) {
  if constexpr (Max) return a > b;
  else return a < b;
}

template <class T, bool Max>
struct ExtremumOp {
  struct acc_t {
    T v;
    bool nan, has;
  };
  T* out;
  __device__ acc_t identity() const {
    acc_t a;
    a.v = T();
    a.nan = a.has = false;
    return a;
  }
  __device__ acc_t load(T v, int64_t) const { return acc_t{v, is_nan(v), true}; }
  __device__ void combine(acc_t& a, const acc_t& b) const {
    if (!b.has) return;
    if (!a.has) {
      a = b;
      return;
    }
    a.nan = a.nan || b.nan;
    if (better<Max>(b.v, a.v)) a.v = b.v;
  }
  __device__ void write(int64_t i, const acc_t& a) const {
    if constexpr (std::is_floating_point_v<T>) out[i] = a.nan ? std::numeric_limits<T>::quiet_NaN() : a.v;
    else out[i] = a.v;
  }
};

template <class T, bool Max>
struct ArgOp {
  struct acc_t {
    T v;
    int64_t i;
    bool has;
  };
  T* values;  // null for argmax/argmin
  int64_t* indices;
  __device__ acc_t identity() const {
    acc_t a;
    a.v = T();
    a.i = 0;
    a.has = false;
    return a;
  }
  __device__ acc_t load(T v, int64_t k) const { return acc_t{v, k, true}; }
  // The first NaN wins outright, else the best value, the first index among equals.
  __device__ void combine(acc_t& a, const acc_t& b) const {
    if (!b.has) return;
    if (!a.has) {
      a = b;
      return;
    }
    bool an = is_nan(a.v), bn = is_nan(b.v), take;
    if (an || bn) take = bn && (!an || b.i < a.i);
    else take = better<Max>(b.v, a.v) || (b.v == a.v && b.i < a.i);
    if (take) a = b;
  }
  __device__ void write(int64_t i, const acc_t& a) const {
    if (values) values[i] = a.v;
    indices[i] = a.i;
  }
};

// Count, mean and sum of squared deviations, merged with Chan et al.'s formula (a single element
// is a piece of one, so each thread's running update is Welford's).
template <class T>
struct VarOp {
  using acc_t = scalar_math::MomentAcc;
  T* out;
  int64_t len, correction;
  bool take_sqrt;
  __device__ acc_t identity() const { return acc_t{0, 0, 0}; }
  __device__ acc_t load(T v, int64_t) const { return acc_t{1, static_cast<double>(v), 0}; }
  __device__ void combine(acc_t& a, const acc_t& b) const { scalar_math::merge_moments(a, b); }
  __device__ void write(int64_t i, const acc_t& a) const {
    double divisor = static_cast<double>(len - correction);
    if (divisor < 0) divisor = 0;
    double v = a.m2 / divisor;  // len <= correction gives inf or NaN, as PyTorch
    out[i] = static_cast<T>(take_sqrt ? sqrt(v) : v);
  }
};

template <class T>
struct NormOp {
  using acc_t = double;
  T* out;
  NormKind kind;
  double p;
  __device__ double identity() const { return kind == NormKind::NegInf ? std::numeric_limits<double>::infinity() : 0.0; }
  __device__ double load(T v, int64_t) const {
    double d = static_cast<double>(v);
    switch (kind) {
      case NormKind::Zero: return v != T(0) ? 1.0 : 0.0;
      case NormKind::Two: return d * d;
      case NormKind::General: return pow(fabs(d), p);
      default: return fabs(d);  // One, Inf, NegInf
    }
  }
  __device__ void combine(double& a, const double& b) const {
    if (kind == NormKind::Inf || kind == NormKind::NegInf) {
      bool mx = kind == NormKind::Inf;
      if (!isnan(a) && (isnan(b) || (mx ? b > a : b < a))) a = b;
    } else {
      a += b;
    }
  }
  __device__ void write(int64_t i, const double& a) const {
    double r = a;
    if (kind == NormKind::Two) r = sqrt(a);
    else if (kind == NormKind::General) r = pow(a, 1.0 / p);
    out[i] = static_cast<T>(r);
  }
};

// (max, sum of exp(x - max)); the CPU's merge rules for NaN and infinities.
template <class T>
struct LogSumExpOp {
  struct acc_t {
    double m, s;
  };
  T* out;
  __device__ acc_t identity() const { return acc_t{-std::numeric_limits<double>::infinity(), 0}; }
  __device__ acc_t load(T v, int64_t) const {
    double x = static_cast<double>(v);
    return acc_t{x, isnan(x) || isinf(x) ? 0.0 : 1.0};
  }
  __device__ void combine(acc_t& a, const acc_t& b) const {
    constexpr double inf = std::numeric_limits<double>::infinity();
    if (isnan(a.m) || isnan(b.m)) a.m = std::numeric_limits<double>::quiet_NaN();
    else if (b.m == -inf) return;
    else if (a.m == -inf) a = b;
    else if (a.m == inf || b.m == inf) a.m = inf;
    else {
      double m = a.m > b.m ? a.m : b.m;
      a.s = a.s * exp(a.m - m) + b.s * exp(b.m - m);
      a.m = m;
    }
  }
  __device__ void write(int64_t i, const acc_t& a) const {
    out[i] = static_cast<T>(isnan(a.m) || isinf(a.m) ? a.m : a.m + log(a.s));
  }
};

}  // namespace

int64_t reduce_scratch_bytes(const ReduceShape& s) {
  int64_t parts = reduce_parts(s);
  return parts > 1 ? s.n_out * parts * kMaxAccBytes : 0;
}

void launch_sum(const void* x, DType xt, void* out, DType ot, bool mean, const ReduceShape& s, void* scratch,
                cudaStream_t stream) {
  with_dtype_or_reduced(xt, "launch_sum", [&](auto xtag) {
    using T = decltype(xtag);
    with_dtype_or_reduced(ot, "launch_sum", [&](auto otag) {
      using O = decltype(otag);
      // Floating outputs (the 16-bit ones included) accumulate in double, as float32's.
      using A = std::conditional_t<std::is_floating_point_v<math::opmath_t<O>>, double, int64_t>;
      run_reduce<T>(x, s, SumOp<T, O, A>{{static_cast<O*>(out), mean, s.len}}, scratch, stream);
    });
  });
}

void launch_extremum(const void* x, DType t, void* out, bool is_max, const ReduceShape& s, void* scratch,
                     cudaStream_t stream) {
  with_dtype(t, "launch_extremum", [&](auto tag) {
    using T = decltype(tag);
    if (is_max) run_reduce<T>(x, s, ExtremumOp<T, true>{static_cast<T*>(out)}, scratch, stream);
    else run_reduce<T>(x, s, ExtremumOp<T, false>{static_cast<T*>(out)}, scratch, stream);
  });
}

void launch_arg_extremum(const void* x, DType t, void* values, int64_t* indices, bool is_max, const ReduceShape& s,
                         void* scratch, cudaStream_t stream) {
  with_dtype(t, "launch_arg_extremum", [&](auto tag) {
    using T = decltype(tag);
    T* v = static_cast<T*>(values);
    if (is_max) run_reduce<T>(x, s, ArgOp<T, true>{v, indices}, scratch, stream);
    else run_reduce<T>(x, s, ArgOp<T, false>{v, indices}, scratch, stream);
  });
}

void launch_var(const void* x, DType t, void* out, int64_t correction, bool take_sqrt, const ReduceShape& s,
                void* scratch, cudaStream_t stream) {
  with_floating(t, "launch_var", [&](auto tag) {
    using T = decltype(tag);
    run_reduce<T>(x, s, VarOp<T>{static_cast<T*>(out), s.len, correction, take_sqrt}, scratch, stream);
  });
}

void launch_norm(const void* x, DType t, void* out, NormKind kind, double p, const ReduceShape& s, void* scratch,
                 cudaStream_t stream) {
  with_floating(t, "launch_norm", [&](auto tag) {
    using T = decltype(tag);
    run_reduce<T>(x, s, NormOp<T>{static_cast<T*>(out), kind, p}, scratch, stream);
  });
}

void launch_logsumexp(const void* x, DType t, void* out, const ReduceShape& s, void* scratch, cudaStream_t stream) {
  with_floating(t, "launch_logsumexp", [&](auto tag) {
    using T = decltype(tag);
    run_reduce<T>(x, s, LogSumExpOp<T>{static_cast<T*>(out)}, scratch, stream);
  });
}

}  // namespace graft::cuda
