#include <torch/torch.h>
#include <torch/version.h>
#include <ATen/CPUGeneratorImpl.h>
#include <zlib.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>
// The libtorch reference for `graft train`: the same Fashion-MNIST files, the same models and the
// same recipe (Adam, batch 128, cosine schedule to 0 over the run, pixels standardised with mean
// 0.2860 and std 0.3530; lr 1e-3 for the MLP over 3 epochs, 2e-3 for the CNN over 2).
// `vit`: the ViT below with AdamW (lr 2e-3, weight decay 0.05), batch 128, 3 epochs by default;
// the lr of the k-th step (k = 1..total) is lr0 * k / warmup over the first epoch's steps (warmup),
// then lr0 * (1 + cos(pi * (k - warmup) / (total - warmup))) / 2, reaching 0 at the last step.
// Prints per-epoch train loss, test accuracy and epoch time.
//   libtorch_train_reference [mlp|cnn|vit] [DATA_DIR] [EPOCHS]
// `gpt`, `gpt-generate`: graft's char-level GPT (nn/gpt.h) and tools/bench/pytorch_gpt.py's recipe,
// on the fortunes corpus (see the comment above run_gpt):
//   libtorch_train_reference gpt [FORTUNES_DIR] [ITERS=2000]
//   libtorch_train_reference gpt-generate [FORTUNES_DIR] [TOKENS=200]
// Threads: libtorch's default (OMP_NUM_THREADS when set).
// Built only with -Dlibtorch_bench=enabled.

// The ViT of graft_workloads.cpp (and of libtorch_reference.cpp's vit_step_ms): patch embedding
// Conv2d(1, 64, 7, stride 7) -> [N, 16, 64], a learned CLS token prepended and a learned positional
// embedding [17, 64] added, 6 pre-norm encoder layers (d_model 64, 4 heads, feed-forward 128, GELU,
// no dropout), a final LayerNorm and Linear(64, 10) on token 0. libtorch's C++
// TransformerEncoderLayer has neither norm_first nor batch_first (1.13 and 2.x alike), so the
// pre-norm layer is written from the parts Python's nn.TransformerEncoderLayer(norm_first=True)
// uses, with torch::nn::MultiheadAttention over [L, N, E] (it has no batch_first either).
struct VitBlockImpl : torch::nn::Module {
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr};
  torch::nn::MultiheadAttention self_attn{nullptr};
  torch::nn::Linear linear1{nullptr}, linear2{nullptr};
  VitBlockImpl(int64_t d, int64_t heads, int64_t ff) {
    norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    self_attn = register_module("self_attn", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(d, heads)));
    norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})));
    linear1 = register_module("linear1", torch::nn::Linear(d, ff));
    linear2 = register_module("linear2", torch::nn::Linear(ff, d));
  }
  torch::Tensor forward(torch::Tensor x) {  // [L, N, E]
    auto h = norm1(x);
    x = x + std::get<0>(self_attn->forward(h, h, h, torch::Tensor(), /*need_weights=*/false));
    return x + linear2(torch::gelu(linear1(norm2(x))));
  }
};
TORCH_MODULE(VitBlock);
struct VitImpl : torch::nn::Module {
  torch::nn::Conv2d patch{nullptr};
  torch::Tensor cls, pos;
  std::vector<VitBlock> blocks;
  torch::nn::LayerNorm norm{nullptr};
  torch::nn::Linear head{nullptr};
  VitImpl() {
    patch = register_module("patch", torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 64, 7).stride(7)));
    cls = register_parameter("cls", torch::randn({1, 1, 64}) * 0.02);
    pos = register_parameter("pos", torch::randn({17, 64}) * 0.02);
    for (int i = 0; i < 6; ++i) blocks.push_back(register_module("layer" + std::to_string(i), VitBlock(64, 4, 128)));
    norm = register_module("norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({64})));
    head = register_module("head", torch::nn::Linear(64, 10));
  }
  torch::Tensor forward(torch::Tensor x) {  // [N, 1, 28, 28] -> [N, 10]
    auto h = patch(x).flatten(2).transpose(1, 2);                  // [N, 16, 64]
    h = torch::cat({cls.expand({h.size(0), 1, 64}), h}, 1) + pos;  // [N, 17, 64]
    h = h.transpose(0, 1);                                         // [17, N, 64]
    for (auto& b : blocks) h = b(h);
    return head(norm(h)[0]);                                       // token 0
  }
};
TORCH_MODULE(Vit);
static std::vector<unsigned char> gz(const char* p) {
  gzFile f = gzopen(p, "rb"); std::vector<unsigned char> v; unsigned char buf[65536]; int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) v.insert(v.end(), buf, buf + n); gzclose(f); return v; }
