// `graft eval`: test loss, accuracy and the confusion matrix of saved weights on Fashion-MNIST; for
// a GPT, the validation loss over every whole window of the validation split (deterministic, so two
// models trained on the same split compare without the noise of 200 random windows).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>

#include "data/char_corpus.h"
#include "data/fashion_mnist.h"
#include "models/gpt.h"
#include "models/model.h"
#include "nn/serialize.h"
#include "runtime/backend_hooks.h"
#include "runtime/error.h"
#include "tools/cli_validators.h"
#include "tools/commands.h"
#include "train/evaluate.h"
#include "train/recipe.h"
#include "train/validation_loss.h"

namespace graft::tools {

namespace {

struct EvalFlags {
  std::string model = "mlp", load, data, device = "cpu";  // data: empty for each model's default
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

// The saved GPT (its shape and vocabulary come from the file) on the validation split of the corpus
// it trained on: the fortunes, or --data FILE.
int eval_language_model(const EvalFlags& f, Device device) {
  models::SavedGpt saved = models::load_gpt(f.load);
  data::CharCorpus corpus = f.data.empty() ? data::load_fortunes() : data::load_text_file(f.data);
  const std::string corpus_vocab = corpus.vocab.to_text();
  GRAFT_CHECK(saved.vocabulary == corpus_vocab, "graft eval: ", f.load, " was trained on a vocabulary of ",
              data::CharVocabulary::from_text(saved.vocabulary).size(), " characters, but ", corpus.source,
              " has ", corpus.vocab.size(), "; give the text it trained on with --data FILE");
  models::place_on(*saved.model, device);
  const int64_t T = saved.model->config.block_size;
  const auto starts = train::tiling_starts(corpus.val.size(0), T);
  GRAFT_CHECK(!starts.empty(), "graft eval: the validation split of ", corpus.source, " has ", corpus.val.size(0),
              " characters, fewer than one window of ", T + 1);
  train::EvalResult ev = train::windows_loss(*saved.model, corpus.val, starts, T, /*batch=*/50, device);
  std::printf("validation loss %.4f over the whole validation split of %s: %zu windows of %lld (%lld tokens), "
              "next-character accuracy %.2f%%\n", ev.loss, corpus.source.c_str(), starts.size(),
              static_cast<long long>(T), static_cast<long long>(ev.samples), 100 * ev.accuracy);
  return 0;
}

int run_eval(const EvalFlags& f) {
  // The recipe's view of the flags: the same device parsing and input preparation as graft train.
  train::Recipe recipe = train::Recipe::make({{"--model", f.model}, {"--device", f.device},
                                              {"--normalize", f.normalize ? "true" : "false"}});
  GRAFT_CHECK(!recipe.device.is_cuda() || cuda_is_available(), "--device ", f.device,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
  if (!models::is_image_model(recipe.model)) return eval_language_model(f, recipe.device);
  auto model = models::make_model(recipe.model).module;
  nn::load(*model, f.load);
  models::place_on(*model, recipe.device);
  data::FashionMnist test_set(f.data.empty() ? data::FashionMnist::kDefaultRoot : f.data, false);
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
  auto* eval = app.add_subcommand("eval", "Evaluate saved weights on the Fashion-MNIST test set, or a GPT on its "
                                          "validation split");
  auto f = std::make_shared<EvalFlags>();
  eval->add_option("--model", f->model, "mlp, cnn, vit or gpt")->type_name("{mlp,cnn,vit,gpt}")->capture_default_str()->check(recipe_value("--model"));
  eval->add_option("--load", f->load, "Weights written by graft train --save")->required();
  eval->add_option("--data", f->data, std::string("Fashion-MNIST directory (default ") +
                   data::FashionMnist::kDefaultRoot + "); for gpt, the UTF-8 text it trained on (default: the "
                   "fortunes in " + data::kFortunesDir + ")");
  eval->add_option("--device", f->device, "cpu or cuda[:N]")->capture_default_str()->check(recipe_value("--device"));
  eval->add_flag("--normalize,!--no-normalize", f->normalize,
                 "Standardise pixels as graft train does (give --no-normalize if it trained with it)");
  return {eval, [f] { return run_eval(*f); }};
}

}  // namespace graft::tools
