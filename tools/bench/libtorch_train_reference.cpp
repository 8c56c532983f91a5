#include <torch/torch.h>
#include <zlib.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
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
int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "mlp";
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
