#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <thread>

#include "graft.h"
#include "support/check_close.h"
#include "ops/dnnl_utils.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;

namespace {

// Every element of `t` as double, read in row-major order through its strides.
std::vector<double> values(const Tensor& t) { return ops::to_dtype(t, kFloat64).to_vector<double>(); }

// Naive reference: a [B, n, k] x b [B, k, m] (flattened values, already broadcast) in double.
std::vector<double> ref_bmm(const std::vector<double>& a, const std::vector<double>& b, int64_t B, int64_t n,
                            int64_t k, int64_t m) {
  std::vector<double> out(static_cast<size_t>(B * n * m), 0.0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < m; ++j) {
        double s = 0;
        for (int64_t kk = 0; kk < k; ++kk) s += a[bi * n * k + i * k + kk] * b[bi * k * m + kk * m + j];
        out[bi * n * m + i * m + j] = s;
      }
  return out;
}

Tensor randn64(const Shape& s) { return randn(s, dtype(kFloat64)); }

}  // namespace

TEST_CASE("mm matches a naive triple loop in float32, float64 and int64") {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor a = randn({5, 7}, dtype(dt)), b = randn({7, 3}, dtype(dt));
    Tensor c = ops::mm(a, b);
    CHECK(c.dtype() == dt);
    CHECK(c.sizes() == Shape{5, 3});
    check_close(c, ref_bmm(values(a), values(b), 1, 5, 7, 3), Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12));
  }
  Tensor ai = randint(-5, 5, {4, 6}), bi = randint(-5, 5, {6, 2});
  Tensor ci = ops::mm(ai, bi);
  CHECK(ci.dtype() == kInt64);
  std::vector<double> want = ref_bmm(values(ai), values(bi), 1, 4, 6, 2);
  std::vector<int64_t> got = ci.to_vector<int64_t>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == static_cast<int64_t>(want[i]));
}

TEST_CASE("mm reads transposed and sliced operands in place with the right values") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12);
    Tensor at = randn({7, 5}, dtype(dt)).t(), bt = randn({3, 7}, dtype(dt)).t();  // [5,7], [7,3]
    CHECK_FALSE(at.is_contiguous());
    check_close(ops::mm(at, bt), ref_bmm(values(at), values(bt), 1, 5, 7, 3), tol);
    // Every other row and column: neither unit stride matches a dense layout.
    Tensor as = randn({10, 14}, dtype(dt)).slice(0, 0, 10, 2).slice(1, 0, 14, 2);  // [5, 7]
    Tensor bs = randn({7, 6}, dtype(dt)).slice(1, 1, 6, 2);                          // [7, 3]
    check_close(ops::mm(as, bs), ref_bmm(values(as), values(bs), 1, 5, 7, 3), tol);
    // A row slice keeps unit column stride but a larger leading dimension.
    Tensor ar = randn({5, 9}, dtype(dt)).slice(1, 1, 8);  // [5, 7]
    check_close(ops::mm(ar, bt), ref_bmm(values(ar), values(bt), 1, 5, 7, 3), tol);
    // Expanded matrices: every row (or column) is the same memory.
    Tensor ae = ops::expand(randn({1, 7}, dtype(dt)), {5, 7}), be = ops::expand(randn({7, 1}, dtype(dt)), {7, 3});
    check_close(ops::mm(ae, be), ref_bmm(values(ae), values(be), 1, 5, 7, 3), tol);
    // Row and column vectors.
    Tensor row = randn({1, 7}, dtype(dt)), col = randn({7, 1}, dtype(dt));
    check_close(ops::mm(row, col), ref_bmm(values(row), values(col), 1, 1, 7, 1), tol);
    check_close(ops::mm(col, row), ref_bmm(values(col), values(row), 1, 7, 1, 7), tol);
  }
}

