// nn::GPT: parameter names and GPT-2's initialisation, the KV cache against the full forward
// (prefill, one token at a time, chunks), its errors, and sampling with and without the cache.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "graft.h"
#include "support/check_close.h"
#include "support/fixtures.h"

using namespace graft;
using graft::test::check_close;
using graft::test::Tolerance;
using Catch::Matchers::Contains;

namespace {

nn::GPTConfig tiny() {
  nn::GPTConfig c;
  c.vocab_size = 11;
  c.block_size = 8;
  c.n_layer = 2;
  c.n_head = 2;
  c.n_embd = 16;
  return c;
}

Tensor ids(const std::vector<int64_t>& v, int64_t rows = 1) {
  return graft::tensor(v, {rows, static_cast<int64_t>(v.size()) / rows}, TensorOptions{}.dtype(kInt64));
}

}  // namespace

TEST_CASE("GPT: outputs and gradients match PyTorch's for fixed weights", "[gpt]") {
  // tests/nn/data/gpt_fixture.safetensors (make_gpt_fixture.py): tools/bench/pytorch_gpt.py's model
  // with float32 weights, the reference computed in float64 from the same values.
  const auto& fx = test::safetensors_fixture("gpt_fixture.safetensors");
  auto m = std::make_shared<nn::GPT>(tiny());
  nn::StateDict dict;
  for (const auto& [name, t] : fx)
    if (m->named_parameters().contains(name)) dict.insert(name, t);
  m->load_state_dict(dict, /*strict=*/true);  // every parameter by PyTorch's name
  const Tensor& idx = fx.at("idx");
  Tensor logits = m->forward(idx);
  // float32 against a float64 reference: PyTorch's own float32 result is within 3e-8; an atol of
  // 1e-6 still catches q and k swapped (2e-5).
  const Tolerance tol{.rtol = 1e-5, .atol = 1e-6, .check_dtype = false};
  check_close(logits, fx.at("logits"), tol);
  check_close(m->forward(idx.slice(1, 0, 5)), fx.at("logits_short"), tol);
  Tensor loss = graft::cross_entropy(logits.reshape({-1, 11}), fx.at("targets").flatten());
  check_close(loss, fx.at("loss"), tol);
  loss.backward();
  for (const auto& [name, p] : m->named_parameters()) {
    INFO(name);
    check_close(p.grad(), fx.at("grad." + name), Tolerance{.rtol = 1e-4, .atol = 1e-6, .check_dtype = false});
  }
}

