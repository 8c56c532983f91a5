// scaled_dot_product_attention: the fused kernel against the composed reference (every mask kind,
// causal, odd lengths, broadcast batch dims, non-contiguous inputs, float32 and float64), values
// pinned by PyTorch 2.15 (tests/nn/data/transformer_fixture.safetensors, made by
// make_transformer_fixture.py beside it), argument errors, and the memory the fused path saves.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "graft.h"
#include "support/check_close.h"
#include "support/fixtures.h"

using namespace graft;
using graft::test::check_close;
using graft::test::safetensors_fixture;
using graft::test::Tolerance;

namespace {

struct Result {
  Tensor out, dq, dk, dv;
};

// Forward, then backward of sum(out * g), on one backend.
Result run(SdpaBackend backend, const Tensor& q0, const Tensor& k0, const Tensor& v0, const Tensor& mask, bool causal,
           std::optional<double> scale = std::nullopt) {
  Tensor q = q0.detach().requires_grad_(), k = k0.detach().requires_grad_(), v = v0.detach().requires_grad_();
  Tensor out;
  {
    SdpaBackendGuard guard(backend);
    out = scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale);
  }
  manual_seed(99);
  Tensor g = randn(out.sizes(), dtype(out.dtype()));
  (out * g).sum().backward();
  return {out.detach(), q.grad(), k.grad(), v.grad()};
}

void check_same(const Result& a, const Result& b, double tol,
                std::source_location where = std::source_location::current()) {
  const Tolerance within{.rtol = 0, .atol = tol};
  check_close(a.out, b.out, within, where);
  check_close(a.dq, b.dq, within, where);
  check_close(a.dk, b.dk, within, where);
  check_close(a.dv, b.dv, within, where);
}

}  // namespace

TEST_CASE("fused attention matches the composed reference for every mask kind, in float32 and float64") {
  for (DType dt : {kFloat64, kFloat32}) {
    double tol = dt == kFloat64 ? 1e-12 : 2e-5;
    // Odd sizes cross the 64-row and 128-key tiles with ragged ends.
    // One or two query rows (a decode step) take the unpacked tile products.
    // Up to 32 keys and at least 4 query rows take the small-heads kernels (float32; float64
    // always tiles): 17 x 17 is the ViT's, 9 x 32 fills two key vectors exactly, and both leave a
    // ragged group of query rows; 3 x 20 has too few rows for them and tiles.
    for (auto [L, S] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 40}, {2, 150}, {3, 20}, {5, 7}, {17, 17}, {9, 32}, {70, 37}, {130, 200}}) {
      INFO("dtype " << dt << ", L " << L << ", S " << S);
      manual_seed(static_cast<uint64_t>(L * 1000 + S));
      const int64_t E = 24, Ev = 20;
      Tensor q = randn({2, 3, L, E}, dtype(dt)), k = randn({2, 3, S, E}, dtype(dt)), v = randn({2, 3, S, Ev}, dtype(dt));
      // Plain blocks, not SECTIONs: Catch enters each SECTION once per test case run, so inside
      // these loops a SECTION would check the first dtype and shape only.
      {
        INFO("no mask");
        check_same(run(SdpaBackend::Flash, q, k, v, {}, false), run(SdpaBackend::Math, q, k, v, {}, false), tol);
      }
      {
        INFO("causal");
        check_same(run(SdpaBackend::Flash, q, k, v, {}, true), run(SdpaBackend::Math, q, k, v, {}, true), tol);
      }
      {
        INFO("bool mask [L, S] shared by the batch, with a fully masked row");
        Tensor m = ops::gt(rand({L, S}), 0.4);
        m.select(0, 0).fill_(false);
        Result a = run(SdpaBackend::Flash, q, k, v, m, false), b = run(SdpaBackend::Math, q, k, v, m, false);
        check_same(a, b, tol);
        CHECK(a.out.select(-2, 0).abs().sum().item<double>() == 0);  // PyTorch: a dead row gives 0, not NaN
        CHECK(a.dq.select(-2, 0).abs().sum().item<double>() == 0);
      }
      {
        INFO("additive mask per batch and head, with -inf entries");
        Tensor m = randn({2, 3, L, S}, dtype(dt));
        m = masked_fill(m, ops::gt(rand({2, 3, L, S}), 0.8), -std::numeric_limits<double>::infinity());
        check_same(run(SdpaBackend::Flash, q, k, v, m, false), run(SdpaBackend::Math, q, k, v, m, false), tol);
      }
      {
        INFO("bool mask broadcast over heads [2, 1, L, S]");
        Tensor m = ops::gt(rand({2, 1, L, S}), 0.2);
        check_same(run(SdpaBackend::Flash, q, k, v, m, false), run(SdpaBackend::Math, q, k, v, m, false), tol);
      }
      {
        INFO("explicit scale");
        check_same(run(SdpaBackend::Flash, q, k, v, {}, false, 0.05), run(SdpaBackend::Math, q, k, v, {}, false, 0.05), tol);
      }
    }
  }
}

