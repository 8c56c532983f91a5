// `graft generate`: characters sampled from a GPT saved by `graft train --model gpt --save PATH`,
// streamed as they are drawn (nn::generate: its context rule, the KV cache, temperature, top-k).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "autograd/grad_mode.h"
#include "data/char_corpus.h"
#include "models/gpt.h"
#include "nn/gpt_sampling.h"
#include "runtime/backend_hooks.h"
#include "runtime/error.h"
#include "runtime/generator.h"
#include "tools/cli_validators.h"
#include "tools/commands.h"

namespace graft::tools {

namespace {

struct GenerateFlags {
  std::string load, prompt, device = "cpu";
  int64_t tokens = 200, top_k = 0;
  double temperature = 1.0;
  uint64_t seed = 0;
  bool no_kv_cache = false, stats = false;
};

int run_generate(const GenerateFlags& f, bool prompt_given) {
  GRAFT_CHECK(f.temperature >= 0, "graft generate: --temperature must be at least 0 (0 is greedy), got ",
              f.temperature);
  const Device device(f.device);
  GRAFT_CHECK(!device.is_cuda() || cuda_is_available(), "--device ", f.device,
              ": no CUDA device is available (graft was built without CUDA, or there is no GPU)");
  models::SavedGpt saved = models::load_gpt(f.load);
  const data::CharVocabulary vocab = data::CharVocabulary::from_text(saved.vocabulary);
  saved.model->to(device);
  // Without a prompt, a newline starts the text (a fortune's first line), or the first character.
  std::vector<int64_t> prompt;
  if (prompt_given) {
    GRAFT_CHECK(!f.prompt.empty(), "graft generate: --prompt is empty; leave it out to start from a new line");
    prompt = vocab.encode(f.prompt, "--prompt");
  } else {
    prompt = {vocab.contains(U'\n') ? vocab.encode("\n")[0] : 0};
  }
  manual_seed(f.seed);
  nn::SamplingOptions o{.max_new_tokens = f.tokens, .temperature = f.temperature, .top_k = f.top_k,
                        .kv_cache = !f.no_kv_cache};
  if (prompt_given) std::fputs(f.prompt.c_str(), stdout);
  const auto start = std::chrono::steady_clock::now();
  nn::generate(*saved.model, prompt, o, [&vocab](int64_t id) {
    std::fputs(vocab.decode(id).c_str(), stdout);
    std::fflush(stdout);
  });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fputc('\n', stdout);
  if (f.stats)
    std::fprintf(stderr, "graft generate: %lld tokens in %.3f s, %.0f tokens/s (%s)\n", static_cast<long long>(f.tokens),
                 seconds, static_cast<double>(f.tokens) / seconds, f.no_kv_cache ? "no KV cache" : "KV cache");
  return 0;
}

}  // namespace

Command add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Sample text from a GPT saved by graft train --model gpt --save PATH");
  auto f = std::make_shared<GenerateFlags>();
  cmd->add_option("--load", f->load, "The saved model (safetensors with its vocabulary)")->required();
  cmd->add_option("--prompt", f->prompt, "Text to continue; every character must be in the model's vocabulary "
                                         "(default: a new line)");
  cmd->add_option("--tokens", f->tokens, "Characters to sample, a whole number of at least 0")
      ->capture_default_str()
      ->check(whole_number_at_least(0));
  cmd->add_option("--temperature", f->temperature,
                  "Divide the logits by this before sampling, a number of at least 0; 0 is greedy (the likeliest "
                  "character every time)")
      ->capture_default_str();
  cmd->add_option("--top-k", f->top_k, "Sample among the K likeliest characters only (0: all)")
      ->capture_default_str()
      ->check(whole_number_at_least(0));
  cmd->add_option("--seed", f->seed, "Random seed of the sampling")->capture_default_str();
  cmd->add_option("--device", f->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_flag("--no-kv-cache", f->no_kv_cache,
                "Recompute the whole context for every character instead of caching keys and values (the same "
                "characters, slower)");
  cmd->add_flag("--stats", f->stats, "Print tokens per second on stderr at the end");
  return {cmd, [cmd, f] { return run_generate(*f, cmd->count("--prompt") > 0); }};
}

}  // namespace graft::tools
