// Matrix products: mm, bmm, matmul (torch.matmul semantics) and linear.
//
// Every op reduces to one core: out[batch..., n, m] = a[batch_a..., n, k] @ b[batch_b..., k, m]
// (+ bias[m]), with a and b padded to the same rank and their batch dims broadcast.
//   float32          -> oneDNN matmul, reading transposed and strided operands in place; a 2-D
//                       product of at most 4 rows and 256K multiply-adds (a decode step's linear)
//                       in plain dot-product loops instead (small_rows_f32: cheaper than the call)
//   bfloat16         -> oneDNN's bf16 matmul (f32 accumulation, one rounding of the result) where
//                       it beats float32 here (dnnl_utils::use_bf16_primitives); else the float
//                       path below
//   float16          -> the float path: oneDNN 2.6 has no f16 matmul for this CPU
//   float64 / int64  -> blocked i-k-j loops here (oneDNN has no f64 matmul; gradchecks need it)
// The float path (matmul_via_float) converts the operands to float32 (exact), runs the float32
// primitive and rounds the result once, so it gives what oneDNN's bf16 kernel gives up to the
// order of the float32 sums. With `out += a @ b` the old out is added in float before that rounding.
#include <algorithm>
#include <cstring>
#include <optional>

#include "ops/cpu_kernels.h"
#include "ops/cpu_parts.h"
#include "ops/dnnl_utils.h"
#include "ops/kernel_utils.h"
#include "ops/matmul_plan.h"
#include "ops/ops.h"
#include "ops/vec_math.h"
#include "runtime/dispatcher.h"
#include "runtime/parallel.h"

