// `graft eval`: test loss, accuracy and the confusion matrix of saved weights on Fashion-MNIST.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "data/fashion_mnist.h"
#include "models/model.h"
#include "nn/serialize.h"
#include "runtime/backend_hooks.h"
#include "runtime/error.h"
#include "tools/cli_validators.h"
#include "tools/commands.h"
#include "train/evaluate.h"
#include "train/recipe.h"

namespace graft::tools {

namespace {

struct EvalFlags {
  std::string model = "mlp", load, data = data::FashionMnist::kDefaultRoot, device = "cpu";
  bool normalize = true;
};

void print_confusion(const train::EvalResult& ev) {
  // Full class names ("T-shirt/top" used to be cut to ten characters), padded to the longest.
  const auto& names = data::FashionMnist::class_names();
  int width = 0;
  for (const auto& n : names) width = std::max(width, static_cast<int>(n.size()));
  std::printf("%*s", width + 2, "");
  for (int j = 0; j < 10; ++j) std::printf("%6d", j);
  std::printf("\n");
  for (int i = 0; i < 10; ++i) {
    std::printf("%d %-*s", i, width, names[i].c_str());
    for (int j = 0; j < 10; ++j) std::printf("%6lld", static_cast<long long>(ev.confusion[i * 10 + j]));
    std::printf("\n");
  }
}

int run_eval(const EvalFlags& f) {
  // The recipe's view of the flags: the same device parsing and input preparation as graft train.
  train::Recipe recipe = train::Recipe::make({{"--model", f.model}, {"--device", f.device},
                                              {"--normalize", f.normalize ? "true" : "false"}});
  GRAFT_CHECK(!recipe.device.is_cuda() || cuda_is_available(), "--device ", f.device,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
  auto model = models::make_model(recipe.model).module;
  nn::load(*model, f.load);
  models::place_on(*model, recipe.device);
  data::FashionMnist test_set(f.data, false);
  train::EvalOptions options{.device = recipe.device,
                             .prepare_inputs = [&recipe](const Tensor& x) { return recipe.prepare_inputs(x); },
                             .num_classes = data::FashionMnist::kNumClasses};
  train::EvalResult ev = train::evaluate(*model, test_set.images(), test_set.labels(), options);
  std::printf("test loss %.4f, test accuracy %.2f%%\n\nconfusion matrix (rows: true class, columns: predicted)\n",
              ev.loss, 100 * ev.accuracy);
  print_confusion(ev);
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  auto* eval = app.add_subcommand("eval", "Evaluate saved weights on the Fashion-MNIST test set");
  auto f = std::make_shared<EvalFlags>();
  eval->add_option("--model", f->model, "mlp, cnn or vit")->type_name("{mlp,cnn,vit}")->capture_default_str()->check(recipe_value("--model"));
  eval->add_option("--load", f->load, "Weights written by graft train --save")->required();
  eval->add_option("--data", f->data, "Fashion-MNIST directory")->capture_default_str();
  eval->add_option("--device", f->device, "cpu or cuda[:N]")->capture_default_str()->check(recipe_value("--device"));
  eval->add_flag("--normalize,!--no-normalize", f->normalize,
                 "Standardise pixels as graft train does (give --no-normalize if it trained with it)");
  return {eval, [f] { return run_eval(*f); }};
}

}  // namespace graft::tools