TEST_CASE("fused attention's small-heads kernels take every head width up to 32") {
  // Widths and keys pad to 16 or 32 lanes; 33 wide takes the tiles.
  for (auto [E, Ev] : std::vector<std::pair<int64_t, int64_t>>{{16, 16}, {32, 8}, {20, 27}, {3, 32}, {33, 16}}) {
    for (int64_t S : {4, 17, 32}) {
      INFO("E " << E << ", Ev " << Ev << ", S " << S);
      manual_seed(static_cast<uint64_t>(E * 100 + S));
      Tensor q = randn({2, 2, 11, E}), k = randn({2, 2, S, E}), v = randn({2, 2, S, Ev});
      check_same(run(SdpaBackend::Flash, q, k, v, {}, false), run(SdpaBackend::Math, q, k, v, {}, false), 2e-5);
      check_same(run(SdpaBackend::Flash, q, k, v, {}, true), run(SdpaBackend::Math, q, k, v, {}, true), 2e-5);
    }
  }
}

TEST_CASE("fused attention gives the same bits on one thread and two, at any size of head") {
  // Heads go to threads only in shares worth waking the pool (a decode step's 4 heads of one query
  // row stay on the caller); each head is computed alone either way.
  const int before = get_num_threads();
  for (auto [B, L, S] : std::vector<std::array<int64_t, 3>>{{4, 1, 64}, {64, 17, 17}, {8, 70, 90}}) {
    INFO("heads " << B << ", L " << L << ", S " << S);
    Tensor q = randn({B, L, 32}), k = randn({B, S, 32}), v = randn({B, S, 32});
    set_num_threads(1);
    const Result one = run(SdpaBackend::Flash, q, k, v, {}, true);
    set_num_threads(2);
    const Result two = run(SdpaBackend::Flash, q, k, v, {}, true);
    CHECK(one.out.to_vector<float>() == two.out.to_vector<float>());
    CHECK(one.dq.to_vector<float>() == two.dq.to_vector<float>());
    CHECK(one.dk.to_vector<float>() == two.dk.to_vector<float>());
    CHECK(one.dv.to_vector<float>() == two.dv.to_vector<float>());
  }
  set_num_threads(before);
}

TEST_CASE("fused attention reads broadcast batches and non-contiguous inputs without copies going wrong") {
  manual_seed(5);
  // k and v shared by the batch ([1, H]) against q [B, H]; their gradients sum over it.
  Tensor q = randn({3, 2, 9, 16}), k = randn({1, 2, 11, 16}), v = randn({1, 2, 11, 8});
  Result a = run(SdpaBackend::Flash, q, k, v, {}, false), b = run(SdpaBackend::Math, q, k, v, {}, false);
  check_same(a, b, 2e-5);
  CHECK(a.dk.sizes() == Shape{1, 2, 11, 16});
  // [B, L, H, E] viewed as [B, H, L, E] (what MultiheadAttention produces), and a transposed value.
  Tensor qt = randn({2, 9, 4, 16}).transpose(1, 2), kt = randn({2, 13, 4, 16}).transpose(1, 2);
  Tensor vt = randn({2, 4, 8, 13}).transpose(-2, -1);
  REQUIRE_FALSE(qt.is_contiguous());
  check_same(run(SdpaBackend::Flash, qt, kt, vt, {}, true), run(SdpaBackend::Math, qt, kt, vt, {}, true), 2e-5);
  // 2-D inputs (no batch dims).
  Tensor q2 = randn({6, 5}), k2 = randn({4, 5}), v2 = randn({4, 3});
  check_same(run(SdpaBackend::Flash, q2, k2, v2, {}, false), run(SdpaBackend::Math, q2, k2, v2, {}, false), 2e-5);
}

