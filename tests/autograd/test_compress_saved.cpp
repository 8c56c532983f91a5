// CompressSaved (autograd/compress_saved.h): what each saved slot becomes, exact gradients where
// the codec is exact (masks, exempt tensors), approximate ones within the codec's error, the
// safety rules, deduplication, and the in-place check on tensors kept as they are.
#include <catch2/catch.hpp>

#include <any>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <memory>
#include <string>
#include <vector>

#include "graft.h"
#include "support/error_message.h"

using namespace graft;
using namespace graft::autograd;
using Catch::Contains;

namespace {

std::vector<float> floats(const Tensor& t) { return t.to(kFloat32).contiguous().to_vector<float>(); }

// Relative error of a against the exact b: ||a - b|| / ||b||.
double rel_err(const Tensor& a, const Tensor& b) {
  std::vector<float> x = floats(a), y = floats(b);
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += (x[i] - y[i]) * static_cast<double>(x[i] - y[i]);
    den += y[i] * static_cast<double>(y[i]);
  }
  return std::sqrt(num / den);
}

std::map<std::string, int> count_actions(const std::vector<CompressDecision>& ds) {
  std::map<std::string, int> n;
  for (const auto& d : ds) ++n[d.action];
  return n;
}

// A small MLP (linear -> act -> linear -> act -> linear) and its parameters' gradients.
struct Mlp {
  std::shared_ptr<nn::Sequential> net;
  explicit Mlp(const std::string& act, uint64_t seed = 7) {
    manual_seed(seed);
    net = std::make_shared<nn::Sequential>();
    auto add_act = [&] {
      if (act == "relu") net->push_back(std::make_shared<nn::ReLU>());
      else if (act == "tanh") net->push_back(std::make_shared<nn::Tanh>());
      else net->push_back(std::make_shared<nn::GELU>());
    };
    net->push_back(std::make_shared<nn::Linear>(32, 64));
    add_act();
    net->push_back(std::make_shared<nn::Linear>(64, 64));
    add_act();
    net->push_back(std::make_shared<nn::Linear>(64, 10));
  }
  std::vector<Tensor> grads(const Tensor& x) {
    Tensor loss = (*net)(x).pow(2).mean();
    return autograd::grad({loss}, net->parameters());
  }
};

}  // namespace

TEST_CASE("relu saves a 1-bit mask under CompressSaved and its gradients are bit-identical") {
  Mlp m("relu");
  manual_seed(1);
  Tensor x = randn({16, 32});
  std::vector<Tensor> exact = m.grads(x);
  for (SavedCodec codec : {SavedCodec::kNone, SavedCodec::kBf16}) {
    std::vector<Tensor> got;
    CompressStats st;
    {
      CompressSaved hooks(CompressOptions{.codec = codec});
      got = m.grads(x);
      st = hooks.stats();
    }
    CHECK(st.masks == 2);
    if (codec == SavedCodec::kNone) {
      CHECK(st.compressed == 0);
      for (size_t i = 0; i < exact.size(); ++i) CHECK(floats(got[i]) == floats(exact[i]));
    } else {
      CHECK(st.compressed == 3);  // the three linears' inputs, in bf16 next to the masks
    }
  }
}

TEST_CASE("a relu mask passes the gradient where the input was NaN, as threshold_backward does") {
  Tensor x = tensor(std::vector<float>{1.0f, -1.0f, std::nanf(""), 0.0f, 2.0f}, {5}).requires_grad_();
  Tensor g = tensor(std::vector<float>{1, 2, 3, 4, 5}, {5});
  Tensor exact = autograd::grad({x.relu()}, {x}, {g})[0];
  Tensor masked;
  {
    CompressSaved hooks(CompressOptions{.codec = SavedCodec::kNone});
    masked = autograd::grad({x.relu()}, {x}, {g})[0];
  }
  CHECK(floats(masked) == floats(exact));
  CHECK(floats(masked) == std::vector<float>{1, 0, 3, 0, 5});
}

