// MultiheadAttention, TransformerEncoderLayer/Encoder and the ViT against values PyTorch 2.15
// produced for fixed weights (tests/nn/data/transformer_fixture.safetensors, made by
// make_transformer_fixture.py beside it): the state dicts load by PyTorch's names, outputs and
// gradients match; PyTorch's initialisation rules; per-block checkpointing is bit-identical.
#include <catch2/catch.hpp>

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

const std::map<std::string, Tensor>& fixture() { return safetensors_fixture("transformer_fixture.safetensors"); }
const Tensor& fx(const std::string& name) { return fixture().at(name); }

// The entries under "prefix." with the prefix removed, as a state dict.
nn::StateDict state(const std::string& prefix) {
  nn::StateDict d;
  for (const auto& [k, v] : fixture())
    if (k.rfind(prefix + ".", 0) == 0) {
      std::string rest = k.substr(prefix.size() + 1);
      if (rest.rfind("in.", 0) != 0 && rest.rfind("out.", 0) != 0 && rest.rfind("out_padded", 0) != 0 &&
          rest != "out" && rest.rfind("grad.", 0) != 0)
        d.insert(rest, v);
    }
  return d;
}

// nn.Transformer.generate_square_subsequent_mask: -inf above the diagonal, 0 elsewhere.
Tensor causal_float_mask(int64_t n) {
  Tensor i = arange(n).view({n, 1}), j = arange(n).view({1, n});
  return masked_fill(zeros({n, n}), ops::gt(j, i), -std::numeric_limits<double>::infinity());
}

nn::TransformerEncoderLayerOptions fixture_layer(bool norm_first) {
  nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = 32;
  o.dropout = 0.0;
  o.activation = norm_first ? "gelu" : "relu";
  o.batch_first = true;
  o.norm_first = norm_first;
  return o;
}

}  // namespace

TEST_CASE("MultiheadAttention loads PyTorch's state dict and gives its outputs for every mask kind") {
  nn::MultiheadAttentionOptions o;
  o.batch_first = true;
  auto mha = std::make_shared<nn::MultiheadAttention>(16, 4, o);
  CHECK(mha->state_dict().keys() == std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"});
  mha->load_state_dict(state("mha"));  // strict: every name matches
  mha->eval();
  const Tensor &q = fx("mha.in.query"), &k = fx("mha.in.key"), &v = fx("mha.in.value");
  const Tolerance tol{.rtol = 0, .atol = 2e-6};

  auto [self, self_w] = mha->forward(q, q, q);
  check_close(self, fx("mha.out.self"), tol);
  check_close(self_w, fx("mha.out.self_weights"), tol);
  check_close((*mha)(q), fx("mha.out.self"), tol);  // the fused path, no weights

  nn::MhaForwardOptions fo;
  fo.need_weights = false;
  check_close(mha->forward(q, k, v, fo).first, fx("mha.out.cross"), tol);
  for (bool need_weights : {false, true}) {
    INFO("need_weights " << need_weights);
    nn::MhaForwardOptions m;
    m.need_weights = need_weights;
    m.attn_mask = fx("mha.in.attn_mask_bool");
    check_close(mha->forward(q, k, v, m).first, fx("mha.out.cross_bool_mask"), tol);
    m.attn_mask = fx("mha.in.attn_mask_float");
    check_close(mha->forward(q, k, v, m).first, fx("mha.out.cross_float_mask"), tol);
    m.attn_mask = Tensor();
    m.key_padding_mask = fx("mha.in.key_padding_mask");
    check_close(mha->forward(q, k, v, m).first, fx("mha.out.key_padding"), tol);
    nn::MhaForwardOptions c;
    c.need_weights = need_weights;
    c.is_causal = true;
    c.attn_mask = causal_float_mask(5);
    check_close(mha->forward(q, q, q, c).first, fx("mha.out.causal"), tol);
  }
  nn::MhaForwardOptions per_head;
  per_head.average_attn_weights = false;
  check_close(mha->forward(q, k, v, per_head).second, fx("mha.out.cross_weights_per_head"), tol);

  // Sequence-first and unbatched inputs give the same numbers.
  nn::MultiheadAttention seq_first(16, 4);
  seq_first.load_state_dict(state("mha"));
  check_close(seq_first.forward(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), fo).first.transpose(0, 1),
              fx("mha.out.cross"), tol);
  check_close(mha->forward(q.select(0, 1), k.select(0, 1), v.select(0, 1), fo).first, fx("mha.out.cross").select(0, 1),
              tol);
}

