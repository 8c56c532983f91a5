// An MLP on Fashion-MNIST: model, training loop and evaluation.
// Needs Debian's dataset-fashion-mnist (or a directory as the first argument); without it, the
// program says so and exits 77 (meson's "skipped").
#include <cstdio>
#include <filesystem>

#include "graft.h"

using namespace graft;

int main(int argc, char** argv) {
  std::string root = argc > 1 ? argv[1] : data::FashionMnist::kDefaultRoot;
  if (!std::filesystem::exists(root)) {
    std::printf("no data set at %s: apt-get install dataset-fashion-mnist, or pass a directory\n", root.c_str());
    return 77;
  }
  manual_seed(0);
  data::FashionMnist train(root, true), test(root, false);

  auto model = std::make_shared<nn::Sequential>();
  model->push_back(std::make_shared<nn::Flatten>());
  model->push_back(std::make_shared<nn::Linear>(784, 256));
  model->push_back(std::make_shared<nn::ReLU>());
  model->push_back(std::make_shared<nn::Linear>(256, 10));
  optim::Adam opt(model->parameters(), 1e-3);

  data::DataLoader loader(train, 128, /*shuffle=*/true);
  for (int64_t epoch = 0; epoch < 1; ++epoch) {
    loader.set_epoch(epoch);
    double total = 0;
    int64_t n = 0;
    while (auto batch = loader.next()) {
      Tensor loss = cross_entropy(model->forward(batch->images), batch->labels);
      opt.zero_grad();
      loss.backward();
      opt.step();
      total += loss.item<float>() * static_cast<double>(batch->labels.size(0));
      n += batch->labels.size(0);
    }
    std::printf("epoch %lld: train loss %.4f\n", static_cast<long long>(epoch + 1), total / static_cast<double>(n));
  }

  NoGradGuard no_grad;
  model->eval();
  Tensor predicted = model->forward(test.images()).argmax(1);
  double accuracy = predicted.eq(test.labels()).to(kFloat32).mean().item<float>();
  std::printf("test accuracy %.2f%%\n", 100 * accuracy);
  return accuracy > 0.8 ? 0 : 1;
}