TEST_CASE("bf16 and int8 codecs give gradients within their error, and hold 1/2 and about 1/4 of the bytes") {
  for (const char* act : {"tanh", "gelu"}) {
    Mlp m(act);
    manual_seed(2);
    Tensor x = randn({64, 32});
    std::vector<Tensor> exact = m.grads(x);
    struct Want {
      SavedCodec codec;
      bool stochastic;
      double max_err, bytes_ratio_lo, bytes_ratio_hi;
    };
    for (const Want& w : {Want{SavedCodec::kBf16, false, 1e-2, 0.5, 0.5}, Want{SavedCodec::kInt8, false, 3e-2, 0.25, 0.3},
                          Want{SavedCodec::kInt8, true, 5e-2, 0.25, 0.3}}) {
      INFO(act << " " << codec_name(w.codec) << (w.stochastic ? " stochastic" : ""));
      std::vector<Tensor> got;
      CompressStats st;
      {
        CompressSaved hooks(CompressOptions{.codec = w.codec, .stochastic_rounding = w.stochastic, .seed = 9});
        got = m.grads(x);
        st = hooks.stats();
      }
      CHECK(st.compressed >= 3);  // tanh: x and the two results (each also a linear's input: deduplicated)
      const double ratio = static_cast<double>(st.bytes_out) / static_cast<double>(st.bytes_in);
      CHECK(ratio >= w.bytes_ratio_lo);
      CHECK(ratio <= w.bytes_ratio_hi);
      bool any_differs = false;
      for (size_t i = 0; i < exact.size(); ++i) {
        CHECK(rel_err(got[i], exact[i]) < w.max_err);
        any_differs = any_differs || floats(got[i]) != floats(exact[i]);
      }
      CHECK(any_differs);  // the codec really ran
    }
  }
}

TEST_CASE("parameters, their views and casts, softmax outputs and integer tensors are never compressed") {
  manual_seed(4);
  Tensor w = randn({8, 8}).requires_grad_();
  Tensor v = randn({8, 8}).requires_grad_();
  Tensor x0 = randn({4, 8}).requires_grad_();
  auto forward = [&] {
    Tensor x = x0 * 1;                          // an activation
    Tensor h = graft::mm(x, w.t());             // mm saves x (compressible) and w.t() (a parameter's view)
    Tensor p = graft::softmax(h, -1);           // softmax's own result: exact by declaration
    Tensor y = graft::mm(p, v);                 // mm saves p (a softmax output) and v (a parameter)
    Tensor e = graft::embedding(v, tensor(std::vector<int64_t>{1, 3}, {2}));  // int64 indices
    return y.sum() + e.sum();
  };
  std::vector<Tensor> exact = autograd::grad({forward()}, {w, v});
  std::vector<Tensor> got;
  std::vector<CompressDecision> ds;
  {
    CompressSaved hooks(CompressOptions{.codec = SavedCodec::kInt8, .record = true});
    got = autograd::grad({forward()}, {w, v});
    ds = hooks.decisions();
  }
  auto n = count_actions(ds);
  CHECK(n["exempt: parameter"] == 2);       // w.t() and v, saved by the two mm
  CHECK(n["exempt: softmax output"] == 1);  // p, saved by the second mm
  CHECK(n["int8"] == 1);                    // x
  for (const auto& d : ds) {
    if (d.action == "int8") CHECK(d.node == "MmBackward");
    if (d.tolerance == SaveTolerance::kExact) CHECK(d.action == "kept");
  }
  // Only x was compressed, and w's gradient is mm(grad, x)^T: approximate; v's is exact.
  CHECK(floats(got[1]) == floats(exact[1]));
  CHECK(rel_err(got[0], exact[0]) < 3e-2);
}

TEST_CASE("a tensor saved by two ops is packed once") {
  manual_seed(6);
  Tensor x = randn({16, 16}).requires_grad_();
  Tensor h = x * 2;  // a non-leaf activation
  CompressSaved hooks(CompressOptions{.codec = SavedCodec::kBf16, .record = true});
  Tensor a = graft::gelu(h);  // saves h
  Tensor b = graft::tanh(a);
  Tensor c = h * b;           // saves h again, and b, which tanh saved as its result
  auto st = hooks.stats();
  CHECK(st.compressed == 2);    // h and b, once each
  CHECK(st.deduplicated == 2);  // mul's two saves
  CHECK(st.bytes_in == 2 * 16 * 16 * 4);
  (void)c;
  auto n = count_actions(hooks.decisions());
  CHECK(n["deduplicated"] == 2);
}