namespace graft {
namespace kernels {
namespace {

namespace du = dnnl_utils;

int max_threads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// ---- float32: oneDNN ----

enum : int64_t { kKeyMatmul = 1 };

struct MatmulPrimitive : du::CachedPrimitive {
  dnnl::memory::desc a_md, b_md, bias_md, out_md;
};

std::shared_ptr<const MatmulPrimitive> matmul_primitive(DType dt, const MatOperand& a, const MatOperand& b,
                                                        const Shape& out_sizes, bool has_bias, bool accumulate) {
  du::PrimitiveKey key(kKeyMatmul);
  key.add(static_cast<int64_t>(dt)).add(max_threads()).add(has_bias ? 1 : 0).add(accumulate ? 1 : 0).add(a.sizes).add(a.strides).add(b.sizes).add(b.strides).add(out_sizes);
  return du::get_or_create_as<MatmulPrimitive>(key, [&] {
    auto p = std::make_shared<MatmulPrimitive>();
    p->a_md = du::make_desc(a.sizes, a.strides, dt);
    p->b_md = du::make_desc(b.sizes, b.strides, dt);
    p->out_md = du::make_desc(out_sizes, contiguous_strides(out_sizes), dt);
    if (has_bias) {
      Shape bs(out_sizes.size(), 1);
      bs.back() = out_sizes.back();
      p->bias_md = du::make_desc(bs, contiguous_strides(bs), dt);
    }
    dnnl::matmul::desc d = has_bias ? dnnl::matmul::desc(p->a_md, p->b_md, p->bias_md, p->out_md)
                                    : dnnl::matmul::desc(p->a_md, p->b_md, p->out_md);
    dnnl::primitive_attr attr = du::default_attr();
    if (accumulate) {  // out += a @ b: the sum post-op reads the destination before writing it
      dnnl::post_ops po;
      po.append_sum(1.0f);
      attr.set_post_ops(po);
    }
    dnnl::matmul::primitive_desc pd(d, attr, du::cpu_engine());
    p->prim = dnnl::matmul(pd);
    p->scratchpad = pd.scratchpad_desc();
    return p;
  });
}

// out = a @ b (+ bias) (or += a @ b) on oneDNN, all of dtype `dt` (float32 or bfloat16). Returns
// false, having written nothing, when oneDNN cannot create a `dt` primitive for any layout of the
// operands (a bf16 matmul under ONEDNN_MAX_CPU_ISA=AVX2); a float32 failure is an error.
bool matmul_dnnl(DType dt, MatOperand a, MatOperand b, const Shape& out_sizes, void* out, const Tensor& bias,
                 bool accumulate) {
  // Both operands read as size 1 in a batch dim where out is larger: oneDNN can only broadcast
  // one side, so give `a` its full batch shape (a copy, only for doubly expanded inputs).
  size_t nd = out_sizes.size();
  for (size_t d = 0; d + 2 < nd; ++d) {
    if (a.sizes[d] == 1 && b.sizes[d] == 1 && out_sizes[d] > 1) {
      Shape full(out_sizes.begin(), out_sizes.end() - 2);
      full.push_back(a.rows());
      full.push_back(a.cols());
      Shape st = a.strides;
      for (size_t i = 0; i + 2 < nd; ++i)
        if (a.sizes[i] == 1) st[i] = 0;
      a.sizes = full;
      a.strides = st;
      materialize(a);
      break;
    }
  }
  prepare_blas_operand(a);
  prepare_blas_operand(b);
  std::shared_ptr<const MatmulPrimitive> p;
  try {
    p = matmul_primitive(dt, a, b, out_sizes, bias.defined(), accumulate);
  } catch (const dnnl::error&) {
    // A layout oneDNN rejects (e.g. overlapping batch strides): contiguous copies always work.
    materialize(a);
    materialize(b);
    normalize_strides(a);
    normalize_strides(b);
    try {
      p = matmul_primitive(dt, a, b, out_sizes, bias.defined(), accumulate);
    } catch (const dnnl::error& e) {
      if (dt != kFloat32) return false;
      GRAFT_ERROR("matmul: oneDNN failed for shapes ", shape_str(a.sizes), " and ", shape_str(b.sizes), ": ", e.what());
    }
  }
  std::unordered_map<int, dnnl::memory> args{
      {DNNL_ARG_SRC, du::make_memory(p->a_md, a.t.data_ptr())},
      {DNNL_ARG_WEIGHTS, du::make_memory(p->b_md, b.t.data_ptr())},
      {DNNL_ARG_DST, du::make_memory(p->out_md, out)}};
  if (bias.defined()) args.emplace(DNNL_ARG_BIAS, du::make_memory(p->bias_md, bias.data_ptr()));
  du::execute(*p, std::move(args));
  return true;
}

// The float32 copy (contiguous) of what a 16-bit operand describes.
void to_float_operand(MatOperand& op) {
  Tensor view(std::make_shared<TensorImpl>(op.t.impl()->storage(), op.t.dtype(), op.sizes, op.strides,
                                           op.t.storage_offset()));
  op.t = contiguous_as(view, kFloat32);
  op.strides = op.t.strides();
}

// The float path's copies of the larger operand and of the result are made a tile at a time (rows
// of a and of out, or columns of b and of out) once they pass kFloatTileValues float32 values
// (4 MiB); the smaller operand is converted whole. Whole float32 twins of a large product would sit
// on top of its 16-bit result (a [8192, 4096] x [4096, 4096] linear: 256 MiB). Smaller tiles cost
// speed: at 256 KiB the ViT's and MLP's products ran 1.3-2x slower (more, smaller oneDNN calls), so
// the budget bounds large products only; at least kMinFloatTile rows or columns per tile.
constexpr int64_t kFloatTileValues = int64_t{1} << 20, kMinFloatTile = 64;

// op's rows (dim -2) or columns (dim -1) [start, start + len), as a view of the same storage.
MatOperand narrow_operand(const MatOperand& op, bool rows, int64_t start, int64_t len) {
  MatOperand r = op;
  const size_t d = op.sizes.size() - (rows ? 2 : 1);
  r.sizes[d] = len;
  r.t = Tensor(std::make_shared<TensorImpl>(op.t.impl()->storage(), op.t.dtype(), r.sizes, r.strides,
                                            op.t.storage_offset() + start * op.strides[d]));
  return r;
}

// A bfloat16/float16 product computed in float32 and rounded once into `out` (see the header).
void matmul_via_float(MatOperand a, MatOperand b, const Shape& out_sizes, const Tensor& out, const Tensor& bias,
                      bool accumulate) {
  const size_t nd = out_sizes.size();
  const int64_t n = out_sizes[nd - 2], m = out_sizes[nd - 1], k = a.cols();
  const bool by_rows = shape_numel(a.sizes) >= shape_numel(b.sizes);  // tile the larger operand
  const int64_t span = by_rows ? n : m;
  const int64_t tile = std::max(kMinFloatTile, kFloatTileValues / std::max<int64_t>(1, by_rows ? k + m : k + n));
  Tensor fbias = bias.defined() ? contiguous_as(bias, kFloat32) : Tensor();
  if (tile >= span || shape_numel(out_sizes) != n * m) {  // small, or batched: whole
    to_float_operand(a);
    to_float_operand(b);
    Tensor fout = accumulate ? contiguous_as(out, kFloat32) : new_tensor(out.sizes(), kFloat32, out.device());
    matmul_dnnl(kFloat32, std::move(a), std::move(b), out_sizes, fout.data_ptr(), fbias, accumulate);
    device_copy(out, fout);
    return;
  }
  to_float_operand(by_rows ? b : a);
  // out in out_sizes (it is contiguous; a matrix-vector product's out has fewer dims).
  const Tensor out_view(std::make_shared<TensorImpl>(out.impl()->storage(), out.dtype(), out_sizes,
                                                     contiguous_strides(out_sizes), out.storage_offset()));
  for (int64_t s0 = 0; s0 < span; s0 += tile) {
    const int64_t len = std::min(tile, span - s0);
    MatOperand part = narrow_operand(by_rows ? a : b, by_rows, s0, len);
    to_float_operand(part);
    Shape part_sizes = out_sizes;
    part_sizes[by_rows ? nd - 2 : nd - 1] = len;
    Tensor o = out_view.narrow(static_cast<int64_t>(by_rows ? nd - 2 : nd - 1), s0, len);
    Tensor fo = accumulate ? contiguous_as(o, kFloat32) : new_tensor(part_sizes, kFloat32, out.device());
    Tensor fb = fbias.defined() && !by_rows ? fbias.narrow(fbias.dim() - 1, s0, len) : fbias;
    if (by_rows) matmul_dnnl(kFloat32, std::move(part), b, part_sizes, fo.data_ptr(), fb, accumulate);
    else matmul_dnnl(kFloat32, a, std::move(part), part_sizes, fo.data_ptr(), fb, accumulate);
    device_copy(o, fo);
  }
}

// ---- float32, a few rows: dot products ----
//
// A decode step's linear ([1, 128] x W^T [128, 384] in the GPT) is about 50K multiply-adds, less
// work than a oneDNN call's own cost (primitive lookup, memory objects, execute: 10-25 us here,
// against 1-3 us of arithmetic). Products of at most kSmallRows rows and kSmallMacs multiply-adds
// run here instead, on the calling thread unless a thread's share is worth the pool (below). The
// sums use 16 lanes of a fixed order in every clone, so the AVX-512, AVX2 and generic copies give
// the same bits.
constexpr int64_t kSmallRows = 4, kSmallMacs = int64_t{1} << 18;

using vec_math::f32x16;
using vec_math::lane_sum;
using vec_math::load;

// C[i, j] (+)= bias[j] + sum_kk A[i, kk] B[kk, j] for i < rows, j < m, with A's rows and B's
// columns contiguous (A[i, kk] = a[i lda + kk], B[kk, j] = b[j ldb + kk]: linear's weight as it is).
// Four columns at a time: four independent multiply-add chains share each load of A's row.
GRAFT_VECTOR_CLONES void small_rows_dot_f32(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                                            int64_t ldc, int64_t rows, int64_t k, int64_t m, const float* bias,
                                            bool accumulate) {
  const int64_t kv = k / 16 * 16;
  auto finish = [&](int64_t i, int64_t j, f32x16 acc, const float* ai, const float* bj) {
    float sum = lane_sum(acc);
    for (int64_t kk = kv; kk < k; ++kk) sum += ai[kk] * bj[kk];
    float& out = c[i * ldc + j];
    out = (accumulate ? out : (bias ? bias[j] : 0.0f)) + sum;
  };
  for (int64_t i = 0; i < rows; ++i) {
    const float* ai = a + i * lda;
    int64_t j = 0;
    for (; j + 4 <= m; j += 4) {
      const float *b0 = b + j * ldb, *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
      f32x16 s0 = {}, s1 = {}, s2 = {}, s3 = {};
      for (int64_t kk = 0; kk < kv; kk += 16) {
        const f32x16 x = load(ai + kk);
        s0 += x * load(b0 + kk);
        s1 += x * load(b1 + kk);
        s2 += x * load(b2 + kk);
        s3 += x * load(b3 + kk);
      }
      finish(i, j, s0, ai, b0);
      finish(i, j + 1, s1, ai, b1);
      finish(i, j + 2, s2, ai, b2);
      finish(i, j + 3, s3, ai, b3);
    }
    for (; j < m; ++j) {
      const float* bj = b + j * ldb;
      f32x16 s = {};
      for (int64_t kk = 0; kk < kv; kk += 16) s += load(ai + kk) * load(bj + kk);
      finish(i, j, s, ai, bj);
    }
  }
}

// The same with B's rows contiguous (B[kk, j] = b[kk ldb + j]: a plain x @ W): each row of C is a
// sum of B's rows scaled by A[i, kk], in kk order.
GRAFT_VECTOR_CLONES void small_rows_axpy_f32(const float* a, int64_t sar, int64_t sac, const float* b, int64_t ldb,
                                             float* c, int64_t rows, int64_t k, int64_t m, const float* bias,
                                             bool accumulate) {
  for (int64_t i = 0; i < rows; ++i) {
    float* ci = c + i * m;
    if (!accumulate) {
      if (bias) std::memcpy(ci, bias, sizeof(float) * static_cast<size_t>(m));
      else std::memset(ci, 0, sizeof(float) * static_cast<size_t>(m));
    }
    for (int64_t kk = 0; kk < k; ++kk) {
      const float x = a[i * sar + kk * sac];
      const float* bk = b + kk * ldb;
      for (int64_t j = 0; j < m; ++j) ci[j] += x * bk[j];
    }
  }
}

// Runs the product here when it is small and 2-D with a layout above; false otherwise.
bool small_rows_f32(const MatOperand& a, const MatOperand& b, const Shape& out_sizes, const Tensor& out,
                    const Tensor& bias, bool accumulate) {
  if (out_sizes.size() != 2 || a.sizes.size() != 2 || b.sizes.size() != 2) return false;
  const int64_t rows = a.rows(), k = a.cols(), m = b.cols();
  if (rows > kSmallRows || rows * k * m > kSmallMacs) return false;
  const auto* ap = static_cast<const float*>(a.t.data_ptr());
  const auto* bp = static_cast<const float*>(b.t.data_ptr());
  auto* cp = static_cast<float*>(out.data_ptr());
  const float* biasp = bias.defined() ? static_cast<const float*>(bias.data_ptr()) : nullptr;
  if (b.row_stride() == 1 && (a.col_stride() == 1 || k == 1)) {
    // Split by columns over the threads once a share (kGrainSize multiply-adds) is worth waking
    // them. The weights then stream from two cores' caches: a decode step's 16 linears read 3.1 MB of
    // weights, more than one core's L2, so on one thread they came from L3 (124 us a token, 62 us
    // split). Each column's sum is the same code on any thread: the same bits.
    parallel_for(0, (m + 3) / 4, grain_for(4 * rows * k), [&](int64_t q0, int64_t q1) {
      const int64_t j0 = q0 * 4, j1 = std::min(m, q1 * 4);
      small_rows_dot_f32(ap, a.row_stride(), bp + j0 * b.col_stride(), b.col_stride(), cp + j0, m, rows, k, j1 - j0,
                         biasp ? biasp + j0 : nullptr, accumulate);
    });
    return true;
  }
  if (b.col_stride() == 1) {
    small_rows_axpy_f32(ap, a.row_stride(), a.col_stride(), bp, b.row_stride(), cp, rows, k, m, biasp, accumulate);
    return true;
  }
  return false;
}

// ---- float64 / int64: blocked loops ----

// Rows per task so that a task does at least ~64K multiply-adds.
int64_t row_grain(int64_t k, int64_t m) { return std::max<int64_t>(1, 65536 / std::max<int64_t>(1, k * m)); }

// out rows [r0, r1) of one batch: C[i, :] = bias + sum_kk A[i, kk] * B[kk, :].
// B rows are contiguous (stride 1 along m). Blocked over columns and k so the B panel and the
// C rows being updated stay in cache while every row of the block streams over them.
template <class T>
void gemm_rows(const T* A, int64_t sar, int64_t sac, const T* B, int64_t sbr, T* C, int64_t r0, int64_t r1,
               int64_t k, int64_t m, const T* bias, bool accumulate) {
  constexpr int64_t kRowBlock = 8, kColBlock = 256, kDepthBlock = 128;
  for (int64_t i = r0; i < r1 && !accumulate; ++i) {
    T* c = C + i * m;
    if (bias)
      std::memcpy(c, bias, sizeof(T) * static_cast<size_t>(m));
    else
      std::fill(c, c + m, T(0));
  }
  for (int64_t ib = r0; ib < r1; ib += kRowBlock) {
    int64_t ie = std::min(r1, ib + kRowBlock);
    for (int64_t jb = 0; jb < m; jb += kColBlock) {
      int64_t jn = std::min(m, jb + kColBlock) - jb;
      for (int64_t kb = 0; kb < k; kb += kDepthBlock) {
        int64_t ke = std::min(k, kb + kDepthBlock);
        for (int64_t i = ib; i < ie; ++i) {
          T* __restrict c = C + i * m + jb;
          const T* arow = A + i * sar;
          for (int64_t kk = kb; kk < ke; ++kk) {
            T av = arow[kk * sac];
            const T* __restrict brow = B + kk * sbr + jb;
            for (int64_t j = 0; j < jn; ++j) c[j] += av * brow[j];
          }
        }
      }
    }
  }
}

template <class T>
void matmul_loops(MatOperand a, MatOperand b, const Shape& out_sizes, T* out, const Tensor& bias, bool accumulate) {
  // The inner loop walks B along m: give it unit stride (a copy of b only, never of a).
  if (b.strides.back() != 1 && b.cols() > 1) materialize(b);
  size_t nd = out_sizes.size();
  int64_t n = out_sizes[nd - 2], m = out_sizes[nd - 1], k = a.cols();
  Shape batch(out_sizes.begin(), out_sizes.end() - 2);
  int64_t nbatch = shape_numel(batch);
  // Element offsets of each batch's matrices (0 stride where a side is broadcast).
  std::vector<int64_t> off_a(static_cast<size_t>(nbatch)), off_b(static_cast<size_t>(nbatch));
  {
    Shape sa(batch.size()), sb(batch.size());
    for (size_t d = 0; d < batch.size(); ++d) {
      sa[d] = a.sizes[d] == 1 ? 0 : a.strides[d];
      sb[d] = b.sizes[d] == 1 ? 0 : b.strides[d];
    }
    int64_t i = 0;
    for_each_offset2(batch, sa, sb, [&](int64_t oa, int64_t ob) {
      off_a[static_cast<size_t>(i)] = oa;
      off_b[static_cast<size_t>(i++)] = ob;
    });
  }
  const T* A = static_cast<const T*>(a.t.data_ptr());
  const T* B = static_cast<const T*>(b.t.data_ptr());
  const T* bias_p = bias.defined() ? static_cast<const T*>(bias.data_ptr()) : nullptr;
  int64_t sar = a.strides[nd - 2], sac = a.strides[nd - 1], sbr = b.strides[nd - 2];
  parallel_for(0, nbatch * n, row_grain(k, m), [&](int64_t r0, int64_t r1) {
    while (r0 < r1) {
      int64_t bi = r0 / n, i0 = r0 % n, i1 = std::min(n, i0 + (r1 - r0));
      gemm_rows<T>(A + off_a[static_cast<size_t>(bi)], sar, sac, B + off_b[static_cast<size_t>(bi)], sbr,
                   out + bi * n * m, i0, i1, k, m, bias_p, accumulate);
      r0 += i1 - i0;
    }
  });
}

// out (contiguous, `out_sizes` = batch + [n, m]) = a @ b (+ bias), or out += a @ b when `accumulate`.
// a, b have out's rank.
void matmul_core(MatOperand a, MatOperand b, const Shape& out_sizes, const Tensor& out, const Tensor& bias,
                 bool accumulate) {
  if (out.numel() == 0) return;
  unexpand_batch(a);
  unexpand_batch(b);
  if (a.cols() == 0) {
    if (accumulate) return;  // adding an empty sum
    // An empty sum: zeros, or the bias broadcast over rows.
    if (bias.defined()) {
      dispatch_all_dtypes(out.dtype(), "matmul", [&]<class T>() {  // copies only: every dtype
        T* o = static_cast<T*>(out.data_ptr());
        const T* bp = static_cast<const T*>(bias.data_ptr());
        int64_t m = out_sizes.back();
        for (int64_t i = 0; i < out.numel(); ++i) o[i] = bp[i % m];
      });
    } else {
      fill_cpu(out, 0);
    }
    return;
  }
  switch (out.dtype()) {
    case DType::Float32:
      if (!small_rows_f32(a, b, out_sizes, out, bias, accumulate))
        matmul_dnnl(kFloat32, std::move(a), std::move(b), out_sizes, out.data_ptr(), bias, accumulate);
      break;
    case DType::BFloat16:
      // matmul_dnnl takes a and b by value (Tensor handles and small shapes), so the float path
      // still has the caller's operands when oneDNN turns bf16 down.
      if (!du::use_bf16_primitives() || !matmul_dnnl(kBFloat16, a, b, out_sizes, out.data_ptr(), bias, accumulate))
        matmul_via_float(std::move(a), std::move(b), out_sizes, out, bias, accumulate);
      break;
    case DType::Float16: matmul_via_float(std::move(a), std::move(b), out_sizes, out, bias, accumulate); break;
    case DType::Float64: matmul_loops<double>(std::move(a), std::move(b), out_sizes, static_cast<double*>(out.data_ptr()), bias, accumulate); break;
    case DType::Int64: matmul_loops<int64_t>(std::move(a), std::move(b), out_sizes, static_cast<int64_t*>(out.data_ptr()), bias, accumulate); break;
    default: GRAFT_ERROR("matmul: unsupported dtype ", out.dtype());
  }
}

Tensor contiguous_undispatched(const Tensor& t) { return contiguous_cpu(t); }

}  // namespace

// The CPU's part of the shared matmul kernels (ops/matmul_plan.h); the kernels themselves are
// generated from codegen/ops/linalg.yaml's `shared:` lines.
const MatmulBackend kCpuMatmul{matmul_core, contiguous_undispatched};

}  // namespace kernels

}  // namespace graft
