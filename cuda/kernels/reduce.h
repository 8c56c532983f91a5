#pragma once
// Device side of the reductions: sum/mean, amax/amin (and max()/min()), max.dim/min.dim/argmax/
// argmin, var/std, norm and logsumexp.
//
// Each output reduces one "row" of `len` elements. The glue hands x over in one of two layouts:
// - rows:    [n_out, len] contiguous (the reduced dims innermost), or
// - blocked: [outer, len, inner] contiguous (reduced dims in the middle; output o * inner + j
//            reduces x[o, :, j]), only when reduce_use_blocked() says it pays.
// Anything else is first copied to rows by the glue. Position k along a row is the row-major
// index over the reduced dims (what argmax returns).
//
// Accumulation: floating sums/means, var/std, norm and logsumexp accumulate in double whatever the
// input (as the CPU kernels); integer and bool sums in int64. sum/mean also take bfloat16 and
// float16 (input or output): elements load exactly, the sum is in double, and a 16-bit output is
// rounded once from float32's result, as the CPU's float fallback. Parallel order differs from the CPU's
// left-to-right pieces, so float results agree to rounding, not bit for bit.
// Ties (max.dim/min.dim/argmax/argmin): the first index wins; a NaN wins outright, the first NaN
// among several -- exactly the CPU's answer, whatever the order the threads combine in.
#include <cuda_runtime.h>

#include <cstdint>

#include "ops/norm_kind.h"
#include "runtime/dtype.h"

namespace graft::cuda {

struct ReduceShape {
  bool blocked = false;
  int64_t n_out = 0, len = 0;
  int64_t outer = 1, inner = 1;  // blocked only: n_out == outer * inner
};

// Whether reading [outer, len, inner] in place (one thread per output walking its column, reads
// coalesced across the inner dim) beats copying x to rows first.
inline bool reduce_use_blocked(int64_t n_out, int64_t len, int64_t inner) {
  return inner >= 32 && (n_out >= 1024 || len <= 1024);
}

// Bytes of device scratch the launchers need for this shape (0 when none); pass a buffer at least
// this large, aligned to 16 bytes, as `scratch`.
int64_t reduce_scratch_bytes(const ReduceShape& s);

// sum (mean = false) or mean of x (dtype xt) into out (dtype ot): each element is cast to ot,
// then accumulated (double for floating ot, int64 otherwise). A bool sum is `acc != 0`. mean of an
// empty row is NaN.
void launch_sum(const void* x, DType xt, void* out, DType ot, bool mean, const ReduceShape& s, void* scratch,
                cudaStream_t stream);
// amax/amin: any NaN in a row gives NaN. Rows must be non-empty.
void launch_extremum(const void* x, DType t, void* out, bool is_max, const ReduceShape& s, void* scratch,
                     cudaStream_t stream);
// max.dim/min.dim (values != nullptr) or argmax/argmin (values == nullptr). Rows must be non-empty.
void launch_arg_extremum(const void* x, DType t, void* values, int64_t* indices, bool is_max, const ReduceShape& s,
                         void* scratch, cudaStream_t stream);
// m2 / max(0, len - correction), square-rooted when take_sqrt. Floating t only.
void launch_var(const void* x, DType t, void* out, int64_t correction, bool take_sqrt, const ReduceShape& s,
                void* scratch, cudaStream_t stream);

// Floating t only; Inf/NegInf rows must be non-empty.
void launch_norm(const void* x, DType t, void* out, NormKind kind, double p, const ReduceShape& s, void* scratch,
                 cudaStream_t stream);
// m + log(sum exp(x - m)); rows whose max is +-inf give it, NaN gives NaN. Floating t only.
void launch_logsumexp(const void* x, DType t, void* out, const ReduceShape& s, void* scratch, cudaStream_t stream);

}  // namespace graft::cuda
