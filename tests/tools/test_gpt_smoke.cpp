#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/fixtures.h"
#include "support/process.h"
#include "support/temp_dir.h"

// Runs the real `graft train --model gpt` and `graft generate` (path from GRAFT_EXE) on a small
// generated text, and checks what they print, write and refuse.
using namespace graft::test;
using Catch::Matchers::Contains;

namespace {

ProcessResult cli(const std::string& args) { return run_process(graft_exe() + " " + args, {.merge_stderr = true}); }

// About 6 KB of sentences over a 30-character vocabulary, the same every run.
void write_text(const std::string& path) {
  const char* words[] = {"the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "far", "away", "from", "home"};
  std::ofstream out(path);
  uint32_t x = 12345;
  for (int i = 0; i < 1200; ++i) {
    x = x * 1664525u + 1013904223u;
    out << words[(x >> 16) % 13] << ((x >> 8) % 9 == 0 ? ".\n" : " ");
  }
}

}  // namespace

TEST_CASE("graft train --model gpt and graft generate run end to end on a small text") {
  TempDir dir("gpt_smoke");
  const std::string text = dir.file("text.txt"), weights = dir.file("gpt.safetensors");
  write_text(text);
  ProcessResult train = cli("train --model gpt --data " + text + " --iters 30 --eval-every 10 --batch-size 4 "
                            "--warmup-iters 5 --save " + weights);
  INFO(train.out);
  REQUIRE(train.exit_code == 0);
  CHECK_THAT(train.out, Contains("vocabulary of 18") && Contains("model gpt (4 layers, 4 heads, width 128, context 64), "
                                                                 "30 iterations, batch 4, adamw lr 0.001 betas (0.9, 0.99)"));
  CHECK_THAT(train.out, Contains("iter 10: val loss") && Contains("iter 30: val loss") &&
                            Contains("iter 30/30 loss") && Contains("tokens/s") && Contains("final val loss"));
  REQUIRE(std::filesystem::exists(weights));

  // The KV cache changes nothing but the speed, across the context boundary (200 > 64).
  ProcessResult cached = cli("generate --load " + weights + " --tokens 200 --seed 7 --prompt \"the cat \"");
  ProcessResult plain = cli("generate --load " + weights + " --tokens 200 --seed 7 --prompt \"the cat \" --no-kv-cache");
  INFO(cached.out);
  CHECK(cached.exit_code == 0);
  CHECK(cached.out.rfind("the cat ", 0) == 0);
  CHECK(cached.out.size() == 8 + 200 + 1);  // the prompt, 200 one-byte characters, a newline
  CHECK(cached.out == plain.out);
  CHECK(cli("generate --load " + weights + " --tokens 50 --seed 8").out != cli("generate --load " + weights +
                                                                               " --tokens 50 --seed 9").out);
  ProcessResult greedy = cli("generate --load " + weights + " --tokens 20 --temperature 0 --seed 1");
  CHECK(greedy.out == cli("generate --load " + weights + " --tokens 20 --temperature 0 --seed 2").out);
  CHECK(cli("generate --load " + weights + " --tokens 20 --top-k 1 --seed 3").out == greedy.out);

  // graft eval: every whole window of the validation split (the last 10% of the ASCII text), the
  // same figure every time.
  ProcessResult eval = cli("eval --model gpt --load " + weights + " --data " + text);
  INFO(eval.out);
  CHECK(eval.exit_code == 0);
  const auto n = static_cast<int64_t>(std::filesystem::file_size(text)), n_val = n - n * 9 / 10;
  const int64_t windows = (n_val - 64 + 63) / 64;  // starts 0, 64, ... with start + 64 < n_val
  CHECK_THAT(eval.out, Contains("validation loss ") && Contains(std::to_string(windows) + " windows of 64 (" +
                                                                std::to_string(windows * 64) + " tokens)"));
  CHECK(eval.out == cli("eval --model gpt --load " + weights + " --data " + text).out);

  // Refusals name what is wrong.
  ProcessResult bad_prompt = cli("generate --load " + weights + " --prompt \"the Zebra\"");
  CHECK(bad_prompt.exit_code != 0);
  CHECK_THAT(bad_prompt.out, Contains("--prompt") && Contains("'Z' (U+005A)") && Contains("position 4"));
  CHECK_THAT(cli("generate --load " + weights + " --temperature -1").out, Contains("--temperature"));
  write_square_data_set(dir.path(), 64, 32);  // an image model's weights are not a GPT
  REQUIRE(cli("train --data " + dir.path() + " --batch-size 32 --save " + dir.file("mlp.safetensors")).exit_code == 0);
  CHECK_THAT(cli("generate --load " + dir.file("mlp.safetensors")).out,
             Contains("mlp.safetensors' is not a GPT saved by graft train --model gpt"));
  std::ofstream(dir.file("empty.txt")).close();
  CHECK_THAT(cli("train --model gpt --iters 5 --data " + dir.file("empty.txt")).out, Contains("the text is empty"));
  std::ofstream(dir.file("short.txt")) << "only a few characters here";
  CHECK_THAT(cli("eval --model gpt --load " + weights + " --data " + dir.file("short.txt")).out,
             Contains("was trained on a vocabulary of 18 characters, but") && Contains("short.txt has 14"));
  CHECK_THAT(cli("train --model gpt --iters 5 --data " + dir.file("short.txt")).out,
             Contains("fewer than one window of 65"));
  CHECK_THAT(cli("train --model gpt --epochs 3").out, Contains("gpt trains in --iters"));
  CHECK_THAT(cli("train --model mlp --iters 3").out, Contains("apply to gpt only"));
}