TEST_CASE("TransformerEncoderLayer gives PyTorch's outputs pre-norm with GELU and post-norm with ReLU") {
  const Tensor& src = fx("enc.in.src");
  const Tensor& pad = fx("enc.in.src_key_padding_mask");
  for (bool norm_first : {true, false}) {
    std::string p = norm_first ? "enc_pre" : "enc_post";
    INFO(p);
    nn::TransformerEncoderLayer layer(16, 4, fixture_layer(norm_first));
    layer.load_state_dict(state(p));
    layer.eval();
    check_close(layer(src), fx(p + ".out"), {.rtol = 0, .atol = 2e-6});
    check_close(layer.forward(src, {}, pad), fx(p + ".out_padded"), {.rtol = 0, .atol = 2e-6});
  }
}

TEST_CASE("a ViT written with torch.nn loads into VisionTransformer by name and gives its logits and gradients") {
  nn::VisionTransformerOptions o;
  o.dim = 16;
  o.depth = 2;
  o.heads = 4;
  o.mlp_dim = 32;
  auto vit = std::make_shared<nn::VisionTransformer>(o);
  nn::StateDict sd = state("vit");
  REQUIRE(sd.size() == vit->state_dict().size());
  vit->load_state_dict(sd);
  Tensor logits = (*vit)(fx("vit.in.x"));
  check_close(logits, fx("vit.out.logits"), {.rtol = 0, .atol = 1e-5});
  Tensor loss = cross_entropy(logits, fx("vit.in.labels"));
  CHECK(loss.item<double>() == Approx(fx("vit.out.loss").item<double>()).epsilon(1e-5));
  loss.backward();
  for (const auto& [name, p] : vit->named_parameters()) {
    INFO(name);
    REQUIRE(p.grad().defined());
    check_close(p.grad(), fx("vit.grad." + name), {.rtol = 0, .atol = 2e-5});
  }
  // The stages are the same computation.
  check_close((*vit->stages())(fx("vit.in.x")), logits, Tolerance::exact());
}

TEST_CASE("transformer modules initialise as PyTorch") {
  manual_seed(0);
  nn::MultiheadAttention mha(64, 4);
  double bound = std::sqrt(6.0 / (64 + 3 * 64));  // xavier_uniform_ over [3E, E]
  CHECK(mha.in_proj_weight.abs().max().item<double>() <= bound);
  CHECK(mha.in_proj_weight.abs().max().item<double>() > 0.95 * bound);
  CHECK(mha.in_proj_bias.abs().max().item<double>() == 0);
  CHECK(mha.out_proj->bias.abs().max().item<double>() == 0);
  CHECK(mha.out_proj->weight.abs().max().item<double>() <= 0.125);  // Linear's U(+-1/sqrt(64))
  CHECK(mha.out_proj->weight.abs().max().item<double>() > 0.12);

  nn::TransformerEncoderLayerOptions lo;
  lo.dim_feedforward = 128;
  nn::TransformerEncoderLayer layer(64, 4, lo);
  CHECK(layer.linear1->bias.abs().max().item<double>() > 0);  // Linear's default, not zero
  nn::TransformerEncoder enc(layer, 3);
  CHECK(enc.state_dict().size() == 3 * layer.state_dict().size());
  CHECK(enc.state_dict().contains("layers.2.self_attn.in_proj_weight"));
  // Copies of the given layer (torch.nn.TransformerEncoder deep-copies), not views of it.
  check_close(enc.layers[2]->linear1->weight, layer.linear1->weight, Tolerance::exact());
  CHECK_FALSE(enc.layers[2]->linear1->weight.is_same(layer.linear1->weight));
}

TEST_CASE("per-block checkpointing of the ViT gives bit-identical gradients") {
  manual_seed(4);
  nn::VisionTransformerOptions o;
  o.dim = 32;
  o.depth = 4;
  o.heads = 4;
  o.mlp_dim = 64;
  auto vit = std::make_shared<nn::VisionTransformer>(o);
  auto stages = vit->stages();
  Tensor x = randn({8, 1, 28, 28}), y = randint(0, 10, {8});
  std::vector<nn::Layer> layers;
  for (const auto& m : *stages) layers.push_back([m](const Tensor& h) { return (*m)(h); });
  auto grads = [&](int mode) {
    vit->zero_grad();
    Tensor out = mode == 0 ? (*vit)(x) : mode == 1 ? nn::checkpoint_sequential(layers, 3, x) : nn::checkpoint_nested(layers, x);
    cross_entropy(out, y).backward();
    std::vector<Tensor> g;
    for (auto& p : vit->parameters()) g.push_back(p.grad().clone());
    return g;
  };
  auto plain = grads(0), sqrt_n = grads(1), nested = grads(2);
  for (size_t i = 0; i < plain.size(); ++i) {
    check_close(plain[i], sqrt_n[i], Tolerance::exact());
    check_close(plain[i], nested[i], Tolerance::exact());
  }
}

