// bfloat16 and float16 through the CPU kernels that compute them natively or on oneDNN's 16-bit
// primitives (matmul family, convolutions, softmax, layer_norm), against float32 on the same
// (rounded) inputs.
//
// The reference is the float32 op on the float32 copies of the 16-bit inputs, so the only
// differences allowed are the one rounding of each result to the 16-bit dtype and the order of
// float32 sums: rtol is a few units of the dtype's rounding (2^-8 for bf16, 2^-11 for f16), atol
// covers results that cancel to near zero.
//
// meson runs this executable twice: as is, and as ops/test_bf16_kernels_avx2 with
// GRAFT_MAX_CPU_ISA=AVX2 and ONEDNN_MAX_CPU_ISA=AVX2, where oneDNN 2.6 cannot create bf16
// primitives and every case here takes graft's float path ("oneDNN's bf16 support is what
// ONEDNN_MAX_CPU_ISA allows" checks that the cap really took effect), and a third time as
// ops/test_bf16_kernels_primitives with GRAFT_BF16_PRIMITIVES=on, so oneDNN's bf16 kernels are
// tested on a CPU whose own choice is the float path (Intel without AMX).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "graft.h"
#include "ops/conv_pool_params.h"
#include "ops/dnnl_utils.h"
#include "runtime/cpu_isa.h"
#include "support/check_close.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;

namespace {

const DType kLowDtypes[] = {kBFloat16, kFloat16};

Tolerance tol_for(DType dt) {
  Tolerance t = dt == kBFloat16 ? Tolerance{.rtol = 1.6e-2, .atol = 2e-3} : Tolerance{.rtol = 2e-3, .atol = 2e-3};
  t.check_dtype = false;  // a 16-bit result against a float32 reference
  return t;
}

// Random values already representable in `dt`, and their exact float32 copy.
struct Pair {
  Tensor low, f32;
};
Pair rand_pair(const Shape& s, DType dt) {
  Tensor low = randn(s).to(dt);
  return {low, low.to(kFloat32)};
}

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

}  // namespace

TEST_CASE("oneDNN's bf16 support is what ONEDNN_MAX_CPU_ISA allows") {
  const std::string& impl = dnnl_utils::bf16_matmul_impl();
  const std::string cap = env_or_empty("ONEDNN_MAX_CPU_ISA");
  INFO("bf16 matmul impl: '" << impl << "', ONEDNN_MAX_CPU_ISA='" << cap << "'");
  if (cap == "AVX2") {
    // oneDNN 2.6 has no bf16 matmul below AVX512_CORE: every bf16 case here runs graft's float path.
    CHECK(impl.empty());
    CHECK_FALSE(dnnl_utils::use_bf16_primitives());
    CHECK(cpu_isa() <= CpuIsa::Avx2);
  } else if (cap == "AVX512_CORE") {
    // An emulation (gemm:jit): slower than graft's float path, which the kernels take instead.
    CHECK_FALSE(impl.empty());
    CHECK_FALSE(dnnl_utils::use_bf16_primitives());
  } else if (cap.empty() && detected_cpu_isa() >= CpuIsa::Avx512CoreBf16) {
    // A kernel for bf16 hardware; whether graft uses it is the CPU's rule, or the override.
    CHECK(dnnl_utils::choose_bf16_primitives(impl, true, "on"));
    const std::string setting = env_or_empty("GRAFT_BF16_PRIMITIVES");
    CHECK(dnnl_utils::use_bf16_primitives() == dnnl_utils::choose_bf16_primitives(impl, cpu_is_intel(), setting));
    if (setting == "on") CHECK(dnnl_utils::use_bf16_primitives());
  } else if (cap.empty() && detected_cpu_isa() >= CpuIsa::Avx512Core) {
    CHECK_FALSE(impl.empty());
  }
}

TEST_CASE("bf16 primitives are chosen where they beat float32: AMX, AMD's AVX512_BF16, or when asked") {
  using dnnl_utils::choose_bf16_primitives;
  const std::string amx = "brg:avx512_core_amx", dot = "brg:avx512_core_bf16", emulated = "gemm:jit";
  for (bool intel : {true, false}) {
    INFO("intel " << intel);
    CHECK(choose_bf16_primitives(amx, intel, ""));
    CHECK(choose_bf16_primitives(amx, intel, "auto"));
    CHECK_FALSE(choose_bf16_primitives(amx, intel, "off"));
    CHECK(choose_bf16_primitives(dot, intel, "on"));
    CHECK_FALSE(choose_bf16_primitives(dot, intel, "off"));
    // An emulation or no kernel never pays, even when asked for.
    for (const std::string& none : {emulated, std::string()}) {
      for (const char* setting : {"", "on", "off"}) CHECK_FALSE(choose_bf16_primitives(none, intel, setting));
    }
  }
  // One port for vdpbf16ps on Intel: the float path; twice the float rate on AMD: the bf16 kernel.
  CHECK_FALSE(choose_bf16_primitives(dot, true, ""));
  CHECK(choose_bf16_primitives(dot, false, ""));
  CHECK_THROWS_WITH(choose_bf16_primitives(dot, true, "yes"), Catch::Contains("GRAFT_BF16_PRIMITIVES") &&
                                                                  Catch::Contains("on, off or auto"));
  // The vendor the rule is given is the kernel's (/proc/cpuinfo's vendor_id, where there is one).
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);) {
    if (line.rfind("vendor_id", 0) != 0) continue;
    CHECK(cpu_is_intel() == (line.find("GenuineIntel") != std::string::npos));
    break;
  }
}