TEST_CASE("GPT: parameter names, shapes and GPT-2's initialisation", "[gpt]") {
  manual_seed(0);
  nn::GPTConfig c;  // the baby GPT: 4 layers, 4 heads, width 128, context 64
  c.vocab_size = 96;
  auto m = std::make_shared<nn::GPT>(c);
  auto params = m->named_parameters();
  CHECK(params.size() == 2 + 4 * 12 + 2);
  CHECK(params.at("wte.weight").sizes() == Shape{96, 128});
  CHECK(params.at("wpe.weight").sizes() == Shape{64, 128});
  CHECK(params.at("h.3.attn.c_attn.weight").sizes() == Shape{384, 128});
  CHECK(params.at("h.0.mlp.c_fc.weight").sizes() == Shape{512, 128});
  CHECK(params.at("h.0.mlp.c_proj.weight").sizes() == Shape{128, 512});
  CHECK(params.at("ln_f.bias").sizes() == Shape{128});
  int64_t n = 0;
  for (const auto& [name, p] : params) n += p.numel();
  CHECK(n == 96 * 128 + 64 * 128 + 4 * (4 * 128 + 384 * 129 + 128 * 129 + 512 * 129 + 128 * 513) + 2 * 128);
  // Standard deviations of the draws (16k+ samples each: within 5% of the target).
  auto std_of = [](const Tensor& t) { return graft::std(t.flatten()).item<double>(); };
  CHECK(std_of(params.at("wte.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(std_of(params.at("h.1.attn.c_attn.weight")) == Approx(0.02).epsilon(0.05));
  CHECK(std_of(params.at("h.1.mlp.c_proj.weight")) == Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  CHECK(std_of(params.at("h.2.attn.c_proj.weight")) == Approx(0.02 / std::sqrt(8.0)).epsilon(0.05));
  auto max_abs = [](const Tensor& t) { return t.abs().max().item<double>(); };
  CHECK(max_abs(params.at("h.0.attn.c_attn.bias")) == 0);
  CHECK(max_abs(params.at("h.0.ln_1.weight") - 1.0) == 0);
  CHECK(max_abs(params.at("ln_f.bias")) == 0);
  // The head is tied: logits are x @ wte^T, so wte gets the head's gradient too.
  Tensor logits = m->forward(ids({1, 2, 3, 4}));
  CHECK(logits.sizes() == Shape{1, 4, 96});
  logits.sum().backward();
  CHECK(m->wte->weight.grad().abs().sum().item<double>() > 0);
}

TEST_CASE("GPT: the KV cache gives the full forward's logits", "[gpt]") {
  manual_seed(1);
  auto m = std::make_shared<nn::GPT>(tiny());
  m->eval();
  const std::vector<int64_t> seq{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};  // two rows of 8
  Tensor x = ids(seq, 2);
  Tensor full;
  {
    NoGradGuard ng;
    full = m->forward(x);  // [2, 8, 11]
  }
  InferenceMode im;
  SECTION("prefill, then one token at a time") {
    nn::GPTKVCache cache = m->make_cache(2);
    Tensor a = m->forward_cached(x.slice(1, 0, 3), cache);
    check_close(a, full.slice(1, 0, 3), Tolerance{1e-5, 1e-6});
    for (int64_t t = 3; t < 8; ++t)
      check_close(m->forward_cached(x.slice(1, t, t + 1), cache), full.slice(1, t, t + 1), Tolerance{1e-5, 1e-6});
    CHECK(cache.length() == 8);
    CHECK_THROWS_WITH(m->forward_cached(x.slice(1, 0, 1), cache), Contains("block_size"));
    cache.clear();
    check_close(m->forward_cached(x.slice(1, 0, 2), cache), full.slice(1, 0, 2), Tolerance{1e-5, 1e-6});
  }
  SECTION("chunks after a prefix: the causal rule aligned to the newest position") {
    nn::GPTKVCache cache = m->make_cache(2);
    m->forward_cached(x.slice(1, 0, 2), cache);
    check_close(m->forward_cached(x.slice(1, 2, 5), cache), full.slice(1, 2, 5), Tolerance{1e-5, 1e-6});
    check_close(m->forward_cached(x.slice(1, 5, 8), cache), full.slice(1, 5, 8), Tolerance{1e-5, 1e-6});
  }
  SECTION("errors name what is wrong") {
    nn::GPTKVCache cache = m->make_cache(1);
    CHECK_THROWS_WITH(m->forward_cached(x, cache), Contains("batch of 1"));
    CHECK_THROWS_WITH(m->forward(ids({1, 2, 3, 4, 5, 6, 7, 8, 9})), Contains("block_size"));
    CHECK_THROWS_WITH(m->forward(x.to(kFloat32)), Contains("int64"));
  }
}

TEST_CASE("GPT: forward_cached refuses to record autograd history", "[gpt]") {
  auto m = std::make_shared<nn::GPT>(tiny());
  nn::GPTKVCache cache = m->make_cache(1);
  CHECK_THROWS_WITH(m->forward_cached(ids({1, 2}), cache), Contains("InferenceMode"));
}

TEST_CASE("GPT: bad configurations are refused", "[gpt]") {
  nn::GPTConfig c = tiny();
  c.n_embd = 15;
  CHECK_THROWS_WITH(nn::GPT(c), Contains("multiple of n_head"));
  c = tiny();
  c.dropout = 1.0;
  CHECK_THROWS_WITH(nn::GPT(c), Contains("dropout"));
}

TEST_CASE("generate: the KV cache draws the same tokens as recomputing the context, across restarts", "[gpt]") {
  manual_seed(3);
  auto m = std::make_shared<nn::GPT>(tiny());  // block_size 8: 40 tokens restart the window 8 times
  m->train();
  for (const double temperature : {1.0, 0.7}) {
    for (const int64_t top_k : {int64_t{0}, int64_t{4}}) {
      nn::SamplingOptions o{.max_new_tokens = 40, .temperature = temperature, .top_k = top_k};
      manual_seed(11);
      const auto cached = nn::generate(*m, {1, 2, 3}, o);
      o.kv_cache = false;
      manual_seed(11);
      const auto plain = nn::generate(*m, {1, 2, 3}, o);
      CHECK(cached == plain);
      CHECK(cached.size() == 40);
      for (int64_t t : cached) CHECK((t >= 0 && t < 11));
    }
  }
  CHECK(m->is_training());  // put back as it was
  // A prompt longer than the context keeps its last block_size tokens.
  manual_seed(5);
  const auto long_prompt = nn::generate(*m, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 1, 2}, {.max_new_tokens = 10});
  manual_seed(5);
  CHECK(nn::generate(*m, {5, 6, 7, 8, 9, 10, 1, 2}, {.max_new_tokens = 10}) == long_prompt);
  // Greedy (temperature 0) is top-1 sampling, and takes no random numbers.
  const auto greedy = nn::generate(*m, {4}, {.max_new_tokens = 12, .temperature = 0});
  CHECK(nn::generate(*m, {4}, {.max_new_tokens = 12, .top_k = 1}) == greedy);
  CHECK(nn::generate(*m, {4}, {.max_new_tokens = 12, .temperature = 0, .kv_cache = false}) == greedy);
  std::vector<int64_t> streamed;
  nn::generate(*m, {4}, {.max_new_tokens = 5}, [&](int64_t t) { streamed.push_back(t); });
  CHECK(streamed.size() == 5);
  CHECK_THROWS_WITH(nn::generate(*m, {}, {}), Contains("prompt is empty"));
  CHECK_THROWS_WITH(nn::generate(*m, {11}, {}), Contains("prompt token 11 is outside the vocabulary [0, 11)"));
  CHECK_THROWS_WITH(nn::generate(*m, {1}, {.temperature = -1}), Contains("temperature"));
  CHECK_THROWS_WITH(nn::generate(*m, {1}, {.top_k = -2}), Contains("top_k"));
}
