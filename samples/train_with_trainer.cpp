// Trains graft train's MLP on Fashion-MNIST with train::Trainer: the recipe's defaults (Adam 1e-3,
// cosine schedule, batch 128, standardised pixels), capped at 300 steps so it stays short, and
// two callbacks: the library's evaluation after each epoch, and one of our own.
// Needs Debian's dataset-fashion-mnist (or a directory as the first argument); without it, the
// program says so and exits 77 (meson's "skipped").
#include <cstdio>
#include <filesystem>

#include "graft.h"

using namespace graft;

// A callback overrides only the hooks it needs; the state says where the run is.
class PrintEvery : public train::TrainerCallback {
 public:
  explicit PrintEvery(int64_t steps) : steps_(steps) {}
  void on_step_end(train::TrainerState& s) override {
    if (s.global_step % steps_ == 0)
      std::printf("step %lld: loss %.4f, lr %.6f\n", static_cast<long long>(s.global_step), s.step_loss,
                  s.optimizer->lr());
  }

 private:
  int64_t steps_;
};

int main(int argc, char** argv) {
  std::string root = argc > 1 ? argv[1] : data::FashionMnist::kDefaultRoot;
  if (!std::filesystem::exists(root)) {
    std::printf("no data set at %s: apt-get install dataset-fashion-mnist, or pass a directory\n", root.c_str());
    return 77;
  }
  train::Recipe recipe = train::Recipe::defaults(models::Kind::Mlp);  // or Recipe::make({{"--lr", "3e-3"}})
  manual_seed(recipe.seed);
  data::FashionMnist train_set(root, true), test_set(root, false);
  data::DataLoader loader(train_set, recipe.batch_size, /*shuffle=*/true, /*drop_last=*/false, recipe.seed);

  train::Trainer trainer(models::make_model(recipe.model), loader, recipe, {.max_steps = 300});
  trainer.add_callback(std::make_shared<PrintEvery>(100));
  trainer.add_callback(std::make_shared<train::EvaluateEachEpoch>(test_set.images(), test_set.labels()));
  trainer.fit();

  const train::EvalResult& ev = *trainer.state().eval;
  std::printf("after %lld steps: test loss %.4f, test accuracy %.2f%%\n",
              static_cast<long long>(trainer.state().global_step), ev.loss, 100 * ev.accuracy);
  return ev.accuracy > 0.75 ? 0 : 1;
}