TEST_CASE("mm, bmm, matmul and linear in bf16/f16 return the dtype and match float32") {
  for (DType dt : kLowDtypes) {
    INFO("dtype " << dt);
    const Tolerance tol = tol_for(dt);
    auto a = rand_pair({17, 40}, dt), b = rand_pair({40, 9}, dt);
    Tensor c = ops::mm(a.low, b.low);
    CHECK(c.dtype() == dt);
    check_close(c, ops::mm(a.f32, b.f32), tol);
    // Transposed operand read in place.
    auto bt = rand_pair({9, 40}, dt);
    check_close(ops::mm(a.low, bt.low.t()), ops::mm(a.f32, bt.f32.t()), tol);

    auto x = rand_pair({3, 5, 33}, dt), y = rand_pair({3, 33, 6}, dt);
    Tensor z = ops::bmm(x.low, y.low);
    CHECK(z.dtype() == dt);
    check_close(z, ops::bmm(x.f32, y.f32), tol);

    // Broadcast batch dims and a 1-D operand.
    auto p = rand_pair({2, 1, 4, 24}, dt), q = rand_pair({3, 24, 5}, dt), v = rand_pair({24}, dt);
    check_close(ops::matmul(p.low, q.low), ops::matmul(p.f32, q.f32), tol);
    check_close(ops::matmul(p.low, v.low), ops::matmul(p.f32, v.f32), tol);

    auto in = rand_pair({2, 7, 48}, dt), w = rand_pair({20, 48}, dt), bias = rand_pair({20}, dt);
    Tensor l = ops::linear(in.low, w.low, bias.low);
    CHECK(l.dtype() == dt);
    CHECK(l.sizes() == Shape{2, 7, 20});
    check_close(l, ops::linear(in.f32, w.f32, bias.f32), tol);
    check_close(ops::linear(in.low, w.low), ops::linear(in.f32, w.f32), tol);
  }
}

TEST_CASE("mm_accumulate_ in bf16/f16 adds into self, rounding once") {
  for (DType dt : kLowDtypes) {
    INFO("dtype " << dt);
    auto self = rand_pair({6, 5}, dt), a = rand_pair({6, 30}, dt), b = rand_pair({30, 5}, dt);
    Tensor acc = self.low.clone();
    Tensor r = ops::mm_accumulate_(acc, a.low, b.low);
    CHECK(r.is_same(acc));
    CHECK(acc.dtype() == dt);
    check_close(acc, self.f32 + ops::mm(a.f32, b.f32), tol_for(dt));
  }
}