TEST_CASE("a tensor kept exactly under CompressSaved still reports an in-place write at backward") {
  Tensor x = tensor(std::vector<float>{1, 2, 3}, {3}).requires_grad_();
  Tensor y = x * 1;
  Tensor z;
  {
    CompressSaved hooks;
    z = graft::softmax(y, 0);  // its result is saved exactly
  }
  z.mul_(2);  // through no_grad-free in-place on the saved output
  CHECK_THAT(test::error_message([&] { autograd::grad({z.sum()}, {x}); }), Contains("modified by an inplace operation"));
}

TEST_CASE("parse_saved_codec names the codecs it knows") {
  CHECK(parse_saved_codec("int8") == SavedCodec::kInt8);
  CHECK(std::string(codec_name(parse_saved_codec("bf16"))) == "bf16");
  CHECK_THAT(test::error_message([] { parse_saved_codec("fp4"); }),
             Contains("unknown saved-tensor codec 'fp4' (expected none, bf16 or int8)"));
}

TEST_CASE("dropout saves its 0/1 draw as a 1-bit mask and its gradients are bit-identical") {
  manual_seed(3);
  Tensor x = randn({32, 17}).requires_grad_();
  Tensor g = randn({32, 17});
  for (DType dt : {kFloat32, kBFloat16}) {
    auto run = [&](bool compress, CompressStats* st) {
      manual_seed(8);
      std::optional<CompressSaved> hooks;
      if (compress) hooks.emplace(CompressOptions{.codec = SavedCodec::kNone});
      Tensor y = nn::functional::dropout(x.to(dt), 0.3, /*training=*/true);
      if (st) *st = hooks->stats();
      hooks.reset();
      return std::pair<Tensor, Tensor>{y, autograd::grad({y}, {x}, {g.to(dt)})[0]};
    };
    CompressStats st;
    auto [y0, g0] = run(false, nullptr);
    auto [y1, g1] = run(true, &st);
    CHECK(st.masks == 1);
    CHECK(st.bytes_out == (32 * 17 + 7) / 8);
    CHECK(floats(y1) == floats(y0));
    CHECK(floats(g1) == floats(g0));
    // y is x * (1 / 0.7) where kept (the scale rounded in the dtype) and 0 elsewhere.
    Tensor s = ops::full({}, 1.0, dt);
    ops::div_(s, 0.7);
    std::vector<float> xs = floats(x.to(dt)), ys = floats(y0);
    const float sv = floats(s)[0];
    int kept = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      if (ys[i] != 0) {
        ++kept;
        CHECK(ys[i] == floats(tensor(std::vector<float>{xs[i] * sv}, {1}).to(dt))[0]);
      }
    }
    CHECK(kept > 300);  // about 70% of 544
    CHECK(kept < 460);
  }
}

TEST_CASE("relu's backward writes into its incoming gradient when nothing else holds it, with the same bits") {
  manual_seed(12);
  const int64_t n = 512 * 512;  // 1 MiB of float32
  Tensor x = randn({n}).requires_grad_();
  Tensor w = randn({n});
  auto peak_of_backward = [&](bool hold_gradient, Tensor* gx) {
    Tensor h = x * 1.0;
    Tensor y = graft::relu(h);
    Tensor z = y * w;  // mul's backward hands relu a fresh gradient of its own
    Tensor held;
    if (hold_gradient) y.register_hook([&](const Tensor& g) {  // a second holder
      held = g;
      return Tensor();
    });
    Allocator* a = get_allocator(kCPU);
    a->reset_peak_stats();
    const int64_t base = a->stats().allocated_bytes;
    *gx = autograd::grad({z.sum()}, {x})[0];
    return a->stats().peak_allocated_bytes - base;
  };
  Tensor in_place, out_of_place;
  const int64_t p_in = peak_of_backward(false, &in_place);
  const int64_t p_out = peak_of_backward(true, &out_of_place);
  CHECK(floats(in_place) == floats(out_of_place));
  CHECK(p_out - p_in >= n * 4 * 9 / 10);  // one gradient-sized buffer fewer
  // A gradient handed to two nodes (add's backward gives both inputs the same tensor) is not owned.
  Tensor h = x * 1.0;
  Tensor g2 = autograd::grad({(graft::relu(h) + graft::relu(h)).sum()}, {x})[0];
  std::vector<float> xs = floats(x), gs = floats(g2);
  for (size_t i = 0; i < xs.size(); i += 997) CHECK(gs[i] == (xs[i] > 0 ? 2.0f : 0.0f));
}