TEST_CASE("mm of sizes larger than the loop blocks is exact in float64 and close in float32") {
  // 300 columns and 150 depth cross the 256-column and 128-depth blocks; 70 rows split over threads.
  Tensor a = randn64({70, 150}), b = randn64({150, 300});
  std::vector<double> want = ref_bmm(values(a), values(b), 1, 70, 150, 300);
  check_close(ops::mm(a, b), want, Tolerance::within(1e-11));
  check_close(ops::mm(a.t().contiguous().t(), b), want, Tolerance::within(1e-11));
  check_close(ops::mm(ops::to_dtype(a, kFloat32), ops::to_dtype(b, kFloat32)), want, Tolerance::within(1e-3));
}

TEST_CASE("bmm multiplies each batch and accepts permuted batch layouts") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12);
    Tensor a = randn({3, 4, 5}, dtype(dt)), b = randn({3, 5, 2}, dtype(dt));
    Tensor c = ops::bmm(a, b);
    CHECK(c.sizes() == Shape{3, 4, 2});
    check_close(c, ref_bmm(values(a), values(b), 3, 4, 5, 2), tol);
    // Batch dim in the middle of memory, and transposed matrices.
    Tensor ap = randn({4, 3, 5}, dtype(dt)).permute({1, 0, 2});
    Tensor bp = randn({2, 5, 3}, dtype(dt)).permute({2, 1, 0});
    check_close(ops::bmm(ap, bp), ref_bmm(values(ap), values(bp), 3, 4, 5, 2), tol);
  }
}

TEST_CASE("matmul handles 1-D operands as torch.matmul does") {
  Tensor v = tensor({1, 2, 3}), w = tensor({4, 5, 6});
  Tensor dot = ops::matmul(v, w);
  CHECK(dot.dim() == 0);
  CHECK(dot.item<float>() == 32.0f);
  Tensor m = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor mv = ops::matmul(m, v);
  CHECK(mv.sizes() == Shape{2});
  CHECK(mv.to_vector<float>() == std::vector<float>{14, 32});
  Tensor vm = ops::matmul(tensor({1, 2}), m);
  CHECK(vm.sizes() == Shape{3});
  CHECK(vm.to_vector<float>() == std::vector<float>{9, 12, 15});
  // 1-D with batched: the 1 is prepended/appended, then removed.
  Tensor bm = randn64({4, 3, 2});
  Tensor v64 = randn64({3});
  Tensor vb = ops::matmul(v64, bm);
  CHECK(vb.sizes() == Shape{4, 2});
  std::vector<double> vv = values(v64), bv = values(bm), want;
  for (int b = 0; b < 4; ++b)
    for (int j = 0; j < 2; ++j) {
      double s = 0;
      for (int k = 0; k < 3; ++k) s += vv[k] * bv[b * 6 + k * 2 + j];
      want.push_back(s);
    }
  check_close(vb, want, Tolerance::within(1e-12));
  Tensor bv2 = ops::matmul(randn64({4, 2, 3}), v64);
  CHECK(bv2.sizes() == Shape{4, 2});
  // A strided 1-D operand (every other element).
  Tensor vs = randn({6}).slice(0, 0, 6, 2);
  check_close(ops::matmul(vs, tensor({1, 1, 1})), {values(vs)[0] + values(vs)[1] + values(vs)[2]},
              Tolerance::within(1e-5));
}

TEST_CASE("matmul broadcasts batch dimensions like [2,1,3,4] x [5,4,2] -> [2,5,3,2]") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12);
    Tensor a = randn({2, 1, 3, 4}, dtype(dt)), b = randn({5, 4, 2}, dtype(dt));
    Tensor c = ops::matmul(a, b);
    CHECK(c.sizes() == Shape{2, 5, 3, 2});
    Tensor ae = ops::expand(a, {2, 5, 3, 4}), be = ops::expand(b, {2, 5, 4, 2});
    check_close(c, ref_bmm(values(ae), values(be), 10, 3, 4, 2), tol);
    // 2-D times batched: the matrix is reused for every batch.
    Tensor m = randn({3, 4}, dtype(dt));
    Tensor mb = ops::matmul(m, b);
    CHECK(mb.sizes() == Shape{5, 3, 2});
    check_close(mb, ref_bmm(values(ops::expand(m, {5, 3, 4})), values(b), 5, 3, 4, 2), tol);
  }
}