// bf16 convolutions of at most four input channels with channels-last outputs run graft's direct
// loops (ops/conv_few_channels.h) instead of oneDNN: forward and weight gradient against float32 on
// the same values, over kernel sizes, strides, padding, dilation, output channels that fill one,
// three (padded) or four vectors, and NCHW inputs beside channels-last weights.
TEST_CASE("bf16 convolutions of few input channels match float32 on the same values") {
  struct Case {
    Shape x, w;
    Shape stride, padding, dilation;
    bool bias, x_channels_last;
  };
  const std::vector<Case> cases{
      {{4, 1, 28, 28}, {32, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, true, true},  // the CNN's first layer
      {{2, 3, 17, 19}, {40, 3, 5, 5}, {2, 2}, {2, 2}, {1, 1}, true, true},
      {{3, 2, 9, 11}, {5, 2, 3, 2}, {1, 1}, {1, 0}, {2, 2}, false, false},
      {{2, 4, 6, 7}, {64, 4, 1, 1}, {1, 1}, {0, 0}, {1, 1}, false, true},
      {{2, 1, 5, 4}, {16, 1, 3, 3}, {1, 1}, {3, 3}, {1, 1}, true, true},  // more padding than input
  };
  for (const Case& c : cases) {
    INFO("x " << shape_str(c.x) << ", w " << shape_str(c.w) << ", stride " << c.stride[0] << ", padding "
              << c.padding[0] << "x" << c.padding[1] << ", dilation " << c.dilation[0]);
    auto x = rand_pair(c.x, kBFloat16), w = rand_pair(c.w, kBFloat16), b = rand_pair({c.w[0]}, kBFloat16);
    Tensor xl = c.x_channels_last ? x.low.contiguous(MemoryFormat::ChannelsLast) : x.low;
    // Channels-last weights, with the channel stride 1 also where there is one channel (as
    // Module::to(ChannelsLast) lays them out), so the convolution runs channels-last.
    auto channels_last = [](const Tensor& t) {
      const Shape& z = t.sizes();
      Tensor out = ops::empty_strided(z, {z[1] * z[2] * z[3], 1, z[3] * z[1], z[1]}, t.dtype());
      out.copy_(t);
      return out;
    };
    Tensor wl = channels_last(w.low), wf = channels_last(w.f32);
    Tensor bl = c.bias ? b.low : Tensor(), bf = c.bias ? b.f32 : Tensor();
    Tensor y = ops::conv2d(xl, wl, bl, c.stride, c.padding, c.dilation, 1);
    Tensor yf = ops::conv2d(x.f32, wf, bf, c.stride, c.padding, c.dilation, 1);
    REQUIRE(y.dtype() == kBFloat16);
    CHECK(y.is_contiguous(MemoryFormat::ChannelsLast));
    // One rounding of a float sum: within one bf16 ulp of float32's result rounded.
    const Tolerance ulp{.rtol = 8e-3, .atol = 1e-3};
    check_close(y, yf.to(kBFloat16), ulp);
    auto g = rand_pair(y.sizes(), kBFloat16);
    Tensor gl = g.low.contiguous(MemoryFormat::ChannelsLast);
    Tensor gw = ops::conv2d_backward_weight(gl, xl, c.w, c.stride, c.padding, c.dilation, 1);
    Tensor gwf = ops::conv2d_backward_weight(g.f32.contiguous(MemoryFormat::ChannelsLast), x.f32, c.w, c.stride,
                                             c.padding, c.dilation, 1);
    REQUIRE(gw.dtype() == kBFloat16);
    check_close(gw, gwf.to(kBFloat16), Tolerance{.rtol = 8e-3, .atol = 1e-2});
  }
}

TEST_CASE("the matmul family rejects a 16-bit/float32 mix, naming both dtypes") {
  Tensor a = randn({3, 4}).to(kBFloat16), b = randn({4, 2});
  CHECK_THROWS_WITH(ops::mm(a, b), Catch::Contains("expected m1 and m2 to have the same dtype") &&
                                       Catch::Contains("bfloat16") && Catch::Contains("float32"));
  CHECK_THROWS_WITH(ops::matmul(b.t(), a.t()), Catch::Contains("same dtype") && Catch::Contains("bfloat16"));
  CHECK_THROWS_WITH(ops::linear(randn({2, 4}).to(kFloat16), randn({3, 4})),
                    Catch::Contains("same dtype") && Catch::Contains("float16") && Catch::Contains("float32"));
  CHECK_THROWS_WITH(ops::mm(a, b.to(kFloat16)), Catch::Contains("bfloat16") && Catch::Contains("float16"));
  CHECK_THROWS_WITH(ops::conv2d(randn({1, 2, 5, 5}).to(kBFloat16), randn({3, 2, 3, 3})),
                    Catch::Contains("bfloat16") && Catch::Contains("float32"));
}

TEST_CASE("conv2d and its two gradients in bf16/f16, NCHW and channels-last, match float32") {
  for (DType dt : kLowDtypes) {
    for (bool nhwc : {false, true}) {
      INFO("dtype " << dt << (nhwc ? " channels-last" : " NCHW"));
      const Tolerance tol = tol_for(dt);
      auto x = rand_pair({2, 16, 9, 9}, dt), w = rand_pair({24, 16, 3, 3}, dt), b = rand_pair({24}, dt);
      if (nhwc) {
        x.low = x.low.contiguous(MemoryFormat::ChannelsLast);
        x.f32 = x.f32.contiguous(MemoryFormat::ChannelsLast);
      }
      Tensor y = ops::conv2d(x.low, w.low, b.low, {1, 1}, {1, 1});
      CHECK(y.dtype() == dt);
      CHECK(y.is_contiguous(nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous));
      check_close(y, ops::conv2d(x.f32, w.f32, b.f32, {1, 1}, {1, 1}), tol);
      // Strided, grouped, no bias.
      auto wg = rand_pair({8, 8, 3, 3}, dt);
      check_close(ops::conv2d(x.low, wg.low, {}, {2, 2}, {0, 0}, {1, 1}, 2),
                  ops::conv2d(x.f32, wg.f32, {}, {2, 2}, {0, 0}, {1, 1}, 2), tol);

      auto gy = rand_pair({2, 24, 9, 9}, dt);
      if (nhwc) {
        gy.low = gy.low.contiguous(MemoryFormat::ChannelsLast);
        gy.f32 = gy.f32.contiguous(MemoryFormat::ChannelsLast);
      }
      Tensor gx = ops::conv2d_backward_input(gy.low, x.low.sizes(), w.low, {1, 1}, {1, 1}, {1, 1}, 1);
      CHECK(gx.dtype() == dt);
      check_close(gx, ops::conv2d_backward_input(gy.f32, x.f32.sizes(), w.f32, {1, 1}, {1, 1}, {1, 1}, 1), tol);
      Tensor gw = ops::conv2d_backward_weight(gy.low, x.low, w.low.sizes(), {1, 1}, {1, 1}, {1, 1}, 1);
      CHECK(gw.dtype() == dt);
      check_close(gw, ops::conv2d_backward_weight(gy.f32, x.f32, w.f32.sizes(), {1, 1}, {1, 1}, {1, 1}, 1), tol);
      // A first layer's data gradient (3 input channels: plain weights on NCHW, blocked on NHWC).
      auto w3 = rand_pair({24, 3, 3, 3}, dt);
      Tensor gx3 = ops::conv2d_backward_input(gy.low, {2, 3, 9, 9}, w3.low, {1, 1}, {1, 1}, {1, 1}, 1);
      CHECK(gx3.is_contiguous(nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous));
      check_close(gx3, ops::conv2d_backward_input(gy.f32, {2, 3, 9, 9}, w3.f32, {1, 1}, {1, 1}, {1, 1}, 1), tol);
    }
  }
}

// The float path (float16 always; bfloat16 where oneDNN's kernel does not pay) converts a large
// convolution a batch chunk at a time, and a large product a tile of its larger operand and result
// at a time. The results are float32's, and the float32 copies held at once stay well under the
// whole twins.
TEST_CASE("the 16-bit float path converts chunks and tiles: float32's results with bounded copies") {
  const Tolerance tol = tol_for(kFloat16);
  // Bytes allocated at the peak of f() above what was live before it, less its result.
  auto transient = [](auto f) {
    const int64_t base = memory_stats(kCPU).allocated_bytes;
    reset_peak_memory_stats(kCPU);
    Tensor r = f();
    return memory_stats(kCPU).peak_allocated_bytes - base - r.numel() * r.element_size();
  };
  for (bool nhwc : {false, true}) {
    INFO((nhwc ? "channels-last" : "NCHW"));
    const MemoryFormat fmt = nhwc ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
    // 40 samples of 64K activation values (in and out): 1M values make chunks of 14 samples.
    auto x = rand_pair({40, 32, 32, 32}, kFloat16), w = rand_pair({32, 32, 3, 3}, kFloat16),
         b = rand_pair({32}, kFloat16), gy = rand_pair({40, 32, 32, 32}, kFloat16);
    for (Pair* t : {&x, &gy}) {
      t->low = t->low.contiguous(fmt);
      t->f32 = t->f32.contiguous(fmt);
    }
    const int64_t twins = 2 * x.f32.numel() * 4;  // float32 copies of a whole input and output
    Tensor y;
    CHECK(transient([&] { return y = ops::conv2d(x.low, w.low, b.low, {1, 1}, {1, 1}); }) < twins / 2);
    CHECK(y.is_contiguous(fmt));
    check_close(y, ops::conv2d(x.f32, w.f32, b.f32, {1, 1}, {1, 1}), tol);
    Tensor gx;
    CHECK(transient([&] {
            return gx = ops::conv2d_backward_input(gy.low, x.low.sizes(), w.low, {1, 1}, {1, 1}, {1, 1}, 1);
          }) < twins / 2);
    check_close(gx, ops::conv2d_backward_input(gy.f32, x.f32.sizes(), w.f32, {1, 1}, {1, 1}, {1, 1}, 1), tol);
    // The weight and bias gradients: float32 sums over the chunks, rounded once.
    std::vector<Tensor> wb;
    CHECK(transient([&] {
            wb = ops::conv2d_backward_weight_bias(gy.low, x.low, w.low.sizes(), {1, 1}, {1, 1}, {1, 1}, 1);
            return wb[0];
          }) < twins / 2);
    std::vector<Tensor> ref = ops::conv2d_backward_weight_bias(gy.f32, x.f32, w.f32.sizes(), {1, 1}, {1, 1}, {1, 1}, 1);
    const Tolerance sums{.rtol = 2e-3, .atol = 5e-2, .check_dtype = false};  // sums of 41K products
    check_close(wb[0], ref[0], sums);
    check_close(wb[1], ref[1], sums);
    check_close(ops::conv2d_backward_weight(gy.low, x.low, w.low.sizes(), {1, 1}, {1, 1}, {1, 1}, 1), ref[0], sums);
  }
  // Products past 1M float32 values in tiles: rows of a (a is the larger operand) or columns of b
  // (b is), with a bias, adding into self, and a vector times a matrix (out has one dim fewer).
  auto a = rand_pair({4000, 512}, kFloat16), w = rand_pair({64, 512}, kFloat16), bias = rand_pair({64}, kFloat16);
  Tensor r;
  const int64_t twins = (4000 * 512 + 4000 * 64) * 4;  // float32 copies of a and of the result
  CHECK(transient([&] { return r = ops::linear(a.low, w.low, bias.low); }) < twins * 2 / 3);
  check_close(r, ops::linear(a.f32, w.f32, bias.f32), tol);
  auto a2 = rand_pair({64, 256}, kFloat16), b2 = rand_pair({256, 8192}, kFloat16), bias2 = rand_pair({8192}, kFloat16);
  const int64_t twins2 = (256 * 8192 + 64 * 8192) * 4;
  CHECK(transient([&] { return r = ops::mm(a2.low, b2.low); }) < twins2 * 2 / 3);
  check_close(r, ops::mm(a2.f32, b2.f32), tol);
  Tensor b2t = b2.low.t().contiguous(), b2tf = b2.f32.t().contiguous();  // linear's weight: [8192, 256]
  check_close(ops::linear(a2.low, b2t, bias2.low), ops::linear(a2.f32, b2tf, bias2.f32), tol);
  auto self = rand_pair({64, 8192}, kFloat16);
  Tensor acc = self.low.clone();
  ops::mm_accumulate_(acc, a2.low, b2.low);
  check_close(acc, self.f32 + ops::mm(a2.f32, b2.f32), tol);
  auto v = rand_pair({256}, kFloat16);
  Tensor vm = ops::matmul(v.low, b2.low);
  CHECK(vm.sizes() == Shape{8192});
  check_close(vm, ops::matmul(v.f32, b2.f32), tol);
}

// Windows that tile the input (kernel == stride: a ViT's patch embedding). On AMX machines the bf16
// weight gradient of such a convolution with one to three input channels is one matrix product
// (ops/conv.cpp, patch_weight_grad); elsewhere oneDNN's kernel runs. Both must give float32's values,
// for either layout, an unbatched input and a size the windows do not divide (the rest is unread).
TEST_CASE("a patch embedding's weight gradient in bf16/f16 matches float32") {
  struct Case {
    Shape in, wt;
    bool nhwc;
  };
  const Case cases[] = {
      {{4, 1, 28, 28}, {16, 1, 7, 7}, true},  {{4, 1, 28, 28}, {16, 1, 7, 7}, false},
      {{3, 3, 32, 32}, {8, 3, 4, 4}, true},   {{3, 3, 32, 32}, {8, 3, 4, 4}, false},
      {{2, 2, 30, 29}, {5, 2, 7, 7}, true},   {{1, 30, 29}, {5, 1, 7, 7}, false},
      {{2, 1, 16, 16}, {6, 1, 4, 2}, true},
  };
  for (DType dt : kLowDtypes) {
    for (const Case& c : cases) {
      INFO("dtype " << dt << " input " << shape_str(c.in) << " weight " << shape_str(c.wt)
                    << (c.nhwc ? " channels-last" : " NCHW"));
      const Shape stride{c.wt[2], c.wt[3]};
      auto x = rand_pair(c.in, dt);
      Shape out = c.in.size() == 4 ? Shape{c.in[0], c.wt[0], c.in[2] / c.wt[2], c.in[3] / c.wt[3]}
                                   : Shape{c.wt[0], c.in[1] / c.wt[2], c.in[2] / c.wt[3]};
      auto gy = rand_pair(out, dt);
      if (c.nhwc) {
        for (Pair* p : {&x, &gy}) {
          p->low = p->low.clone(MemoryFormat::ChannelsLast);
          p->f32 = p->f32.clone(MemoryFormat::ChannelsLast);
        }
      }
      Tensor gw = ops::conv2d_backward_weight(gy.low, x.low, c.wt, stride, {0, 0}, {1, 1}, 1);
      CHECK(gw.dtype() == dt);
      CHECK(gw.sizes() == c.wt);
      CHECK(gw.is_contiguous());
      check_close(gw, ops::conv2d_backward_weight(gy.f32, x.f32, c.wt, stride, {0, 0}, {1, 1}, 1), tol_for(dt));
    }
  }
}

TEST_CASE("a bf16 conv2d reuses its reordered weights until they change") {
  auto x = rand_pair({1, 16, 8, 8}, kBFloat16), w = rand_pair({16, 16, 3, 3}, kBFloat16);
  Tensor xl = x.low.contiguous(MemoryFormat::ChannelsLast);
  kernels::clear_conv_weight_cache();
  Tensor y1 = ops::conv2d(xl, w.low, {}, {1, 1}, {1, 1});
  auto s1 = kernels::conv_weight_cache_stats();
  Tensor y2 = ops::conv2d(xl, w.low, {}, {1, 1}, {1, 1});
  auto s2 = kernels::conv_weight_cache_stats();
  check_close(y2, y1, Tolerance::exact());
  if (dnnl_utils::use_bf16_primitives()) {
    // The bf16 primitive's blocked weights: reordered once, then found in the cache.
    CHECK(s1.misses == 1);
    CHECK(s2.hits == s1.hits + 1);
    CHECK(s2.misses == 1);
    w.low.mul_(2);  // a write bumps the version: the next call reorders again
    Tensor y3 = ops::conv2d(xl, w.low, {}, {1, 1}, {1, 1});
    CHECK(kernels::conv_weight_cache_stats().misses == 2);
    check_close(y3, ops::conv2d(x.f32.contiguous(MemoryFormat::ChannelsLast), w.f32 * 2, {}, {1, 1}, {1, 1}),
                tol_for(kBFloat16));
  }
}

TEST_CASE("gradients of bf16/f16 matmul, linear and conv2d through autograd match float32") {
  for (DType dt : kLowDtypes) {
    INFO("dtype " << dt);
    const Tolerance tol = tol_for(dt);
    {
      auto a = rand_pair({8, 24}, dt), b = rand_pair({24, 6}, dt), g = rand_pair({8, 6}, dt);
      for (Tensor* t : {&a.low, &b.low, &a.f32, &b.f32}) t->requires_grad_();
      graft::matmul(a.low, b.low).backward(g.low);
      graft::matmul(a.f32, b.f32).backward(g.f32);
      CHECK(a.low.grad().dtype() == dt);
      check_close(a.low.grad(), a.f32.grad(), tol);
      check_close(b.low.grad(), b.f32.grad(), tol);
    }
    {
      auto x = rand_pair({5, 32}, dt), w = rand_pair({12, 32}, dt), bias = rand_pair({12}, dt), g = rand_pair({5, 12}, dt);
      for (Tensor* t : {&x.low, &w.low, &bias.low, &x.f32, &w.f32, &bias.f32}) t->requires_grad_();
      graft::linear(x.low, w.low, bias.low).backward(g.low);
      graft::linear(x.f32, w.f32, bias.f32).backward(g.f32);
      CHECK(w.low.grad().dtype() == dt);
      check_close(x.low.grad(), x.f32.grad(), tol);
      check_close(w.low.grad(), w.f32.grad(), tol);
      check_close(bias.low.grad(), bias.f32.grad(), tol);
    }
    {
      auto x = rand_pair({2, 8, 7, 7}, dt), w = rand_pair({16, 8, 3, 3}, dt), b = rand_pair({16}, dt);
      auto g = rand_pair({2, 16, 7, 7}, dt);
      for (Tensor* t : {&x.low, &w.low, &b.low, &x.f32, &w.f32, &b.f32}) t->requires_grad_();
      graft::conv2d(x.low, w.low, b.low, {1, 1}, {1, 1}).backward(g.low);
      graft::conv2d(x.f32, w.f32, b.f32, {1, 1}, {1, 1}).backward(g.f32);
      CHECK(x.low.grad().dtype() == dt);
      CHECK(w.low.grad().dtype() == dt);
      check_close(x.low.grad(), x.f32.grad(), tol);
      check_close(w.low.grad(), w.f32.grad(), tol);
      check_close(b.low.grad(), b.f32.grad(), tol);
    }
  }
}

TEST_CASE("layer_norm and softmax in bf16/f16 (with gradients) match float32") {
  for (DType dt : kLowDtypes) {
    INFO("dtype " << dt);
    const Tolerance tol = tol_for(dt);
    auto x = rand_pair({4, 6, 40}, dt), g = rand_pair({4, 6, 40}, dt);
    for (Tensor* t : {&x.low, &x.f32}) t->requires_grad_();
    Tensor s = graft::softmax(x.low, -1);
    CHECK(s.dtype() == dt);
    s.backward(g.low);
    graft::softmax(x.f32, -1).backward(g.f32);
    check_close(s, graft::softmax(x.f32.detach(), -1), tol);
    check_close(x.low.grad(), x.f32.grad(), tol);
    check_close(graft::log_softmax(x.low.detach(), 1), graft::log_softmax(x.f32.detach(), 1), tol);

    // 16-bit input with float32 weight and bias (a float32 module under autocast): bf16 out.
    auto xl = rand_pair({3, 5, 64}, dt);
    Tensor w = (randn({64}) * 0.5 + 1).requires_grad_(), b = randn({64}).requires_grad_();
    Tensor w2 = w.detach().clone().requires_grad_(), b2 = b.detach().clone().requires_grad_();
    for (Tensor* t : {&xl.low, &xl.f32}) t->requires_grad_();
    Tensor y = graft::layer_norm(xl.low, {64}, w, b);
    CHECK(y.dtype() == dt);
    auto gl = rand_pair({3, 5, 64}, dt);
    y.backward(gl.low);
    Tensor yr = graft::layer_norm(xl.f32, {64}, w2, b2);
    yr.backward(gl.f32);
    check_close(y, yr.detach(), tol);
    CHECK(xl.low.grad().dtype() == dt);
    CHECK(w.grad().dtype() == kFloat32);
    check_close(xl.low.grad(), xl.f32.grad(), Tolerance{.rtol = tol.rtol, .atol = 4 * *tol.atol, .check_dtype = false});
    // Weight and bias gradients sum over 15 rows of 16-bit products: a float32 result within the
    // inputs' rounding.
    check_close(w.grad(), w2.grad(), Tolerance{.rtol = tol.rtol, .atol = 1e-2});
    check_close(b.grad(), b2.grad(), Tolerance{.rtol = tol.rtol, .atol = 1e-2});
  }
}

TEST_CASE("sum and mean of bf16/f16 accumulate in float and round once, or not at all for a float32 result") {
  for (DType dt : kLowDtypes) {
    INFO("dtype " << dt);
    const Tolerance tol = tol_for(dt);
    // 4096 ones and a large value: a 16-bit accumulator would stop counting at 256 (bf16) or
    // 2048 (f16); a float one gets every one of them.
    Tensor x = ops::ones({4096}, dt);
    CHECK(x.sum().dtype() == dt);
    check_close(x.sum({}, false, kFloat32), {4096.0}, Tolerance::exact());
    CHECK(x.sum({}, false, kFloat32).dtype() == kFloat32);
    check_close(x.mean(), {1.0}, Tolerance{.rtol = 0, .atol = 0, .check_dtype = false});

    auto y = rand_pair({6, 50, 7}, dt);
    Tensor s1 = y.low.sum({1});
    CHECK(s1.dtype() == dt);
    check_close(s1, y.f32.sum({1}), Tolerance{.rtol = tol.rtol, .atol = 2e-2, .check_dtype = false});
    check_close(y.low.sum({0, 2}, true, kFloat32), y.f32.sum({0, 2}, true), Tolerance::within(1e-5));
    Tensor m = y.low.transpose(0, 2).mean({1});
    CHECK(m.dtype() == dt);
    check_close(m, y.f32.transpose(0, 2).mean({1}), tol);
    // A float32 tensor summed into a 16-bit result: float accumulation, one rounding.
    check_close(y.f32.sum({1}, false, dt), y.f32.sum({1}), Tolerance{.rtol = tol.rtol, .atol = 2e-2, .check_dtype = false});
    CHECK(y.f32.sum({1}, false, dt).dtype() == dt);
  }
}

// The blocked 16-bit elementwise loop (ops/elementwise_cpu.h) and the GELU fast path convert a
// block to float, compute, and round once: exactly the float32 result rounded, on contiguous,
// transposed and broadcast operands, with a bool operand read in place.
TEST_CASE("16-bit elementwise ops equal the float32 result rounded once, on any layout") {
  for (DType dt : {kBFloat16, kFloat16}) {
    INFO(dt);
    manual_seed(3);
    Tensor a = randn({37, 300}).to(dt), b = randn({37, 300}).to(dt), row = randn({300}).to(dt);
    Tensor mask = randn({37, 300}).gt(0.0);
    auto same = [&](const Tensor& got, const Tensor& want32) {
      REQUIRE(got.dtype() == dt);
      CHECK(got.to(kFloat32).to_vector<float>() == want32.to(dt).to(kFloat32).to_vector<float>());
    };
    Tensor af = a.to(kFloat32), bf = b.to(kFloat32), rf = row.to(kFloat32);
    same(a + b, af + bf);
    same(a * row, af * rf);                                // broadcast operand
    same(a.t() - b.t(), af.t() - bf.t());                  // strided operands and output
    same(a.relu(), af.relu());
    same(where(mask, a, b), where(mask, af, bf));          // a bool operand read in place
    same(gelu(a), gelu(af));                               // the GELU fast path
    same(gelu(a.t().contiguous()), gelu(af.t().contiguous()));
    same(ops::gelu_backward(b, a, GeluApproximate::None), ops::gelu_backward(bf, af, GeluApproximate::None));
    same(gelu(a, "tanh"), gelu(af, "tanh"));
  }
}

// max_pool2d is native in 16-bit: a max is exact, so values and indices equal float32's on the
// same values, NCHW and channels-last, with overlapping windows; the backward accumulates each
// position's gradient in float and rounds it once (overlapping windows hit a position twice).
TEST_CASE("max_pool2d in bf16/f16 equals float32 exactly, and its backward rounds each sum once") {
  for (DType dt : kLowDtypes) {
    for (bool channels_last : {false, true}) {
      INFO("dtype " << dt << (channels_last ? " channels-last" : " NCHW"));
      auto x = rand_pair({2, 5, 9, 8}, dt);
      if (channels_last) {
        x.low = x.low.contiguous(MemoryFormat::ChannelsLast);
        x.f32 = x.f32.contiguous(MemoryFormat::ChannelsLast);
      }
      for (auto [k, st, pad] : {std::tuple<int64_t, int64_t, int64_t>{2, 2, 0}, {3, 2, 1}}) {
        auto lo = ops::max_pool2d_with_indices(x.low, {k, k}, {st, st}, {pad, pad});
        auto hi = ops::max_pool2d_with_indices(x.f32, {k, k}, {st, st}, {pad, pad});
        REQUIRE(lo[0].dtype() == dt);
        CHECK(lo[0].is_contiguous(MemoryFormat::ChannelsLast) == channels_last);
        CHECK(lo[0].to(kFloat32).to_vector<float>() == hi[0].to_vector<float>());
        CHECK(lo[1].to_vector<int64_t>() == hi[1].to_vector<int64_t>());
        auto g = rand_pair(lo[0].sizes(), dt);
        Tensor gi = ops::max_pool2d_backward(g.low, lo[1], x.low.sizes(), channels_last);
        REQUIRE(gi.dtype() == dt);
        CHECK(gi.to(kFloat32).to_vector<float>() ==
              ops::max_pool2d_backward(g.f32, hi[1], x.f32.sizes(), channels_last).to(dt).to(kFloat32).to_vector<float>());
      }
    }
  }
}

// A conv bias gradient: a channels-last 16-bit tensor summed over N, H, W, read in place.
TEST_CASE("sum of a channels-last bf16/f16 tensor over N, H, W equals the float32 sum rounded once") {
  for (DType dt : kLowDtypes) {
    INFO("dtype " << dt);
    auto x = rand_pair({8, 24, 7, 5}, dt);
    Tensor xl = x.low.contiguous(MemoryFormat::ChannelsLast);
    CHECK(xl.sum({0, 2, 3}).to(kFloat32).to_vector<float>() == x.f32.sum({0, 2, 3}).to(dt).to(kFloat32).to_vector<float>());
    CHECK(xl.sum({0, 2, 3}, false, kFloat32).to_vector<float>() == x.f32.sum({0, 2, 3}).to_vector<float>());
  }
}

// Fused attention in 16-bit: the tiles run in float on the widened operands, so out and the
// gradients are the float32 kernel's on the same values rounded once (up to float sums' order,
// which is the same kernel's), and lse is float32 (as PyTorch's CPU kernel) and equal to float's.
TEST_CASE("_sdpa_flash and its backward in bf16/f16 are float32's on the same values, rounded once") {
  for (DType dt : kLowDtypes) {
    // L > one 64-row tile, and the ViT's 17 tokens (the small-heads kernels).
    for (auto [L, causal] : std::vector<std::pair<int64_t, bool>>{{70, false}, {70, true}, {17, false}, {17, true}}) {
      INFO("dtype " << dt << ", L " << L << (causal ? " causal" : ""));
      // Heads read from [N, L, H, D] views (MultiheadAttention's layout).
      auto q = rand_pair({2, L, 3, 16}, dt), k = rand_pair({2, L, 3, 16}, dt), v = rand_pair({2, L, 3, 8}, dt);
      auto heads = [](const Tensor& t) { return t.transpose(1, 2); };
      Tensor add_mask = (randn({L, L}) * 0.5).to(dt);
      for (bool masked : {false, true}) {
        Tensor ml = masked ? add_mask : Tensor(), mf = masked ? add_mask.to(kFloat32) : Tensor();
        auto lo = ops::_sdpa_flash(heads(q.low), heads(k.low), heads(v.low), ml, causal, 0.25);
        auto hi = ops::_sdpa_flash(heads(q.f32), heads(k.f32), heads(v.f32), mf, causal, 0.25);
        REQUIRE(lo[0].dtype() == dt);
        REQUIRE(lo[1].dtype() == kFloat32);
        CHECK(lo[0].to(kFloat32).to_vector<float>() == hi[0].to(dt).to(kFloat32).to_vector<float>());
        CHECK(lo[1].to_vector<float>() == hi[1].to_vector<float>());
        auto g = rand_pair(lo[0].sizes(), dt);
        auto glo = ops::_sdpa_flash_backward(g.low, heads(q.low), heads(k.low), heads(v.low), lo[0], lo[1], ml,
                                             causal, 0.25);
        // The float reference reads the 16-bit out (what the 16-bit backward sees).
        auto ghi = ops::_sdpa_flash_backward(g.f32, heads(q.f32), heads(k.f32), heads(v.f32), lo[0].to(kFloat32),
                                             hi[1], mf, causal, 0.25);
        for (int i = 0; i < 3; ++i) {
          REQUIRE(glo[i].dtype() == dt);
          CHECK(glo[i].to(kFloat32).to_vector<float>() == ghi[i].to(dt).to(kFloat32).to_vector<float>());
        }
      }
    }
    // Through autograd under autocast, against float32 on the same values.
    auto x = rand_pair({2, 3, 20, 16}, dt);
    x.low.requires_grad_();
    x.f32.requires_grad_();
    Tensor y = graft::scaled_dot_product_attention(x.low, x.low, x.low);
    CHECK(y.dtype() == dt);
    y.sum().backward();
    graft::scaled_dot_product_attention(x.f32, x.f32, x.f32).sum().backward();
    check_close(x.low.grad(), x.f32.grad(), Tolerance{.rtol = tol_for(dt).rtol, .atol = 5e-2, .check_dtype = false});
  }
}

// relu and threshold_backward(·, ·, 0) on 16-bit tensors select raw bits (ops/unary.cpp): the
// same bits as float32's result rounded once, NaN payloads, signed zeros, infinities and
// subnormals included, contiguous and channels-last, and the generic loop for other thresholds.
TEST_CASE("16-bit relu and threshold_backward equal float32's result rounded, on special values") {
  for (DType dt : kLowDtypes) {
    INFO(dt);
    const bool bf = dt == kBFloat16;
    // Bit patterns: +-0, +-1, +-inf, subnormals, quiet and signalling NaNs with payloads, both signs.
    std::vector<uint16_t> bits = {0x0000, 0x8000, 0x3F80, 0xBF80, 0x0001, 0x8001, 0x3C00, 0xBC00};
    for (uint16_t b : bf ? std::vector<uint16_t>{0x7F80, 0xFF80, 0x7FC1, 0xFFC3, 0x7F81, 0xFF85}
                         : std::vector<uint16_t>{0x7C00, 0xFC00, 0x7E01, 0xFE03, 0x7C01, 0xFC05})
      bits.push_back(b);
    while (bits.size() < 2 * 3 * 4 * 5) bits.push_back(static_cast<uint16_t>(bits.size() * 2654435761u >> 7));
    Tensor x = ops::empty({2, 3, 4, 5}, dt);
    std::memcpy(x.data_ptr(), bits.data(), bits.size() * 2);
    Tensor g = x.transpose(2, 3).contiguous().view({2, 3, 4, 5});  // the same values in another order
    auto same_bits = [&](const Tensor& got, const Tensor& want) {
      REQUIRE(got.dtype() == dt);
      Tensor a = got.contiguous(), b = want.to(dt).contiguous();
      CHECK(std::memcmp(a.data_ptr(), b.data_ptr(), static_cast<size_t>(a.numel()) * 2) == 0);
    };
    for (bool cl : {false, true}) {
      Tensor xs = cl ? x.contiguous(MemoryFormat::ChannelsLast) : x, gs = cl ? g.contiguous(MemoryFormat::ChannelsLast) : g;
      Tensor r = ops::relu(xs);
      CHECK(r.strides() == xs.strides());
      same_bits(r, ops::relu(xs.to(kFloat32)));
      same_bits(ops::threshold_backward(gs, xs, 0), ops::threshold_backward(gs.to(kFloat32), xs.to(kFloat32), 0));
      same_bits(ops::threshold_backward(gs, xs, 0.5), ops::threshold_backward(gs.to(kFloat32), xs.to(kFloat32), 0.5));
      // The in-place forms (the CNN's relu_ after a convolution, relu's rule on its own gradient)
      // give the same bits and write into self.
      Tensor xi = xs.clone(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
      const void* at = xi.data_ptr();
      same_bits(ops::relu_(xi), ops::relu(xs.to(kFloat32)));
      CHECK(xi.data_ptr() == at);
      Tensor gi = gs.clone(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
      same_bits(ops::threshold_backward_(gi, xs, 0), ops::threshold_backward(gs.to(kFloat32), xs.to(kFloat32), 0));
      same_bits(gi, ops::threshold_backward(gs.to(kFloat32), xs.to(kFloat32), 0));
      // grad and x one tensor: each element is read before it is written.
      Tensor self = xs.clone(cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
      same_bits(ops::threshold_backward_(self, self, 0), ops::threshold_backward(xs.to(kFloat32), xs.to(kFloat32), 0));
    }
  }
}

// The joins and gathers move 16-bit elements as they are (no float round trip); cat promotes a
// bf16/float32 mix to float32, as PyTorch.
TEST_CASE("cat, stack, index_select, gather and embedding take bf16/f16 as they are") {
  for (DType dt : kLowDtypes) {
    INFO(dt);
    auto a = rand_pair({3, 4}, dt), b = rand_pair({2, 4}, dt);
    auto bits = [](const Tensor& t) { return t.to(kFloat32).to_vector<float>(); };
    Tensor c = cat({a.low, b.low}, 0);
    REQUIRE(c.dtype() == dt);
    CHECK(bits(c) == cat({a.f32, b.f32}, 0).to_vector<float>());
    CHECK(cat({a.low, b.f32}, 0).dtype() == kFloat32);
    CHECK(bits(stack({a.low, a.low}, 1)) == stack({a.f32, a.f32}, 1).to_vector<float>());
    Tensor idx = graft::tensor(std::vector<int64_t>{2, 0, 2}, {3});
    CHECK(bits(index_select(a.low, 0, idx)) == index_select(a.f32, 0, idx).to_vector<float>());
    Tensor gi = graft::tensor(std::vector<int64_t>{3, 0, 1, 1, 2, 2, 0, 3, 1, 0, 0, 3}, {3, 4});
    Tensor g = gather(a.low, 1, gi);
    REQUIRE(g.dtype() == dt);
    CHECK(bits(g) == gather(a.f32, 1, gi).to_vector<float>());
    CHECK(bits(ops::embedding(a.low, idx)) == ops::embedding(a.f32, idx).to_vector<float>());
  }
}