TEST_CASE("scaled_dot_product_attention gives PyTorch 2.15's values") {
  auto& f = safetensors_fixture("transformer_fixture.safetensors");
  const Tolerance pytorch{.rtol = 0, .atol = 1e-5};
  Tensor q = f.at("sdpa.q"), k = f.at("sdpa.k"), v = f.at("sdpa.v");
  for (SdpaBackend backend : {SdpaBackend::Flash, SdpaBackend::Math}) {
    INFO((backend == SdpaBackend::Flash ? "flash" : "math"));
    SdpaBackendGuard guard(backend);
    check_close(scaled_dot_product_attention(q, k, v), f.at("sdpa.out.plain"), pytorch);
    check_close(scaled_dot_product_attention(q, k, v, {}, 0.0, true), f.at("sdpa.out.causal"), pytorch);
    check_close(scaled_dot_product_attention(q, k, v, f.at("sdpa.bool_mask")), f.at("sdpa.out.bool"), pytorch);
    check_close(scaled_dot_product_attention(q, k, v, f.at("sdpa.float_mask")), f.at("sdpa.out.float"), pytorch);
    check_close(scaled_dot_product_attention(q, k, v, {}, 0.0, false, 0.3), f.at("sdpa.out.scale"), pytorch);
    for (const char* kind : {"plain", "bool"}) {
      INFO(kind);
      Tensor ql = q.detach().requires_grad_(), kl = k.detach().requires_grad_(), vl = v.detach().requires_grad_();
      Tensor m = std::string(kind) == "bool" ? f.at("sdpa.bool_mask") : Tensor();
      (scaled_dot_product_attention(ql, kl, vl, m) * f.at("sdpa.grad_out")).sum().backward();
      std::string p = std::string("sdpa.grad.") + kind + ".";
      check_close(ql.grad(), f.at(p + "q"), pytorch);
      check_close(kl.grad(), f.at(p + "k"), pytorch);
      check_close(vl.grad(), f.at(p + "v"), pytorch);
    }
  }
}

TEST_CASE("scaled_dot_product_attention rejects bad arguments with the op, shapes and dtypes") {
  Tensor q = randn({2, 3, 4}), k = randn({2, 5, 4}), v = randn({2, 5, 6});
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, randn({2, 5, 3}), v),
                    Catch::Contains("scaled_dot_product_attention") && Catch::Contains("[2, 5, 3]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, randn({2, 4, 6})), Catch::Contains("value") && Catch::Contains("[2, 4, 6]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k.to(kFloat64), v), Catch::Contains("float64"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, ones({4, 5})), Catch::Contains("attn_mask") && Catch::Contains("[2, 3, 5]"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, ones({3, 5}, dtype(kInt64))), Catch::Contains("attn_mask"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, ones({3, 5}), 0.0, true), Catch::Contains("is_causal"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(randn({3, 4}).select(0, 0), k, v), Catch::Contains("at least 2 dims"));
  CHECK_THROWS_WITH(scaled_dot_product_attention(randn({3, 3, 4}), k, v), Catch::Contains("broadcast"));
  {
    SdpaBackendGuard guard(SdpaBackend::Flash);
    CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {}, 0.1), Catch::Contains("dropout"));
  }
  CHECK_THROWS_WITH(scaled_dot_product_attention(q, k, v, {}, 1.5), Catch::Contains("dropout_p"));
}