TEST_CASE("transformer modules reject bad sizes and masks with the shapes") {
  CHECK_THROWS_WITH(nn::MultiheadAttention(10, 4), Catch::Contains("divisible"));
  nn::MultiheadAttentionOptions o;
  o.batch_first = true;
  nn::MultiheadAttention mha(8, 2, o);
  Tensor q = randn({2, 3, 8}), k = randn({2, 4, 8});
  CHECK_THROWS_WITH(mha.forward(q, k, randn({2, 5, 8})), Catch::Contains("[2, 5, 8]"));
  CHECK_THROWS_WITH(mha.forward(randn({2, 3, 6}), k, k), Catch::Contains("embed_dim 8"));
  nn::MhaForwardOptions m;
  m.attn_mask = ones({4, 3}, dtype(kBool));
  CHECK_THROWS_WITH(mha.forward(q, k, k, m), Catch::Contains("attn_mask") && Catch::Contains("[3, 4]"));
  nn::MhaForwardOptions c;
  c.is_causal = true;
  CHECK_THROWS_WITH(mha.forward(q, q, q, c), Catch::Contains("is_causal"));
  nn::MhaForwardOptions p;
  p.key_padding_mask = ones({2, 3}, dtype(kBool));
  CHECK_THROWS_WITH(mha.forward(q, k, k, p), Catch::Contains("key_padding_mask"));
  CHECK_THROWS_WITH(nn::TransformerEncoderLayer(8, 2, {.activation = "tanh"}), Catch::Contains("tanh"));
  nn::PatchEmbedding pe(1, 8, 7);
  CHECK_THROWS_WITH(pe(randn({1, 1, 30, 28})), Catch::Contains("patch_size 7"));
  nn::VisionTransformer on_stack({.dim = 8, .depth = 1, .heads = 2, .mlp_dim = 8});
  CHECK_THROWS_WITH(on_stack.stages(), Catch::Contains("shared_ptr"));
  nn::PositionalEmbedding pos(4, 8);
  CHECK_THROWS_WITH(pos(randn({1, 5, 8})), Catch::Contains("L <= 4"));
}

TEST_CASE("a batch-first encoder layer without dropout splits by rows: slices give the batch's output and gradients") {
  manual_seed(21);
  nn::TransformerEncoderLayerOptions o;
  o.dim_feedforward = 32;
  o.dropout = 0.0;
  o.activation = "gelu";
  o.batch_first = true;
  o.norm_first = true;
  auto layer = std::make_shared<nn::TransformerEncoderLayer>(16, 4, o);
  Tensor x = randn({8, 5, 16}).requires_grad_(true);
  CHECK(layer->splits_by_rows(x));
  CHECK_FALSE(layer->splits_by_rows(randn({5, 16})));  // unbatched
  nn::TransformerEncoderLayerOptions seq = o;
  seq.batch_first = false;  // [L, N, E]: dim 0 is the sequence
  CHECK_FALSE(nn::TransformerEncoderLayer(16, 4, seq).splits_by_rows(x));
  nn::TransformerEncoderLayerOptions drop = o;
  drop.dropout = 0.1;
  nn::TransformerEncoderLayer dropping(16, 4, drop);
  CHECK_FALSE(dropping.splits_by_rows(x));  // dropout draws per batch
  dropping.eval();
  CHECK(dropping.splits_by_rows(x));
  // By 4 slices of 2 rows, as the planner runs it: the whole batch's values up to rounding.
  const std::vector<Tensor> params = layer->parameters();
  std::vector<Tensor> wrt{x};
  wrt.insert(wrt.end(), params.begin(), params.end());
  Tensor probe = randn({8, 5, 16});
  Tensor whole = (*layer)(x);
  std::vector<Tensor> want = autograd::grad({sum(mul(whole, probe))}, wrt);
  Tensor sliced = autograd::checkpoint_rows([&](const Tensor& in) { return (*layer)(in); }, x, params, 4);
  check_close(sliced, whole, {.rtol = 1e-5, .atol = 1e-6});
  std::vector<Tensor> got = autograd::grad({sum(mul(sliced, probe))}, wrt);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) check_close(got[i], want[i], {.rtol = 1e-4, .atol = 1e-5});
}