TEST_CASE("a relu mask decodes to bool and its backward writes into the gradient: no float mask at the peak") {
  manual_seed(14);
  const int64_t n = 512 * 512;  // 1 MiB of float32
  Tensor x = randn({n}).requires_grad_();
  Tensor w = randn({n});
  // The backward's peak above its start, and x's gradient, with relu under `hooks` (none: plain).
  auto run = [&](bool compress, bool hold_gradient, Tensor* gx) {
    Tensor y, z;
    {
      std::optional<CompressSaved> hooks;
      if (compress) hooks.emplace(CompressOptions{.codec = SavedCodec::kNone});
      y = graft::relu(x);  // x's gradient is relu's result: nothing after it allocates
    }
    z = y * w;  // w is no activation: only relu's output is packed
    Tensor held;
    if (hold_gradient) y.register_hook([&](const Tensor& g) {
      held = g;
      return Tensor();
    });
    y = Tensor();
    Allocator* a = get_allocator(kCPU);
    a->reset_peak_stats();
    const int64_t base = a->stats().allocated_bytes;
    *gx = autograd::grad({z.sum()}, {x})[0];
    return a->stats().peak_allocated_bytes - base;
  };
  Tensor plain, in_place, out_of_place;
  run(false, false, &plain);
  const int64_t p_in = run(true, false, &in_place);
  const int64_t p_out = run(true, true, &out_of_place);
  CHECK(floats(in_place) == floats(plain));
  CHECK(floats(out_of_place) == floats(plain));
  // In place: the incoming gradient (4 n bytes) and the bool mask (n); a float mask would be 4 n.
  INFO("in place " << p_in << ", out of place " << p_out);
  CHECK(p_in <= n * 4 + n + 4096);
  CHECK(p_out - p_in >= n * 4 * 9 / 10);  // out of place: one gradient-sized buffer more
  // The engine takes a bool mask only for a sign-only slot: any other save still has to come back
  // in its own dtype.
  Tensor v = randn({4}).requires_grad_();
  Tensor e;
  {
    autograd::SavedTensorsHooks bad([](const Tensor& t) -> autograd::Packed { return t; },
                                    [](const autograd::Packed& p) { return ops::gt(std::any_cast<Tensor>(p), 0); });
    e = (v * 1.0).exp();
  }
  CHECK_THROWS_WITH(e.sum().backward(), Catch::Matchers::Contains("must return a tensor with the same shape, dtype") &&
                                            Catch::Matchers::Contains("expected [4] float32 cpu, got [4] bool cpu"));
}

TEST_CASE("current_save_site names the saving node and its tolerance during a pack call, and is null outside") {
  CHECK(current_save_site() == nullptr);
  Tensor w = randn({4, 4}).requires_grad_();
  Tensor x = randn({3, 4}) * 1.0;
  std::vector<std::string> seen;
  {
    SavedTensorsHooks hooks(
        [&](const Tensor& t) -> Packed {
          const SaveSite* s = current_save_site();
          REQUIRE(s != nullptr);
          REQUIRE(s->node != nullptr);
          seen.push_back(s->node->name() + (s->tolerance == SaveTolerance::kLossy ? " lossy" : s->tolerance == SaveTolerance::kSignOnly ? " sign" : " exact") +
                         (s->from_parameter() ? " parameter" : ""));
          return t;
        },
        [](const Packed& p) -> Tensor { return std::any_cast<const Tensor&>(p); });
    graft::relu(graft::mm(x, w));
  }
  CHECK(current_save_site() == nullptr);
  CHECK(seen == std::vector<std::string>{"MmBackward lossy", "ReluBackward sign"});
}