TEST_CASE("SdpaBackendGuard forces a backend on its thread and restores the previous one") {
  CHECK(sdpa_backend() == SdpaBackend::Auto);
  {
    SdpaBackendGuard outer(SdpaBackend::Math);
    CHECK(sdpa_backend() == SdpaBackend::Math);
    {
      SdpaBackendGuard inner(SdpaBackend::Flash);
      CHECK(sdpa_backend() == SdpaBackend::Flash);
    }
    CHECK(sdpa_backend() == SdpaBackend::Math);
    // The math backend records the composition, the fused one a single node.
    Tensor q = randn({2, 3, 4}).requires_grad_();
    CHECK(scaled_dot_product_attention(q, q, q).grad_fn()->name() != "ScaledDotProductFlashAttentionBackward");
  }
  CHECK(sdpa_backend() == SdpaBackend::Auto);
  Tensor q = randn({2, 3, 4}).requires_grad_();
  CHECK(scaled_dot_product_attention(q, q, q).grad_fn()->name() == "ScaledDotProductFlashAttentionBackward");
}

TEST_CASE("attention dropout keeps the expectation and the math backend takes it") {
  manual_seed(3);
  Tensor q = randn({1, 8, 16}), k = randn({1, 32, 16}), v = ones({1, 32, 1});
  // Rows of the weights sum to 1, so with v = 1 each output is the kept weight mass / (1 - p).
  Tensor out = scaled_dot_product_attention(q, k, v, {}, 0.5);
  double mean = out.mean().item<double>();
  CHECK(mean > 0.5);
  CHECK(mean < 1.5);
  check_close(scaled_dot_product_attention(q, k, v, {}, 0.0), ones({1, 8, 1}), {.rtol = 0, .atol = 1e-5});
}

TEST_CASE("fused attention keeps far less memory than the composed version at L = 1024") {
  manual_seed(8);
  const int64_t B = 2, H = 4, L = 1024, E = 64;
  auto peak = [&](SdpaBackend backend) {
    Tensor q = randn({B, H, L, E}).requires_grad_(), k = randn({B, H, L, E}).requires_grad_(),
           v = randn({B, H, L, E}).requires_grad_();
    Tensor g = randn({B, H, L, E});
    int64_t base = memory_stats(Device(DeviceType::CPU)).allocated_bytes;
    reset_peak_memory_stats(Device(DeviceType::CPU));
    {
      SdpaBackendGuard guard(backend);
      (scaled_dot_product_attention(q, k, v) * g).sum().backward();
    }
    return memory_stats(Device(DeviceType::CPU)).peak_allocated_bytes - base;
  };
  int64_t flash = peak(SdpaBackend::Flash), math = peak(SdpaBackend::Math);
  INFO("flash " << flash << " bytes, composed " << math << " bytes");
  // The composed path holds [B, H, L, L] scores and weights (32 MiB each); the fused path O(L E).
  CHECK(flash * 4 <= math);
  CHECK(flash < B * H * L * L * 4);
}

TEST_CASE("fused attention's output follows the query's layout, so merging heads is a view") {
  // MultiheadAttention's heads: [N, L, H, D] storage seen as [N, H, L, D].
  Tensor q = randn({2, 9, 4, 16}).transpose(1, 2), k = randn({2, 4, 11, 16}), v = randn({2, 4, 11, 8});
  SdpaBackendGuard guard(SdpaBackend::Flash);
  Tensor out = scaled_dot_product_attention(q, k, v);
  CHECK(out.sizes() == Shape{2, 4, 9, 8});
  CHECK(out.transpose(1, 2).is_contiguous());
  Tensor ref;
  {
    SdpaBackendGuard math(SdpaBackend::Math);
    ref = scaled_dot_product_attention(q, k, v);
  }
  check_close(out, ref, {.rtol = 0, .atol = 2e-5});
  // A contiguous query gives a contiguous output.
  CHECK(scaled_dot_product_attention(q.contiguous(), k, v).is_contiguous());
  // The gradients follow their inputs' layouts too (the heads' view backward needs no copy).
  auto r = ops::_sdpa_flash(q, k, v, {}, false, 0.25);
  auto grads = ops::_sdpa_flash_backward(randn(r[0].sizes()), q, k, v, r[0], r[1], {}, false, 0.25);
  CHECK(grads[0].transpose(1, 2).is_contiguous());
  CHECK(grads[1].is_contiguous());
}