TEST_CASE("matmul folds a batch against one matrix into one product only where one stride walks the rows") {
  // [*, n, k] @ [k, m] (linear's input gradient) runs as one [* n, k] @ [k, m] product when a's
  // batch and rows are one strided run; otherwise batched. Both must give the batched values.
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    INFO("dtype " << dt);
    const Tolerance tol = Tolerance::within(dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 2e-2);
    Tensor b = randn({6, 2}, dtype(dt)), bt = randn({2, 6}, dtype(dt)).t(), b1 = randn({1, 6, 2}, dtype(dt));
    std::vector<std::pair<const char*, Tensor>> lhs{
        {"contiguous [4, 5, 3, 6]", randn({4, 5, 3, 6}, dtype(dt))},
        {"every other row (row stride 12, batch stride 36)", ops::slice(randn({4, 6, 6}, dtype(dt)), 1, 0, 6, 2)},
        {"batch dims permuted (no single stride)", randn({3, 4, 6}, dtype(dt)).transpose(0, 1)},
        {"an expanded batch (stride 0)", ops::expand(randn({1, 3, 6}, dtype(dt)), {5, 3, 6})},
        {"column-major matrices", randn({4, 6, 3}, dtype(dt)).transpose(1, 2)}};
    for (auto& [what, a] : lhs) {
      INFO(what);
      const int64_t n = a.size(-2), B = a.numel() / (n * 6);
      Tensor af = ops::to_dtype(a, kFloat64).contiguous();
      for (const Tensor& rhs : {b, bt, b1}) {
        Tensor c = ops::matmul(a, rhs);
        Shape want(a.sizes().begin(), a.sizes().end() - 1);
        want.push_back(2);
        CHECK(c.sizes() == want);
        Tensor r = ops::expand(ops::to_dtype(rhs, kFloat64).reshape({6, 2}), {B, 6, 2});
        check_close(c, ref_bmm(values(af), values(r), B, n, 6, 2), tol);
      }
    }
  }
}

TEST_CASE("matmul reads expanded (stride 0) batch operands, including both sides expanded") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12);
    Tensor a = ops::expand(randn({1, 3, 4}, dtype(dt)), {6, 3, 4});
    Tensor b = randn({6, 4, 2}, dtype(dt));
    check_close(ops::matmul(a, b), ref_bmm(values(a), values(b), 6, 3, 4, 2), tol);
    Tensor b1 = ops::expand(randn({1, 4, 2}, dtype(dt)), {6, 4, 2});
    Tensor c = ops::matmul(a, b1);
    CHECK(c.sizes() == Shape{6, 3, 2});
    check_close(c, ref_bmm(values(a), values(b1), 6, 3, 4, 2), tol);
    check_close(ops::bmm(a, b1), ref_bmm(values(a), values(b1), 6, 3, 4, 2), tol);
  }
}