static torch::Tensor images(const char* p) { auto v = gz(p); int64_t n = (v[4]<<24)|(v[5]<<16)|(v[6]<<8)|v[7];
  return (torch::from_blob(v.data() + 16, {n, 1, 28, 28}, torch::kUInt8).clone().to(torch::kFloat) / 255.0 - 0.2860) / 0.3530; }
static torch::Tensor labels(const char* p) { auto v = gz(p); int64_t n = (v[4]<<24)|(v[5]<<16)|(v[6]<<8)|v[7];
  return torch::from_blob(v.data() + 8, {n}, torch::kUInt8).clone().to(torch::kLong); }

// ---- gpt: nn::GPT's model and recipe (tools/bench/pytorch_gpt.py holds the same in Python) ----
// vocab V (the corpus's), block_size 64, 4 layers, 4 heads, n_embd 128, biases, dropout 0; pre-norm
// blocks x += attn.c_proj(causal_sdpa(q, k, v)), x += mlp.c_proj(gelu(mlp.c_fc(ln_2(x)))) with
// q, k, v = attn.c_attn(ln_1(x)) split in that order; ln_f and the head tied to wte.weight. The
// modules carry graft's names (wte, wpe, h.{i}.ln_1, h.{i}.attn.c_attn, ...). Init as GPT-2: Linear
// and Embedding weights N(0, 0.02), the c_proj weights N(0, 0.02 / sqrt(2 n_layer)), biases 0.
// libtorch 1.13 has no scaled_dot_product_attention: there the attention is written out (scores,
// causal mask, softmax, weighted sum), the same computation.
struct GptConfig {
  int64_t vocab = 96, block = 64, n_layer = 4, n_head = 4, n_embd = 128;
  double dropout = 0.0;
};
struct GptAttnImpl : torch::nn::Module {
  torch::nn::Linear c_attn{nullptr}, c_proj{nullptr};
  int64_t n_head, n_embd;
  double dropout;
  explicit GptAttnImpl(const GptConfig& c) : n_head(c.n_head), n_embd(c.n_embd), dropout(c.dropout) {
    c_attn = register_module("c_attn", torch::nn::Linear(c.n_embd, 3 * c.n_embd));
    c_proj = register_module("c_proj", torch::nn::Linear(c.n_embd, c.n_embd));
  }
  torch::Tensor forward(const torch::Tensor& x) {  // [B, t, C]
    const int64_t B = x.size(0), t = x.size(1), C = n_embd, d = C / n_head;
    auto qkv = c_attn(x).split(C, 2);
    auto q = qkv[0].view({B, t, n_head, d}).transpose(1, 2);  // [B, H, t, d]
    auto k = qkv[1].view({B, t, n_head, d}).transpose(1, 2);
    auto v = qkv[2].view({B, t, n_head, d}).transpose(1, 2);
    const double p = is_training() ? dropout : 0.0;
#if TORCH_VERSION_MAJOR >= 2
    auto y = torch::scaled_dot_product_attention(q, k, v, {}, p, /*is_causal=*/true);
#else
    auto mask = torch::ones({t, t}, torch::kBool).tril();
    auto s = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d));
    auto y = torch::matmul(torch::dropout(torch::softmax(s.masked_fill(mask.logical_not(), -INFINITY), -1), p, is_training()), v);
