// Channels-last as a memory format: strides, contiguous(fmt), clone(fmt), layout propagation
// through elementwise ops, and the NHWC convolution and max-pooling kernels (same values and
// gradients as NCHW, channels-last results), plus the convolution's cache of reordered weights.
#include <catch2/catch.hpp>

#include <cmath>

#include "graft.h"
#include "support/check_close.h"
#include "ops/conv_pool_params.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;

namespace {

std::vector<double> values(const Tensor& t) { return ops::to_dtype(t, kFloat64).to_vector<double>(); }

bool is_cl(const Tensor& t) {
  return t.suggest_memory_format() == MemoryFormat::ChannelsLast && t.is_contiguous(MemoryFormat::ChannelsLast);
}

}  // namespace

TEST_CASE("contiguous(ChannelsLast) lays a 4-D tensor out NHWC and keeps its values") {
  manual_seed(1);
  Tensor x = randn({2, 3, 4, 5});
  CHECK(x.suggest_memory_format() == MemoryFormat::Contiguous);
  CHECK_FALSE(x.is_contiguous(MemoryFormat::ChannelsLast));
  Tensor y = x.contiguous(MemoryFormat::ChannelsLast);
  CHECK(y.strides() == Shape{60, 1, 15, 3});
  CHECK(y.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK_FALSE(y.is_contiguous());
  CHECK(y.suggest_memory_format() == MemoryFormat::ChannelsLast);
  CHECK(values(y) == values(x));
  // Already channels-last: the same tensor back; contiguous() goes back to NCHW.
  CHECK(y.contiguous(MemoryFormat::ChannelsLast).is_same(y));
  Tensor z = y.contiguous();
  CHECK(z.is_contiguous());
  CHECK(values(z) == values(x));
  // The element at (n, c, h, w) lies at n*60 + h*15 + w*3 + c.
  const float* d = y.data_ptr<float>();
  CHECK(d[1 * 60 + 2 * 15 + 3 * 3 + 1] == x[1][1][2][3].item<float>());
  CHECK_THROWS_WITH(randn({3, 4, 5}).contiguous(MemoryFormat::ChannelsLast), Catch::Contains("needs a 4-D tensor"));
  CHECK_THROWS_WITH(randn({3, 4, 5}).contiguous(MemoryFormat::ChannelsLast), Catch::Contains("[3, 4, 5]"));
}

TEST_CASE("size-1 dims: contiguous in both formats, and the stride order decides the suggestion") {
  Tensor a = randn({2, 1, 4, 4});  // C == 1: NCHW and NHWC are the same memory
  CHECK(a.is_contiguous());
  CHECK(a.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(a.suggest_memory_format() == MemoryFormat::Contiguous);
  CHECK(a.contiguous(MemoryFormat::ChannelsLast).is_same(a));  // already dense in both: itself, as PyTorch
  Tensor b = a.clone(MemoryFormat::ChannelsLast);
  CHECK(b.strides() == Shape{16, 1, 4, 1});
  CHECK(b.suggest_memory_format() == MemoryFormat::ChannelsLast);
  CHECK(values(b) == values(a));
  Tensor c = randn({2, 5, 1, 1});  // 1x1 planes
  CHECK(c.is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(c.suggest_memory_format() == MemoryFormat::Contiguous);
  Tensor one = randn({1, 1, 1, 1});
  CHECK(one.suggest_memory_format() == MemoryFormat::Contiguous);
  // A channels-last tensor sliced along W keeps the NHWC order but is no longer dense.
  Tensor s = randn({2, 3, 4, 6}).contiguous(MemoryFormat::ChannelsLast).slice(3, 0, 3);
  CHECK(s.suggest_memory_format() == MemoryFormat::ChannelsLast);
  CHECK_FALSE(s.is_contiguous(MemoryFormat::ChannelsLast));
  Tensor s2 = s.contiguous(MemoryFormat::ChannelsLast);
  CHECK(is_cl(s2));
  CHECK(values(s2) == values(s));
}

TEST_CASE("clone keeps a dense layout with Preserve, and is recorded for autograd") {
  Tensor x = randn({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  CHECK(x.clone().is_contiguous());
  CHECK(x.clone(MemoryFormat::Preserve).strides() == x.strides());
  Tensor t = randn({3, 4}).t();
  CHECK(t.clone(MemoryFormat::Preserve).strides() == t.strides());
  Tensor nd = randn({4, 6}).slice(1, 0, 6, 2);  // not dense: Preserve gives row-major
  CHECK(nd.clone(MemoryFormat::Preserve).is_contiguous());
  CHECK(values(x.clone(MemoryFormat::Preserve)) == values(x));
  // Not dense, in another order: dense in the same order of dims, as torch 2.15's clone and to
  // (and empty_like: the same rule, preserve_format_strides) give (1, 8, 4) and (36, 1, 9, 3).
  Tensor pnd = randn({2, 3, 4}).permute({2, 0, 1}).slice(2, 0, 3, 2);  // strides (1, 12, 8)
  CHECK(pnd.clone(MemoryFormat::Preserve).strides() == Shape{1, 8, 4});
  CHECK(pnd.to(kFloat64).strides() == Shape{1, 8, 4});
  CHECK(values(pnd.clone(MemoryFormat::Preserve)) == values(pnd));
  Tensor cl_nd = x.slice(3, 0, 5, 2);  // channels-last, every other column
  CHECK(cl_nd.clone(MemoryFormat::Preserve).strides() == Shape{36, 1, 9, 3});
  CHECK(cl_nd.to(kBFloat16).strides() == Shape{36, 1, 9, 3});

  Tensor leaf = randn({2, 3, 4, 4}).requires_grad_();
  Tensor y = leaf.contiguous(MemoryFormat::ChannelsLast);
  CHECK(is_cl(y));
  (y * y).sum().backward();
  check_close(leaf.grad(), leaf.detach() * 2, Tolerance::within(1e-6));
}

TEST_CASE("elementwise ops keep channels-last: relu, add, a broadcast bias, and relu's backward") {
  manual_seed(2);
  Tensor x = randn({2, 4, 3, 5});
  Tensor xc = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor bias = randn({1, 4, 1, 1});
  Tensor r = xc.relu();
  CHECK(is_cl(r));
  check_close(r, x.relu(), Tolerance::exact());
  Tensor s = xc + xc;
  CHECK(is_cl(s));
  check_close(s, x + x, Tolerance::exact());
  Tensor b = xc + bias;
  CHECK(is_cl(b));
  check_close(b, x + bias, Tolerance::exact());
  Tensor m = xc * x;  // mixed layouts: the first input's layout, the right values
  CHECK(is_cl(m));
  check_close(m, x * x, Tolerance::exact());
  Tensor e = xc.exp();
  CHECK(is_cl(e));
  // In place keeps the tensor where it is.
  Tensor inplace = xc.clone(MemoryFormat::Preserve);
  const void* before = inplace.data_ptr();
  {
    NoGradGuard g;
    inplace.mul_(2);
  }
  CHECK(inplace.data_ptr() == before);
  CHECK(is_cl(inplace));
  check_close(inplace, x * 2, Tolerance::exact());

  Tensor leaf = x.contiguous(MemoryFormat::ChannelsLast).detach().requires_grad_();
  Tensor up = randn({2, 4, 3, 5}).contiguous(MemoryFormat::ChannelsLast);
  (leaf.relu() * up).sum().backward();
  CHECK(is_cl(leaf.grad()) | leaf.grad().is_contiguous());  // accumulated as given or copied
  check_close(leaf.grad(), up * sign(x).relu(), Tolerance::exact());
}

TEST_CASE("conv2d on channels-last input: NHWC out, the NCHW values and gradients") {
  manual_seed(3);
  struct Case {
    Shape in, wt, stride, pad, dil;
    int64_t groups;
  };
  std::vector<Case> cases = {
      {{2, 3, 9, 7}, {8, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{1, 16, 8, 8}, {16, 16, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},
      {{2, 8, 7, 9}, {12, 4, 3, 2}, {1, 2}, {0, 1}, {2, 1}, 2},
      {{3, 1, 6, 6}, {4, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Case& c : cases) {
      INFO("input " << shape_str(c.in) << " weight " << shape_str(c.wt) << " dtype " << dt);
      auto opts = TensorOptions{}.dtype(dt);
      Tensor x = randn(c.in, opts), w = randn(c.wt, opts), b = randn({c.wt[0]}, opts);
      Tensor xn = x.detach().requires_grad_(), wn = w.detach().requires_grad_(), bn = b.detach().requires_grad_();
      Tensor yn = conv2d(xn, wn, bn, c.stride, c.pad, c.dil, c.groups);
      Tensor gy = randn(yn.sizes(), opts);
      (yn * gy).sum().backward();

      // clone, not contiguous: with one input channel x is already dense in both formats, and
      // only the strides of a clone say channels-last.
      Tensor xl = x.clone(MemoryFormat::ChannelsLast).detach().requires_grad_();
      Tensor wl = w.detach().requires_grad_(), bl = b.detach().requires_grad_();
      Tensor yl = conv2d(xl, wl, bl, c.stride, c.pad, c.dil, c.groups);
      CHECK(yl.suggest_memory_format() == MemoryFormat::ChannelsLast);
      CHECK(yl.is_contiguous(MemoryFormat::ChannelsLast));
      (yl * gy.contiguous(MemoryFormat::ChannelsLast)).sum().backward();
      const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-4 : 1e-12);
      check_close(yl, yn, tol);
      check_close(xl.grad(), xn.grad(), tol);
      check_close(wl.grad(), wn.grad(), tol);
      check_close(bl.grad(), bn.grad(), tol);

      // The backward kernels on their own: channels-last grad_out gives a channels-last grad_input.
      Tensor gx = ops::conv2d_backward_input(gy.contiguous(MemoryFormat::ChannelsLast), c.in, w, c.stride, c.pad,
                                             c.dil, c.groups);
      CHECK(gx.suggest_memory_format() == MemoryFormat::ChannelsLast);
      check_close(gx, xn.grad(), tol);
      // Mixed: NCHW grad_out with a channels-last input still gives the right weight gradient.
      Tensor gw = ops::conv2d_backward_weight(gy, x.contiguous(MemoryFormat::ChannelsLast), c.wt, c.stride, c.pad,
                                              c.dil, c.groups);
      check_close(gw, wn.grad(), tol);
    }
  }
}

TEST_CASE("max_pool2d on channels-last input: NHWC values and indices, the same gradient") {
  manual_seed(4);
  struct Case {
    Shape in, k, s, p, d;
    bool ceil;
  };
  std::vector<Case> cases = {
      {{2, 5, 8, 8}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
      {{1, 3, 7, 9}, {3, 3}, {2, 1}, {1, 1}, {1, 2}, true},
      {{2, 4, 1, 1}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, false},  // 1x1 planes padded to a 2x2 output
      {{3, 1, 6, 5}, {2, 3}, {2, 2}, {0, 1}, {1, 1}, false},
  };
  for (const Case& c : cases) {
    INFO("input " << shape_str(c.in));
    Tensor x = randn(c.in);
    {
      NoGradGuard g;
      x[0][0][0][0].fill_(std::nan(""));  // NaN wins, with its own index
    }
    auto rn = ops::max_pool2d_with_indices(x, c.k, c.s, c.p, c.d, c.ceil);
    Tensor xl = x.clone(MemoryFormat::ChannelsLast);
    auto rl = ops::max_pool2d_with_indices(xl, c.k, c.s, c.p, c.d, c.ceil);
    CHECK(rl[0].is_contiguous(MemoryFormat::ChannelsLast));
    CHECK(rl[1].is_contiguous(MemoryFormat::ChannelsLast));
    std::vector<double> vn = values(rn[0]), vl = values(rl[0]);
    REQUIRE(vn.size() == vl.size());
    for (size_t i = 0; i < vn.size(); ++i) CHECK(((std::isnan(vn[i]) && std::isnan(vl[i])) || vn[i] == vl[i]));
    CHECK(values(rl[1]) == values(rn[1]));

    Tensor gy = randn(rn[0].sizes());
    Tensor gn = ops::max_pool2d_backward(gy, rn[1], x.sizes(), false);
    Tensor gl = ops::max_pool2d_backward(gy, rl[1], xl.sizes(), true);  // NCHW grad_out (as after a flatten)
    CHECK(gl.is_contiguous(MemoryFormat::ChannelsLast));
    CHECK(values(gl) == values(gn));
    Tensor gl2 = ops::max_pool2d_backward(gy.contiguous(MemoryFormat::ChannelsLast), rl[1], xl.sizes(), true);
    CHECK(values(gl2) == values(gn));
  }
  Tensor xl = randn({1, 2, 4, 4}).contiguous(MemoryFormat::ChannelsLast);
  auto r = ops::max_pool2d_with_indices(xl, {2, 2}, {2, 2}, {0, 0}, {1, 1}, false);
  Tensor bad = r[1].clone(MemoryFormat::Preserve);
  {
    NoGradGuard g;
    bad.fill_(99);
  }
  CHECK_THROWS_WITH(ops::max_pool2d_backward(randn({1, 2, 2, 2}), bad, xl.sizes(), true), Catch::Contains("max_pool2d_backward"));
}

TEST_CASE("avg_pool2d on channels-last input: NHWC values, the same gradient") {
  manual_seed(8);
  struct Case {
    Shape in, k, s, p;
    bool ceil, include_pad;
  };
  std::vector<Case> cases = {
      {{2, 5, 8, 8}, {2, 2}, {2, 2}, {0, 0}, false, true},
      {{1, 3, 7, 9}, {3, 3}, {2, 1}, {1, 1}, true, false},
      {{2, 3, 7, 7}, {3, 2}, {2, 2}, {1, 1}, true, true},
  };
  for (DType dt : {kFloat32, kFloat64}) {
    for (const Case& c : cases) {
      INFO("input " << shape_str(c.in) << " dtype " << dt);
      Tensor x = randn(c.in, TensorOptions{}.dtype(dt));
      Tensor xl = x.clone(MemoryFormat::ChannelsLast);
      Tensor yn = ops::avg_pool2d(x, c.k, c.s, c.p, c.ceil, c.include_pad);
      Tensor yl = ops::avg_pool2d(xl, c.k, c.s, c.p, c.ceil, c.include_pad);
      CHECK(yl.suggest_memory_format() == MemoryFormat::ChannelsLast);
      const Tolerance tol = Tolerance::within(dt == kFloat32 ? 1e-6 : 1e-14);
      check_close(yl, yn, tol);
      Tensor gy = randn(yn.sizes(), TensorOptions{}.dtype(dt));
      Tensor gn = ops::avg_pool2d_backward(gy, x, c.k, c.s, c.p, c.ceil, c.include_pad);
      for (const Tensor& g : {gy, gy.contiguous(MemoryFormat::ChannelsLast)}) {
        Tensor gl = ops::avg_pool2d_backward(g, xl, c.k, c.s, c.p, c.ceil, c.include_pad);
        CHECK(gl.suggest_memory_format() == MemoryFormat::ChannelsLast);
        check_close(gl, gn, tol);
      }
    }
  }
}

TEST_CASE("a channels-last CNN step matches the NCHW step") {
  manual_seed(5);
  Tensor x = randn({4, 1, 12, 12}), y = randint(0, 10, {4});
  Tensor c1 = randn({8, 1, 3, 3}) * 0.3, c2 = randn({16, 8, 3, 3}) * 0.1, f = randn({10, 16 * 3 * 3}) * 0.1;
  auto step = [&](bool cl) {
    // As PyTorch's model.to(memory_format=channels_last): weights and input channels-last. With one
    // input channel the input is already dense in both formats; the first weight decides.
    auto fmt = cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
    Tensor a = c1.clone(fmt).requires_grad_(), b = c2.clone(fmt).requires_grad_(), l = f.detach().requires_grad_();
    Tensor in = x.contiguous(fmt);
    CHECK(in.is_same(x));
    Tensor h = max_pool2d(conv2d(in, a, {}, {1, 1}, {1, 1}).relu(), {2, 2});
    h = max_pool2d(conv2d(h, b, {}, {1, 1}, {1, 1}).relu(), {2, 2});
    if (cl) CHECK(h.suggest_memory_format() == MemoryFormat::ChannelsLast);
    Tensor loss = cross_entropy(linear(h.flatten(1), l), y);
    loss.backward();
    return std::vector<Tensor>{loss.detach(), a.grad(), b.grad(), l.grad()};
  };
  auto n = step(false), c = step(true);
  for (size_t i = 0; i < n.size(); ++i) check_close(c[i], n[i], Tolerance::within(1e-5));
}

TEST_CASE("the convolution's reordered weights are cached until the weights change") {
  manual_seed(6);
  kernels::clear_conv_weight_cache();
  Tensor x = randn({2, 16, 8, 8}).contiguous(MemoryFormat::ChannelsLast);
  Tensor w = randn({32, 16, 3, 3});
  Tensor y1 = ops::conv2d(x, w, {}, {1, 1}, {1, 1});
  auto s1 = kernels::conv_weight_cache_stats();
  Tensor y2 = ops::conv2d(x, w, {}, {1, 1}, {1, 1});
  auto s2 = kernels::conv_weight_cache_stats();
  check_close(y2, y1, Tolerance::exact());
  if (s1.misses == 0) {
    // oneDNN took the plain weights as they are on this CPU: nothing to cache.
    CHECK(s2.hits == 0);
    SUCCEED("no weight reorder on this CPU");
  } else {
    CHECK(s1.misses == 1);
    CHECK(s2.hits == s1.hits + 1);
    CHECK(s2.misses == s1.misses);
  }
  // An in-place update (what optimizer.step() does) bumps the version: the next call reorders again
  // and sees the new values.
  {
    NoGradGuard g;
    w.mul_(2);
  }
  Tensor y3 = ops::conv2d(x, w, {}, {1, 1}, {1, 1});
  check_close(y3, y1 * 2, Tolerance::within(1e-4));
  auto s3 = kernels::conv_weight_cache_stats();
  if (s1.misses > 0) CHECK(s3.misses == s2.misses + 1);
  // A write through a view of the weights is seen too.
  {
    NoGradGuard g;
    w.slice(0, 0, 1).zero_();
  }
  Tensor y4 = ops::conv2d(x, w, {}, {1, 1}, {1, 1});
  CHECK(values(y4.select(1, 0).abs().sum())[0] == 0.0);
  check_close(y4.slice(1, 1, 32), y3.slice(1, 1, 32), Tolerance::within(1e-5));
  // The copy of the old version is dropped with the new one made: an optimizer's steps leave one
  // copy per weight and layout, not one per step until the cache is full.
  if (s1.misses > 0) {
    CHECK(kernels::conv_weight_cache_stats().entries == 1);
    const auto s4 = kernels::conv_weight_cache_stats();
    for (int i = 0; i < 5; ++i) {
      {
        NoGradGuard g;
        w.add_(1e-3);
      }
      (void)ops::conv2d(x, w, {}, {1, 1}, {1, 1});
    }
    CHECK(kernels::conv_weight_cache_stats().entries == 1);
    CHECK(kernels::conv_weight_cache_stats().misses == s4.misses + 5);
  }
  // A fresh weight tensor never matches the old entry, even at a recycled address.
  for (int i = 0; i < 3; ++i) {
    Tensor wi = randn({32, 16, 3, 3});
    Tensor xn = x.contiguous();
    check_close(ops::conv2d(x, wi, {}, {1, 1}, {1, 1}), ops::conv2d(xn, wi, {}, {1, 1}, {1, 1}),
                Tolerance::within(1e-4));
  }
  CHECK(kernels::conv_weight_cache_stats().entries <= 32);
}

TEST_CASE("Module::to(ChannelsLast) restrides 4-D parameters in place and the model runs NHWC") {
  manual_seed(7);
  auto conv = std::make_shared<nn::Conv2d>(1, 4, 3, 1, 1);
  Tensor w = conv->parameters()[0];
  REQUIRE(w.dim() == 4);
  CHECK(w.suggest_memory_format() == MemoryFormat::Contiguous);
  Tensor x = randn({2, 1, 6, 6});
  Tensor before = conv->forward(x);
  conv->to(MemoryFormat::ChannelsLast);
  CHECK(w.suggest_memory_format() == MemoryFormat::ChannelsLast);  // set_data: the same parameter
  CHECK(conv->parameters()[1].dim() == 1);                          // the bias is left alone
  Tensor after = conv->forward(x);
  CHECK(after.suggest_memory_format() == MemoryFormat::ChannelsLast);
  check_close(after, before, Tolerance::within(1e-5));
  conv->to(MemoryFormat::Contiguous);
  CHECK(w.suggest_memory_format() == MemoryFormat::Contiguous);
  check_close(conv->forward(x), before, Tolerance::within(1e-5));
}

TEST_CASE("an elementwise result follows a channels-last input past an operand expanded to its shape") {
  // PyTorch passes over broadcast operands when it picks the output's layout: a sum's backward
  // hands an expanded gradient to mul, whose result must keep the other input's channels-last.
  Tensor xl = randn({2, 3, 4, 5}).contiguous(MemoryFormat::ChannelsLast);
  Tensor g = ops::ones({}).expand({2, 3, 4, 5});
  CHECK(ops::mul(g, xl).is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(ops::mul(xl, g).is_contiguous(MemoryFormat::ChannelsLast));
  CHECK(values(ops::mul(g, xl)) == values(xl));
  // A row-major input first still decides: nothing changes for it.
  Tensor xc = randn({2, 3, 4, 5});
  CHECK(ops::add(xc, xl).is_contiguous());
  CHECK(ops::mul(g, xc).is_contiguous());
}