TEST_CASE("linear computes x @ w^T + b for any leading dims, with or without bias") {
  for (DType dt : {kFloat32, kFloat64}) {
    const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-5 : 1e-12);
    Tensor x = randn({2, 3, 4}, dtype(dt)), w = randn({5, 4}, dtype(dt)), b = randn({5}, dtype(dt));
    Tensor y = ops::linear(x, w, b);
    CHECK(y.sizes() == Shape{2, 3, 5});
    std::vector<double> want = ref_bmm(values(x), values(w.t()), 1, 6, 4, 5), bv = values(b);
    std::vector<double> with_bias = want;
    for (size_t i = 0; i < with_bias.size(); ++i) with_bias[i] += bv[i % 5];
    check_close(y, with_bias, tol);
    check_close(ops::linear(x, w), want, tol);
    // Leading dims that cannot be folded into one stride (permuted input).
    Tensor xp = randn({3, 2, 4}, dtype(dt)).permute({1, 0, 2});
    check_close(ops::linear(xp, w, b), [&] {
      std::vector<double> r = ref_bmm(values(xp), values(w.t()), 1, 6, 4, 5);
      for (size_t i = 0; i < r.size(); ++i) r[i] += bv[i % 5];
      return r;
    }(), tol);
    // Expanded rows (stride 0) in the leading dims.
    Tensor xe = ops::expand(randn({1, 4}, dtype(dt)), {3, 4});
    check_close(ops::linear(xe, w), ref_bmm(values(xe), values(w.t()), 1, 3, 4, 5), tol);
    Tensor xe3 = ops::expand(randn({2, 1, 4}, dtype(dt)), {2, 3, 4});
    check_close(ops::linear(xe3, w), ref_bmm(values(xe3), values(w.t()), 1, 6, 4, 5), tol);
    // A weight that is itself a transposed view, and a 1-D input.
    Tensor wt = randn({4, 5}, dtype(dt)).t();
    Tensor x1 = randn({4}, dtype(dt));
    Tensor y1 = ops::linear(x1, wt, b);
    CHECK(y1.sizes() == Shape{5});
    std::vector<double> r1 = ref_bmm(values(x1), values(wt.t()), 1, 1, 4, 5);
    for (size_t i = 0; i < r1.size(); ++i) r1[i] += bv[i];
    check_close(y1, r1, tol);
  }
}

TEST_CASE("an MLP-sized float32 linear matches the reference") {
  Tensor x = randn({128, 784}), w = randn({64, 784}), b = randn({64});
  std::vector<double> want = ref_bmm(values(x), values(w.t()), 1, 128, 784, 64), bv = values(b);
  for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % 64];
  check_close(ops::linear(x, w, b), want, Tolerance::within(1e-3));
}

TEST_CASE("matmul with an empty inner dimension gives zeros (plus bias) and empty outer dims give empty results") {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor z = ops::mm(randn({3, 0}, dtype(dt)), randn({0, 2}, dtype(dt)));
    CHECK(z.sizes() == Shape{3, 2});
    CHECK(values(z) == std::vector<double>(6, 0.0));
    Tensor b = tensor({1, 2}, dtype(dt));
    CHECK(values(ops::linear(randn({3, 0}, dtype(dt)), randn({2, 0}, dtype(dt)), b)) ==
          std::vector<double>{1, 2, 1, 2, 1, 2});
    CHECK(ops::mm(randn({0, 4}, dtype(dt)), randn({4, 2}, dtype(dt))).sizes() == Shape{0, 2});
    CHECK(ops::matmul(randn({0, 3, 4}, dtype(dt)), randn({4, 2}, dtype(dt))).sizes() == Shape{0, 3, 2});
  }
}

TEST_CASE("repeated float32 products reuse cached oneDNN primitives") {
  Tensor a = randn({9, 11}), b = randn({11, 13});
  ops::mm(a, b);
  size_t before = dnnl_utils::primitive_cache_size();
  for (int i = 0; i < 5; ++i) ops::mm(a, b);
  CHECK(dnnl_utils::primitive_cache_size() == before);
  ops::mm(a, randn({11, 14}));
  CHECK(dnnl_utils::primitive_cache_size() == before + 1);
}

TEST_CASE("float32 products run concurrently from several threads with correct results") {
  // Each thread has its own stream and scratchpad; the shapes are shared so the threads also
  // share cached primitives.
  Tensor a = randn({33, 20}), b = randn({20, 17}), x = randn({4, 20}), w = randn({17, 20});
  std::vector<double> want_ab = ref_bmm(values(a), values(b), 1, 33, 20, 17);
  std::vector<double> want_xw = ref_bmm(values(x), values(w.t()), 1, 4, 20, 17);
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      bool good = true;
      for (int i = 0; i < 20; ++i) {
        std::vector<double> got = values(t % 2 ? ops::mm(a, b) : ops::linear(x, w));
        const std::vector<double>& want = t % 2 ? want_ab : want_xw;
        for (size_t j = 0; j < got.size(); ++j) good = good && std::abs(got[j] - want[j]) < 1e-4;
      }
      ok[static_cast<size_t>(t)] = good ? 1 : 0;
    });
  for (auto& th : threads) th.join();
  CHECK(ok == std::vector<int>{1, 1, 1, 1});
}

