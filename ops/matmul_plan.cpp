#include "ops/matmul_plan.h"

#include <algorithm>
#include <memory>
#include <optional>

#include "ops/kernel_utils.h"

namespace graft::kernels {

void materialize(MatOperand& op) {
  Tensor view(std::make_shared<TensorImpl>(op.t.impl()->storage(), op.t.dtype(), op.sizes, op.strides,
                                           op.t.storage_offset()));
  op.t = contiguous_as(view);
  op.strides = op.t.strides();
}

void normalize_strides(MatOperand& op) {
  size_t nd = op.sizes.size();
  int64_t &sr = op.strides[nd - 2], &sc = op.strides[nd - 1];
  int64_t r = op.sizes[nd - 2], c = op.sizes[nd - 1];
  if (r == 1 && c == 1) {
    sr = 1;
    sc = 1;
  } else if (r == 1) {
    sr = sc == 1 ? c : 1;
  } else if (c == 1) {
    sc = sr == 1 ? r : 1;
  }
  // Extent (in elements) of everything inside dim d, so a size-1 dim can take it as its stride.
  int64_t span = (r - 1) * sr + (c - 1) * sc + 1;
  for (size_t d = nd - 2; d-- > 0;) {
    if (op.sizes[d] == 1) op.strides[d] = span;
    span = std::max(span, (op.sizes[d] - 1) * op.strides[d] + span);
  }
}

void prepare_blas_operand(MatOperand& op) {
  normalize_strides(op);
  if (!row_major(op) && !col_major(op)) {
    materialize(op);
    normalize_strides(op);
  }
}

void pad_to(MatOperand& op, size_t ndim) {
  size_t extra = ndim - op.sizes.size();
  op.sizes.insert(op.sizes.begin(), extra, 1);
  op.strides.insert(op.strides.begin(), extra, 0);
}

void unexpand_batch(MatOperand& op) {
  for (size_t d = 0; d + 2 < op.sizes.size(); ++d)
    if (op.strides[d] == 0) op.sizes[d] = 1;
}

namespace {

void check_operands(const Tensor& a, const Tensor& b, const char* op) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
  GRAFT_CHECK(a.dtype() == b.dtype(), op, ": expected m1 and m2 to have the same dtype, but got: ", a.dtype(),
              " != ", b.dtype(), " (", describe(a), " and ", describe(b), ")");
  GRAFT_CHECK(a.dtype() != kBool, op, ": not implemented for bool tensors (", describe(a), " and ", describe(b), ")");
}

[[noreturn]] void throw_cannot_multiply(const char* op, const Tensor& a, const Tensor& b, int64_t ka, int64_t kb) {
  GRAFT_ERROR(op, ": shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()), " cannot be multiplied (", ka,
              " != ", kb, ")");
}

MatOperand operand(const Tensor& t) { return MatOperand{t, t.sizes(), t.strides()}; }

// The one stride that walks dims [0, n) of a strided shape as consecutive rows of a matrix, if
// there is one: size-1 dims are skipped, and an expanded dim (stride 0) repeats rows, so it has
// none. 0 when the dims hold at most one row.
std::optional<int64_t> fold_stride(const Shape& sizes, const Shape& strides, size_t n) {
  int64_t row_stride = 0, expected = -1;
  for (size_t d = n; d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (strides[d] == 0) return std::nullopt;
    if (expected < 0)
      row_stride = strides[d];
    else if (strides[d] != expected)
      return std::nullopt;
    expected = strides[d] * sizes[d];
  }
  return row_stride;
}

}  // namespace

// ---- the ops ----

// [n, k] x [k, m] -> [n, m]
Tensor mm_with(const MatmulBackend& be, const Tensor& a, const Tensor& b) {
  check_operands(a, b, "mm");
  GRAFT_CHECK(a.dim() == 2 && b.dim() == 2, "mm: expected 2-D tensors, got ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  if (a.size(1) != b.size(0)) throw_cannot_multiply("mm", a, b, a.size(1), b.size(0));
  Shape out_sizes{a.size(0), b.size(1)};
  Tensor out = new_tensor(out_sizes, a.dtype(), a.device());
  be.core(operand(a), operand(b), out_sizes, out, Tensor(), false);
  return out;
}

// self [n, m] += a [n, k] @ b [k, m]. For a backward that adds a weight's gradient straight into
// its .grad, so the [n, m] product never exists as a temporary.
Tensor mm_accumulate_with(const MatmulBackend& be, const Tensor& self, const Tensor& a, const Tensor& b) {
  check_defined(self, "mm_accumulate_", "self");
  check_operands(a, b, "mm_accumulate_");
  GRAFT_CHECK(a.dim() == 2 && b.dim() == 2, "mm_accumulate_: expected 2-D tensors, got ", shape_str(a.sizes()),
              " and ", shape_str(b.sizes()));
  if (a.size(1) != b.size(0)) throw_cannot_multiply("mm_accumulate_", a, b, a.size(1), b.size(0));
  Shape out_sizes{a.size(0), b.size(1)};
  GRAFT_CHECK(self.sizes() == out_sizes && self.dtype() == a.dtype() && self.is_contiguous(),
              "mm_accumulate_: self must be a contiguous ", a.dtype(), " tensor of shape ", shape_str(out_sizes),
              ", got ", describe(self));
  GRAFT_CHECK(!self.is_alias_of(a) && !self.is_alias_of(b),
              "mm_accumulate_: self must not share memory with the operands (", describe(self), ")");
  be.core(operand(a), operand(b), out_sizes, self, Tensor(), /*accumulate=*/true);
  return self;
}

// [B, n, k] x [B, k, m] -> [B, n, m]
Tensor bmm_with(const MatmulBackend& be, const Tensor& a, const Tensor& b) {
  check_operands(a, b, "bmm");
  GRAFT_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, got ", shape_str(a.sizes()), " and ",
              shape_str(b.sizes()));
  GRAFT_CHECK(a.size(0) == b.size(0), "bmm: shapes ", shape_str(a.sizes()), " and ", shape_str(b.sizes()),
              " have different batch sizes (", a.size(0), " != ", b.size(0), ")");
  if (a.size(2) != b.size(1)) throw_cannot_multiply("bmm", a, b, a.size(2), b.size(1));
  Shape out_sizes{a.size(0), a.size(1), b.size(2)};
  Tensor out = new_tensor(out_sizes, a.dtype(), a.device());
  be.core(operand(a), operand(b), out_sizes, out, Tensor(), false);
  return out;
}

// torch.matmul: 1-D x 1-D is a dot product; a 1-D left operand gets a leading 1 (removed from
// the result), a 1-D right operand a trailing 1 (removed); batch dims broadcast.
Tensor matmul_with(const MatmulBackend& be, const Tensor& a, const Tensor& b) {
  check_operands(a, b, "matmul");
  GRAFT_CHECK(a.dim() >= 1 && b.dim() >= 1, "matmul: both arguments need to be at least 1-D, but got ",
              shape_str(a.sizes()), " and ", shape_str(b.sizes()));
  MatOperand oa = operand(a), ob = operand(b);
  if (a.dim() == 1) {
    oa.sizes = {1, a.size(0)};
    oa.strides = {a.size(0) * a.stride(0), a.stride(0)};
  }
  if (b.dim() == 1) {
    ob.sizes = {b.size(0), 1};
    ob.strides = {b.stride(0), 1};
  }
  int64_t ka = oa.cols(), kb = ob.rows();
  if (ka != kb) throw_cannot_multiply("matmul", a, b, ka, kb);
  // Broadcast the batch dims (everything before the last two).
  size_t ba = oa.sizes.size() - 2, bb = ob.sizes.size() - 2, nb = std::max(ba, bb);
  Shape core(nb + 2);
  for (size_t i = 0; i < nb; ++i) {
    int64_t sa = i < nb - ba ? 1 : oa.sizes[i - (nb - ba)];
    int64_t sb = i < nb - bb ? 1 : ob.sizes[i - (nb - bb)];
    GRAFT_CHECK(sa == sb || sa == 1 || sb == 1, "matmul: shapes ", shape_str(a.sizes()), " and ",
                shape_str(b.sizes()), " cannot be multiplied: batch dimensions do not broadcast (", sa, " != ", sb,
                " at batch dimension ", i, ")");
    core[i] = sa == 1 ? sb : sa;
  }
  core[nb] = oa.rows();
  core[nb + 1] = ob.cols();
  Shape result(core.begin(), core.begin() + static_cast<std::ptrdiff_t>(nb));
  if (a.dim() > 1) result.push_back(core[nb]);
  if (b.dim() > 1) result.push_back(core[nb + 1]);
  pad_to(oa, nb + 2);
  pad_to(ob, nb + 2);
  // The result has the core's elements in the same order, so the core writes it directly.
  Tensor out = new_tensor(result, a.dtype(), a.device());
  // A batch of matrices against one matrix (linear's input gradient, [N, L, out] @ [out, in]): one
  // [batch * n, k] @ [k, m] product, as PyTorch folds it, when a's batch and rows walk with one
  // stride. Batched, oneDNN's bf16 matmul runs a small product per batch, 3x slower here.
  const bool b_shared = std::all_of(ob.sizes.begin(), ob.sizes.end() - 2, [](int64_t s) { return s == 1; });
  if (nb > 0 && b_shared) {
    if (std::optional<int64_t> rs = fold_stride(oa.sizes, oa.strides, nb + 1)) {
      const int64_t rows = shape_numel(Shape(core.begin(), core.end() - 1)), k = oa.cols();
      MatOperand fa{oa.t, {rows, k}, {*rs == 0 ? k : *rs, oa.col_stride()}};
      MatOperand fb{ob.t, {k, ob.cols()}, {ob.row_stride(), ob.col_stride()}};
      be.core(std::move(fa), std::move(fb), {rows, ob.cols()}, out, Tensor(), false);
      return out;
    }
  }
  be.core(std::move(oa), std::move(ob), core, out, Tensor(), false);
  return out;
}

// x [*, in] @ w[out, in]^T + b[out] -> [*, out]
Tensor linear_with(const MatmulBackend& be, const Tensor& x, const Tensor& w, const Tensor& bias) {
  check_defined(x, "linear", "input");
  check_defined(w, "linear", "weight");
  GRAFT_CHECK(x.dtype() == w.dtype(), "linear: expected m1 and m2 to have the same dtype, but got: ", x.dtype(),
              " != ", w.dtype(), " (input ", describe(x), ", weight ", describe(w), ")");
  GRAFT_CHECK(x.dtype() != kBool, "linear: not implemented for bool tensors (", describe(x), ")");
  GRAFT_CHECK(w.dim() == 2, "linear: expected a 2-D weight [out_features, in_features], got ", shape_str(w.sizes()));
  GRAFT_CHECK(x.dim() >= 1, "linear: expected an input with at least 1 dim, got ", shape_str(x.sizes()));
  int64_t in = x.size(-1), nout = w.size(0);
  GRAFT_CHECK(in == w.size(1), "linear: input ", shape_str(x.sizes()), " and weight ", shape_str(w.sizes()),
              " cannot be multiplied (", in, " != ", w.size(1), ")");
  Tensor bc;
  if (bias.defined()) {
    GRAFT_CHECK(bias.dtype() == x.dtype(), "linear: expected bias of dtype ", x.dtype(), ", got ", describe(bias));
    GRAFT_CHECK(bias.dim() == 1 && bias.size(0) == nout, "linear: expected bias of shape [", nout, "], got ",
                shape_str(bias.sizes()));
    bc = be.contiguous(bias);
  }
  // Fold x's leading dims into rows when one stride walks them all (always for contiguous x).
  Shape lead(x.sizes().begin(), x.sizes().end() - 1);
  int64_t rows = shape_numel(lead);
  MatOperand ox{x, {rows, in}, {in, x.stride(-1)}};
  if (std::optional<int64_t> rs = fold_stride(x.sizes(), x.strides(), lead.size()))
    ox.strides[0] = *rs == 0 ? in : *rs;  // 0 only when there is at most one row
  else if (rows > 0)
    ox = MatOperand{be.contiguous(x), {rows, in}, {in, 1}};
  Shape out_sizes = lead;
  out_sizes.push_back(nout);
  Tensor out = new_tensor(out_sizes, x.dtype(), x.device());
  MatOperand ow{w, {in, nout}, {w.stride(1), w.stride(0)}};  // w^T, no copy
  be.core(std::move(ox), std::move(ow), {rows, nout}, out, bc, false);
  return out;
}

}  // namespace graft::kernels