TEST_CASE("masks and int8 codes of a channels-last tensor decode in its layout, so relu's backward stays in place") {
  manual_seed(13);
  Tensor x = randn({4, 8, 16, 16}).contiguous(MemoryFormat::ChannelsLast).requires_grad_();
  // A parameter: never compressed, so x's gradient passes only through relu's exact mask.
  Tensor w = randn({4, 8, 16, 16}).contiguous(MemoryFormat::ChannelsLast).requires_grad_();
  Tensor gx_plain;
  {
    Tensor h = x * 1.0;
    gx_plain = autograd::grad({(graft::relu(h) * w).sum()}, {x})[0];
  }
  for (SavedCodec c : {SavedCodec::kBf16, SavedCodec::kInt8}) {
    INFO("codec " << codec_name(c));
    Tensor h = x * 1.0, y;
    {
      CompressSaved hooks(CompressOptions{.codec = c});
      y = graft::relu(h) * w;
    }
    Tensor gx = autograd::grad({y.sum()}, {x})[0];
    CHECK(gx.is_contiguous(MemoryFormat::ChannelsLast) == gx_plain.is_contiguous(MemoryFormat::ChannelsLast));
    CHECK(floats(gx) == floats(gx_plain));
  }
  // int8 codes of channels-last activations decode with their strides and the per-channel scale of
  // their channel dim (1), as a contiguous copy's do: the same gradient, bit for bit.
  Tensor t = randn({2, 3, 5, 7}).contiguous(MemoryFormat::ChannelsLast);
  Tensor part = x.detach().narrow(1, 0, 3).narrow(2, 0, 5).narrow(3, 0, 7).contiguous(MemoryFormat::ChannelsLast);
  for (const Tensor& s : {t, part}) {
    auto grad_of_square = [](const Tensor& v) {
      Tensor leaf = v.detach().requires_grad_();
      Tensor h = leaf * 1.0, q;
      {
        CompressSaved hooks(CompressOptions{.codec = SavedCodec::kInt8});
        q = h * h;  // saves h twice (packed once) as int8
      }
      Tensor g = autograd::grad({q.sum()}, {leaf})[0];  // 2 h, from the decoded h
      return std::make_pair(g, h);
    };
    auto [got, h_cl] = grad_of_square(s);
    auto [want, h_nchw] = grad_of_square(s.contiguous());
    REQUIRE(h_cl.is_contiguous(MemoryFormat::ChannelsLast));
    REQUIRE(h_nchw.is_contiguous());
    CHECK(floats(got) == floats(want));
    CHECK(rel_err(got, s * 2.0) < 1e-2);
  }
}

TEST_CASE("a bf16 save of a strided view (a head of a fused qkv) decodes in the view's memory order") {
  // As nn::MultiheadAttention splits heads: views of one [N, L, 3 * H * D] projection, [N, H, L, D]
  // by transpose. Decoded row-major, sdpa's gradients came back row-major in [N, H, L, D], and the
  // backward of the heads' view copied each of them to merge the heads.
  manual_seed(21);
  const int64_t N = 6, L = 5, H = 2, D = 4;
  Tensor x = randn({N, L, 3 * H * D}).requires_grad_();
  auto step = [&](bool packed, OpProfiler& prof) {
    Tensor qkv = x * 1.0, y;
    {
      std::optional<CompressSaved> hooks;
      if (packed) hooks.emplace(CompressOptions{.codec = SavedCodec::kBf16, .record = true});
      std::vector<Tensor> parts = qkv.split(H * D, -1);
      auto heads = [&](const Tensor& t) { return t.view({N, L, H, D}).transpose(1, 2); };
      Tensor out = scaled_dot_product_attention(heads(parts[0]), heads(parts[1]), heads(parts[2]));
      y = out.transpose(1, 2).reshape({N, L, H * D}) * parts[0];
      if (packed) CHECK(count_actions(hooks->decisions())["bf16"] >= 3);
    }
    OpProfiler::Scope on(prof);
    return autograd::grad({y.pow(2).sum()}, {x})[0];
  };
  auto copies = [](const OpProfiler& p) {
    int64_t n = 0;
    for (const OpProfiler::Row& r : p.rows())
      if (r.name == "clone" || r.name == "copy_" || r.name == "contiguous") n += r.calls;
    return n;
  };
  OpProfiler plain_prof, packed_prof;
  Tensor want = step(false, plain_prof), got = step(true, packed_prof);
  CHECK(copies(packed_prof) == copies(plain_prof));
  CHECK(got.strides() == want.strides());
  CHECK(rel_err(got, want) < 1e-2);
  CHECK(rel_err(got, want) > 0);  // the saves were rounded
}