TEST_CASE("mismatched shapes are reported with both shapes and the mismatching sizes") {
  CHECK_THROWS_WITH(ops::matmul(randn({2, 3}), randn({4, 5})),
                    Catch::Contains("matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(ops::mm(randn({2, 3}), randn({4, 5})),
                    Catch::Contains("mm: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(ops::bmm(randn({2, 2, 3}), randn({2, 4, 5})),
                    Catch::Contains("bmm: shapes [2, 2, 3] and [2, 4, 5] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(ops::bmm(randn({2, 2, 3}), randn({3, 3, 5})), Catch::Contains("different batch sizes (2 != 3)"));
  CHECK_THROWS_WITH(ops::linear(randn({2, 3}), randn({5, 4})),
                    Catch::Contains("linear: input [2, 3] and weight [5, 4] cannot be multiplied (3 != 4)"));
  CHECK_THROWS_WITH(ops::linear(randn({2, 4}), randn({5, 4}), randn({4})),
                    Catch::Contains("expected bias of shape [5], got [4]"));
  CHECK_THROWS_WITH(ops::matmul(tensor({1, 2, 3}), tensor({1, 2})),
                    Catch::Contains("matmul: shapes [3] and [2] cannot be multiplied (3 != 2)"));
  CHECK_THROWS_WITH(ops::matmul(randn({2, 3, 4}), randn({3, 4, 5})),
                    Catch::Contains("batch dimensions do not broadcast (2 != 3"));
  CHECK_THROWS_WITH(ops::mm(randn({3}), randn({3, 4})), Catch::Contains("mm: expected 2-D tensors, got [3] and [3, 4]"));
  CHECK_THROWS_WITH(ops::bmm(randn({3, 3}), randn({3, 3})), Catch::Contains("bmm: expected 3-D tensors"));
  CHECK_THROWS_WITH(ops::matmul(ops::full({}, 1.0), randn({3})), Catch::Contains("at least 1-D"));
}

TEST_CASE("mixed or unsupported dtypes are errors naming both dtypes") {
  CHECK_THROWS_WITH(ops::mm(randn({2, 2}), randn({2, 2}, dtype(kFloat64))),
                    Catch::Contains("expected m1 and m2 to have the same dtype, but got: float32 != float64"));
  CHECK_THROWS_WITH(ops::matmul(randn({2, 2}, dtype(kFloat64)), randint(0, 3, {2, 2})),
                    Catch::Contains("float64 != int64"));
  CHECK_THROWS_WITH(ops::linear(randn({2, 2}), randn({2, 2}, dtype(kFloat64))),
                    Catch::Contains("expected m1 and m2 to have the same dtype"));
  Tensor t = ops::full({2, 2}, true, kBool);
  CHECK_THROWS_WITH(ops::mm(t, t), Catch::Contains("not implemented for bool"));
}

TEST_CASE("mm_accumulate_ adds a product into a matrix in float32 and float64") {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor a = randn({37, 19}).to(dt), b = randn({23, 37}).to(dt);  // a^T @ b^T: transposed operands read in place
    Tensor acc = randn({19, 23}).to(dt);
    Tensor want = acc + ops::mm(a.t(), b.t());
    Tensor same = acc;
    ops::mm_accumulate_(acc, a.t(), b.t());
    CHECK(acc.is_same(same));
    std::vector<double> got = values(acc), ref = values(want);
    for (size_t i = 0; i < ref.size(); ++i) CHECK(got[i] == Approx(ref[i]).epsilon(1e-5).margin(1e-5));
  }
  Tensor acc = zeros({2, 3});
  CHECK_THROWS_WITH(ops::mm_accumulate_(acc, randn({2, 4}), randn({5, 3})), Catch::Contains("cannot be multiplied"));
  CHECK_THROWS_WITH(ops::mm_accumulate_(acc, randn({2, 4}), randn({4, 4})),
                    Catch::Contains("mm_accumulate_") && Catch::Contains("[2, 4]"));
  Tensor t = zeros({3, 2});
  Tensor tt = t.t();
  CHECK_THROWS_WITH(ops::mm_accumulate_(tt, randn({2, 4}), randn({4, 3})), Catch::Contains("contiguous"));
  Tensor sq = zeros({3, 3});
  CHECK_THROWS_WITH(ops::mm_accumulate_(sq, sq, randn({3, 3})), Catch::Contains("share memory"));
}

TEST_CASE("float32 products of a few rows (a decode step's linear) match the reference in every layout") {
  // Up to 4 rows run in graft's own dot-product loops, 5 rows in oneDNN: both against float64.
  const Tolerance tol = Tolerance::within(2e-5);
  for (int64_t rows : {1, 2, 4, 5})
    for (int64_t k : {1, 15, 16, 37, 128})
      for (int64_t m : {1, 3, 96}) {
        INFO("rows " << rows << ", k " << k << ", m " << m);
        Tensor x = randn({rows, k}), w = randn({m, k}), bias = randn({m}), wkm = randn({k, m});
        std::vector<double> xw = ref_bmm(values(x), values(w.t()), 1, rows, k, m);
        // linear: the weight's rows are the product's columns, read in place.
        std::vector<double> want = xw;
        std::vector<double> bv = values(bias);
        for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % static_cast<size_t>(m)];
        check_close(graft::linear(x, w, bias), want, tol);
        check_close(graft::linear(x.unsqueeze(0), w, Tensor()).squeeze(0), xw, tol);
        // x @ W with W's rows contiguous, and a transposed x.
        check_close(ops::mm(x, wkm), ref_bmm(values(x), values(wkm), 1, rows, k, m), tol);
        Tensor xt = randn({k, rows}).t();
        check_close(ops::mm(xt, wkm), ref_bmm(values(xt), values(wkm), 1, rows, k, m), tol);
        // An expanded weight (every column the same memory) and an accumulating product.
        Tensor we = ops::expand(randn({1, k}), {m, k});
        check_close(graft::linear(x, we, bias), [&] {
          std::vector<double> r = ref_bmm(values(x), values(we.t()), 1, rows, k, m);
          for (size_t i = 0; i < r.size(); ++i) r[i] += bv[i % static_cast<size_t>(m)];
          return r;
        }(), tol);
        Tensor acc = randn({rows, m});
        std::vector<double> acc_want = values(acc);
        for (size_t i = 0; i < acc_want.size(); ++i) acc_want[i] += xw[i];
        ops::mm_accumulate_(acc, x, w.t());
        check_close(acc, acc_want, tol);
      }
}

TEST_CASE("a few rows' product split over threads by columns gives the same bits on any thread count") {
  // Past 32K multiply-adds a thread, the few-rows loops split the columns over the pool (a decode
  // step's weights then stream from both cores' caches); every column's sum stays the same code.
  const int before = get_num_threads();
  for (auto [rows, k, m] : std::vector<std::array<int64_t, 3>>{{1, 128, 512}, {1, 512, 130}, {3, 200, 390}}) {
    INFO("rows " << rows << ", k " << k << ", m " << m);
    Tensor x = randn({rows, k}), w = randn({m, k}), bias = randn({m});
    set_num_threads(1);
    const std::vector<float> one = graft::linear(x, w, bias).to_vector<float>();
    set_num_threads(2);
    Tensor two = graft::linear(x, w, bias);
    CHECK(two.to_vector<float>() == one);
    std::vector<double> want = ref_bmm(values(x), values(w.t()), 1, rows, k, m);
    std::vector<double> bv = values(bias);
    for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % static_cast<size_t>(m)];
    check_close(two, want, Tolerance::within(2e-5));
  }
  set_num_threads(before);
}
