#include <torch/torch.h>
#include <zlib.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
// The libtorch reference for `graft train`: the same Fashion-MNIST files, the same models and the
// same recipe (Adam, batch 128, cosine schedule to 0 over the run, pixels standardised with mean
// 0.2860 and std 0.3530; lr 1e-3 for the MLP over 3 epochs, 2e-3 for the CNN over 2).
// Prints per-epoch train loss, test accuracy and epoch time.
//   libtorch_train_reference [mlp|cnn] [DATA_DIR]
// Built only with -Dlibtorch_bench=enabled.
static std::vector<unsigned char> gz(const char* p) {
  gzFile f = gzopen(p, "rb"); std::vector<unsigned char> v; unsigned char buf[65536]; int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) v.insert(v.end(), buf, buf + n); gzclose(f); return v; }
static torch::Tensor images(const char* p) { auto v = gz(p); int64_t n = (v[4]<<24)|(v[5]<<16)|(v[6]<<8)|v[7];
  return (torch::from_blob(v.data() + 16, {n, 1, 28, 28}, torch::kUInt8).clone().to(torch::kFloat) / 255.0 - 0.2860) / 0.3530; }
static torch::Tensor labels(const char* p) { auto v = gz(p); int64_t n = (v[4]<<24)|(v[5]<<16)|(v[6]<<8)|v[7];
  return torch::from_blob(v.data() + 8, {n}, torch::kUInt8).clone().to(torch::kLong); }
int main(int argc, char** argv) {
  bool cnn = argc > 1 && std::string(argv[1]) == "cnn";
  std::string d = argc > 2 ? std::string(argv[2]) + "/" : std::string("/usr/share/datasets/fashion-mnist/");
  auto xtr = images((d + "train-images-idx3-ubyte.gz").c_str()), ytr = labels((d + "train-labels-idx1-ubyte.gz").c_str());
  auto xte = images((d + "t10k-images-idx3-ubyte.gz").c_str()), yte = labels((d + "t10k-labels-idx1-ubyte.gz").c_str());
  torch::manual_seed(0);
  torch::nn::Sequential m;
  if (!cnn) m = torch::nn::Sequential(torch::nn::Flatten(), torch::nn::Linear(784, 256), torch::nn::ReLU(), torch::nn::Linear(256, 10));
  else m = torch::nn::Sequential(torch::nn::Conv2d(torch::nn::Conv2dOptions(1, 32, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2),
      torch::nn::Conv2d(torch::nn::Conv2dOptions(32, 64, 3).padding(1)), torch::nn::ReLU(), torch::nn::MaxPool2d(2), torch::nn::Flatten(),
      torch::nn::Linear(3136, 128), torch::nn::ReLU(), torch::nn::Linear(128, 10));
  const double lr0 = cnn ? 2e-3 : 1e-3;
  const int epochs = cnn ? 2 : 3;
  const int64_t total = epochs * ((60000 + 127) / 128);
  int64_t step = 0;
  torch::optim::Adam opt(m->parameters(), lr0);
  for (int e = 0; e < epochs; ++e) {
    auto t0 = std::chrono::steady_clock::now();
    auto perm = torch::randperm(60000);
    double ls = 0;
    for (int64_t i = 0; i < 60000; i += 128) {
      auto idx = perm.slice(0, i, std::min<int64_t>(i + 128, 60000));
      auto loss = torch::nn::functional::cross_entropy(m->forward(xtr.index_select(0, idx)), ytr.index_select(0, idx));
      opt.zero_grad(); loss.backward(); opt.step(); ls += loss.item<double>() * idx.size(0);
      double lr = lr0 * (1 + std::cos(M_PI * static_cast<double>(++step) / static_cast<double>(total))) / 2;
      for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamOptions&>(g.options()).lr(lr);
    }
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    torch::NoGradGuard ng;
    auto acc = (m->forward(xte).argmax(1) == yte).to(torch::kFloat).mean().item<double>();
    std::printf("libtorch epoch %d: train loss %.4f, test accuracy %.2f%%, %.1f s\n", e + 1, ls / 60000, 100 * acc, secs);
  }
}