#endif
    y = y.transpose(1, 2).contiguous().view({B, t, C});
    return torch::dropout(c_proj(y), p, is_training());
  }
};
TORCH_MODULE(GptAttn);
struct GptMlpImpl : torch::nn::Module {
  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};
  double dropout;
  explicit GptMlpImpl(const GptConfig& c) : dropout(c.dropout) {
    c_fc = register_module("c_fc", torch::nn::Linear(c.n_embd, 4 * c.n_embd));
    c_proj = register_module("c_proj", torch::nn::Linear(4 * c.n_embd, c.n_embd));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::dropout(c_proj(torch::gelu(c_fc(x))), is_training() ? dropout : 0.0, is_training());  // exact GELU
  }
};
TORCH_MODULE(GptMlp);
struct GptBlockImpl : torch::nn::Module {
  torch::nn::LayerNorm ln_1{nullptr}, ln_2{nullptr};
  GptAttn attn{nullptr};
  GptMlp mlp{nullptr};
  explicit GptBlockImpl(const GptConfig& c) {
    ln_1 = register_module("ln_1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(1e-5)));
    attn = register_module("attn", GptAttn(c));
    ln_2 = register_module("ln_2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(1e-5)));
    mlp = register_module("mlp", GptMlp(c));
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x + attn(ln_1(x));
    return x + mlp(ln_2(x));
  }
};
TORCH_MODULE(GptBlock);
struct GptImpl : torch::nn::Module {
  GptConfig cfg;
  torch::nn::Embedding wte{nullptr}, wpe{nullptr};
  std::vector<GptBlock> h;
  torch::nn::LayerNorm ln_f{nullptr};
  explicit GptImpl(const GptConfig& c) : cfg(c) {
    wte = register_module("wte", torch::nn::Embedding(c.vocab, c.n_embd));
    wpe = register_module("wpe", torch::nn::Embedding(c.block, c.n_embd));
    auto list = register_module("h", torch::nn::ModuleList());
    for (int64_t i = 0; i < c.n_layer; ++i) {
      h.push_back(GptBlock(c));
      list->push_back(h.back());
    }
    ln_f = register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({c.n_embd}).eps(1e-5)));
    torch::NoGradGuard ng;
    const double proj_std = 0.02 / std::sqrt(2.0 * static_cast<double>(c.n_layer));
    for (auto& p : named_parameters()) {
      const std::string& n = p.key();
      auto ends = [&](const std::string& suf) { return n.size() >= suf.size() && n.compare(n.size() - suf.size(), suf.size(), suf) == 0; };
      if (n.find("ln_") != std::string::npos) {
        if (ends(".weight")) p.value().fill_(1.0); else p.value().zero_();
      } else if (ends(".bias")) {
        p.value().zero_();
      } else {
        p.value().normal_(0.0, ends("c_proj.weight") ? proj_std : 0.02);
      }
    }
  }
  torch::Tensor forward(const torch::Tensor& idx) {  // [B, t] int64 -> [B, t, V]
    auto x = torch::dropout(wte(idx) + wpe(torch::arange(idx.size(1), torch::kLong)), is_training() ? cfg.dropout : 0.0, is_training());
    for (auto& b : h) x = b(x);
    return torch::linear(ln_f(x), wte->weight);  // tied head
  }
};
TORCH_MODULE(Gpt);

// The corpus of pytorch_gpt.py: every regular file (no symlink, no *.dat) of the directory in byte
// order of name, concatenated, bytes 32..126 and '\n' kept; ids = ranks in the sorted distinct set.
static torch::Tensor fortunes(const std::string& dir, int64_t& vocab) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (e.is_symlink() || !e.is_regular_file() || (n.size() >= 4 && n.compare(n.size() - 4, 4, ".dat") == 0)) continue;
    names.push_back(n);
  }
  std::sort(names.begin(), names.end());
  std::vector<unsigned char> text;
  for (const auto& n : names) {
    std::ifstream f(dir + "/" + n, std::ios::binary);
    for (auto it = std::istreambuf_iterator<char>(f); it != std::istreambuf_iterator<char>(); ++it) {
      const auto b = static_cast<unsigned char>(*it);
      if ((b >= 32 && b <= 126) || b == 10) text.push_back(b);
    }
  }
  int64_t rank[256];
  bool seen[256] = {};
  for (auto b : text) seen[b] = true;
  vocab = 0;
  for (int b = 0; b < 256; ++b) rank[b] = seen[b] ? vocab++ : -1;
  auto ids = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  auto* p = ids.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) p[i] = rank[text[i]];
  return ids;
}
// `batch` windows of 64 from uniform starts in [0, len - 65]: x = data[s, s + 64), y shifted by one.
static std::pair<torch::Tensor, torch::Tensor> gpt_batch(const torch::Tensor& data, int64_t batch, int64_t block,
                                                        c10::optional<at::Generator> gen = c10::nullopt) {
  auto s = torch::randint(0, data.size(0) - block, {batch, 1}, gen, torch::kLong) + torch::arange(block, torch::kLong);
  return {data.index_select(0, s.flatten()).view({batch, block}), data.index_select(0, (s + 1).flatten()).view({batch, block})};
}
static double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}
static void print_figure(const char* name, const char* unit, const std::vector<double>& v) {
  std::printf("%s %.4g %s (min %.4g, max %.4g, n=%zu)\n", name, median_of(v), unit,
              *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()), v.size());
}
// `gpt`: the recipe for ITERS iterations (2000 by default): batch 12 x 64, mean cross-entropy,
// AdamW (lr 1e-3, betas 0.9/0.99, eps 1e-8, weight decay 0.1 on every parameter), lr of iteration i
// (0-based) 1e-3 (i+1)/100 for i < 100, then 1e-4 + 9e-4 (1 + cos(pi (i+1-100) / (ITERS-100))) / 2,
// clip_grad_norm_ 1.0; validation (200 windows of the last 10%, its own generator seeded 0 afresh)
// every 500 iterations and at the end. Prints progress every 100 iterations and gpt_step_ms, the
// median of forward + backward + clip + step over the iterations after the 5th (batches drawn
// outside the timed region). `gpt-generate`: nanoGPT's sampling loop without a KV cache from a
// one-token context (id 0): crop to the last 64 tokens, forward, last logits, softmax, multinomial,
// under InferenceMode; gpt_generate_tokens_per_s, the median of 5 runs of TOKENS after a warmup.
static int run_gpt(bool generate, const std::string& dir, int64_t n) {
  int64_t vocab = 0;
  auto ids = fortunes(dir, vocab);
  const int64_t n_train = ids.size(0) * 9 / 10, B = 12, T = 64;
  auto train = ids.slice(0, 0, n_train), val = ids.slice(0, n_train);
  torch::manual_seed(0);
  GptConfig cfg;
  cfg.vocab = vocab;
  Gpt model(cfg);
  std::printf("# libtorch %d.%d.%d, %d threads; corpus %s: %lld chars, vocab %lld\n", TORCH_VERSION_MAJOR,
              TORCH_VERSION_MINOR, TORCH_VERSION_PATCH, torch::get_num_threads(), dir.c_str(),
              static_cast<long long>(ids.size(0)), static_cast<long long>(vocab));
  using clock = std::chrono::steady_clock;
  if (generate) {
    c10::InferenceMode guard;
    model->eval();
    auto sample = [&](int64_t tokens) {
      auto idx = torch::zeros({1, 1}, torch::kLong);
      for (int64_t i = 0; i < tokens; ++i) {
        auto cond = idx.size(1) <= T ? idx : idx.slice(1, idx.size(1) - T);
        auto logits = model->forward(cond).select(1, -1) / 1.0;  // temperature 1, no top-k
        idx = torch::cat({idx, torch::multinomial(torch::softmax(logits, -1), 1)}, 1);
      }
      return idx;
    };
    sample(20);
    std::vector<double> rates;
    for (int r = 0; r < 5; ++r) {
      auto t0 = clock::now();
      auto out = sample(n);
      rates.push_back(static_cast<double>(n) / std::chrono::duration<double>(clock::now() - t0).count());
      TORCH_CHECK(out.size(1) == n + 1);
    }
    print_figure("gpt_generate_tokens_per_s", "tokens/s", rates);
    return 0;
  }
  torch::optim::AdamW opt(model->parameters(), torch::optim::AdamWOptions(1e-3).betas(std::make_tuple(0.9, 0.99)).eps(1e-8).weight_decay(0.1));
  auto evaluate = [&]() {
    torch::NoGradGuard ng;
    model->eval();
    auto gen = at::detail::createCPUGenerator(0);
    auto xy = gpt_batch(val, 200, T, gen);
    double sum = 0;
    for (int64_t lo = 0; lo < 200; lo += 50) {
      auto logits = model->forward(xy.first.slice(0, lo, lo + 50));
      sum += torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}), xy.second.slice(0, lo, lo + 50).reshape(-1),
                                                  torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kSum)).item<double>();
    }
    model->train();
    return sum / (200.0 * T);
  };
  model->train();
  std::vector<double> ms;
  auto t_start = clock::now(), t_last = t_start;
  double val_loss = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double lr = i < 100 ? 1e-3 * static_cast<double>(i + 1) / 100
        : 1e-4 + 9e-4 * (1 + std::cos(M_PI * static_cast<double>(i + 1 - 100) / static_cast<double>(std::max<int64_t>(1, n - 100)))) / 2;
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    auto xy = gpt_batch(train, B, T);
    auto t0 = clock::now();
    auto logits = model->forward(xy.first);
    auto loss = torch::nn::functional::cross_entropy(logits.reshape({-1, vocab}), xy.second.reshape(-1));
    opt.zero_grad();
    loss.backward();
    torch::nn::utils::clip_grad_norm_(model->parameters(), 1.0);
    opt.step();
    if (i >= 5) ms.push_back(std::chrono::duration<double, std::milli>(clock::now() - t0).count());
    const int64_t it = i + 1;
    if (it % 100 == 0 || it == n) {
      auto now = clock::now();
      const int64_t k = it % 100 == 0 ? 100 : it % 100;
      std::printf("iter %lld/%lld loss %.4f lr %.3e tokens/s %.0f\n", static_cast<long long>(it), static_cast<long long>(n),
                  loss.item<double>(), lr, static_cast<double>(k * B * T) / std::chrono::duration<double>(now - t_last).count());
      t_last = now;
    }
    if (it % 500 == 0 || it == n) {
      auto e0 = clock::now();
      val_loss = evaluate();
      std::printf("iter %lld: val loss %.4f\n", static_cast<long long>(it), val_loss);
      t_last += clock::now() - e0;
    }
    std::fflush(stdout);
  }
  std::printf("final val loss %.4f\ntotal time %.1f s\n", val_loss, std::chrono::duration<double>(clock::now() - t_start).count());
  if (!ms.empty()) print_figure("gpt_step_ms", "ms", ms);
  return 0;
}
int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "mlp";
  if (mode == "gpt" || mode == "gpt-generate") {
    const bool gen = mode == "gpt-generate";
    const std::string dir = argc > 2 ? argv[2] : "/usr/share/games/fortunes";
    const int64_t n = argc > 3 ? std::max(1, std::atoi(argv[3])) : gen ? 200 : 2000;
    return run_gpt(gen, dir, n);
  }
  bool cnn = mode == "cnn", vit = mode == "vit";
  std::string d = argc > 2 ? std::string(argv[2]) + "/" : std::string("/usr/share/datasets/fashion-mnist/");
  auto xtr = images((d + "train-images-idx3-ubyte.gz").c_str()), ytr = labels((d + "train-labels-idx1-ubyte.gz").c_str());
  auto xte = images((d + "t10k-images-idx3-ubyte.gz").c_str()), yte = labels((d + "t10k-labels-idx1-ubyte.gz").c_str());
  torch::manual_seed(0);
  torch::nn::Sequential m;
  Vit v{nullptr};
  if (vit) v = Vit();
  else if (!cnn) m = torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  else m = torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(),
      torch::nn::Linear(3136, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  auto forward = [&](const torch::Tensor& x) { return vit ? v->forward(x) : m->forward(x); };
  const double lr0 = (cnn || vit) ? 2e-3 : 1e-3;
  const int epochs = argc > 3 ? std::max(1, std::atoi(argv[3])) : vit ? 3 : cnn ? 2 : 3;
  const int64_t per_epoch = (60000 + 127) / 128, total = epochs * per_epoch, warmup = per_epoch;
  int64_t step = 0;
  std::unique_ptr<torch::optim::Optimizer> opt;
  if (vit) opt = std::make_unique<torch::optim::AdamW>(v->parameters(), torch::optim::AdamWOptions(lr0).weight_decay(0.05));
  else opt = std::make_unique<torch::optim::Adam>(m->parameters(), torch::optim::AdamOptions(lr0));
  auto set_lr = [&](double lr) {
    for (auto& g : opt->param_groups()) {
      if (vit) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
      else static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
    }
  };
  for (int e = 0; e < epochs; ++e) {
    if (vit) v->train(); else m->train();
    auto t0 = std::chrono::steady_clock::now();
    auto perm = torch::randperm(60000);
    double ls = 0;
    for (int64_t i = 0; i < 60000; i += 128) {
      if (vit) {  // warmup then cosine, the lr of this (1-based) step
        ++step;
        set_lr(step <= warmup ? lr0 * static_cast<double>(step) / static_cast<double>(warmup)
               : lr0 * (1 + std::cos(M_PI * static_cast<double>(step - warmup) / static_cast<double>(total - warmup))) / 2);
      }
      auto idx = perm.slice(0, i, std::min<int64_t>(i + 128, 60000));
      auto loss = torch::nn::functional::cross_entropy(forward(xtr.index_select(0, idx)), ytr.index_select(0, idx));
      opt->zero_grad(); loss.backward(); opt->step(); ls += loss.item<double>() * idx.size(0);
      if (!vit) set_lr(lr0 * (1 + std::cos(M_PI * static_cast<double>(++step) / static_cast<double>(total))) / 2);
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    torch::NoGradGuard ng;
    if (vit) v->eval(); else m->eval();
    int64_t correct = 0;
    for (int64_t i = 0; i < xte.size(0); i += 1000) {  // in batches, to bound the attention's memory
      auto x = xte.slice(0, i, std::min<int64_t>(i + 1000, xte.size(0)));
      correct += (forward(x).argmax(1) == yte.slice(0, i, i + x.size(0))).sum().item<int64_t>();
    }
    double acc = static_cast<double>(correct) / static_cast<double>(xte.size(0));
    std::printf("libtorch epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s\n", e + 1, ls / 60000, 100 * acc, secs);
    std::fflush(stdout);
  }
}
