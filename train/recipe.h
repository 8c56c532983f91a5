#pragma once
// train::Recipe: what `graft train` computes (model, epochs, batch, optimizer, schedule, inputs,
// device, checkpointing, seed) as typed fields, with every model's defaults in one place
// (recipe.cpp), and the command line's view of it: each field is a flag.
//
// Invariants:
// 1. make(given) is the defaults of the model given (mlp when none), then each given flag, then
//    the defaults that follow other fields (vit: one warmup epoch when it trains more than one
//    epoch on the cosine schedule; gpt: warmup for 5% of its iterations). A flag given always wins; one not given takes its model's
//    default whatever the order of the flags.
// 2. check(flag, text) and set(flag, text) accept the same texts; a refusal says in words what the
//    flag takes ("expected a whole number of at least 1, got 0"), never a raw bound, and set()
//    names the flag.
// 3. validate() refuses what no run could honour (a field out of its range, warmup without the
//    cosine schedule or as long as the run, a memory budget next to --checkpoint), naming the
//    flags. make() returns only recipes that pass it; a Trainer checks the ones built in C++.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autograd/compress_saved.h"
#include "models/model.h"
#include "runtime/device.h"
#include "runtime/tensor.h"
#include "train/flag_parse.h"

namespace graft::train {

enum class OptimizerKind { Sgd, Adam, AdamW };
enum class Schedule { None, Cosine, Step };
enum class Checkpointing { None, Sqrt, Nested };
// fp32: everything in float32. bf16 / fp16: forward and loss under autocast in that dtype
// (parameters, gradients, optimizer state and saved weights stay float32); fp16 adds a GradScaler.
enum class Precision { Fp32, Bf16, Fp16 };
std::string_view name(OptimizerKind kind);  // "sgd", "adam", "adamw"
std::string_view name(Schedule schedule);   // "none", "cosine", "step"
std::string_view name(Checkpointing mode);  // "none", "sqrt", "nested"
std::string_view name(Precision precision);  // "fp32", "bf16", "fp16"
// The autocast dtype of a precision (bf16 -> kBFloat16, fp16 -> kFloat16); fp32 has none.
DType autocast_dtype(Precision precision);

// A field as the command line shows it.
struct RecipeField {
  std::string flag;       // "--epochs"
  std::string negation;   // a switch's off flag ("--no-normalize"), or empty
  std::string type_name;  // "INT", "FLOAT", "{sgd,adam,adamw}", ...; empty for a switch
  std::string help;       // what it does, what it takes in words, and each model's default
  bool is_switch = false;
};

struct Recipe {
  models::Kind model = models::Kind::Mlp;
  int64_t epochs = 1;
  int64_t batch_size = 128;  // under data parallelism the global batch, split over the ranks
  OptimizerKind optimizer = OptimizerKind::Adam;
  double lr = 1e-3;
  std::optional<double> weight_decay;  // unset: the optimizer's own (0; 0.01 for adamw)
  Schedule schedule = Schedule::Cosine;  // stepped once per optimizer step
  int64_t warmup_epochs = 0;  // linear warmup before the cosine schedule
  bool normalize = true;      // standardise pixels with the training set's mean and std
  Device device = kCPU;
  Checkpointing checkpoint = Checkpointing::None;
  std::optional<ByteSize> memory_budget;  // plan checkpointing to fit it (nn::AutoCheckpoint)
  bool save_on_cpu = false;   // keep saved activations on the CPU (autograd::SaveOnCpu)
  // Saved activations in fewer bits (autograd::CompressSaved): bf16 or int8 for the tolerant ones,
  // 1-bit masks for relu; none: as they are. With --memory-budget the plan decides per layer
  // whether to compress with it; compress_auto lets the plan pick bf16 or int8 per layer.
  autograd::SavedCodec compress = autograd::SavedCodec::kNone;
  bool compress_auto = false;
  Precision precision = Precision::Fp32;
  double dropout = 0;         // vit and gpt: their dropout probability
  // gpt trains in iterations (one pass of `iters` batches of random text windows), not epochs.
  int64_t iters = 0;          // gpt: training iterations; 0 for the image models
  int64_t eval_every = 0;     // gpt: validation loss every N iterations (and at the end); 0: at the end only
  int64_t warmup_iters = 0;   // gpt: linear warmup iterations before the cosine schedule
  double min_lr = 0;          // the cosine schedule's final learning rate
  std::pair<double, double> betas{0.9, 0.999};  // adam and adamw
  double grad_clip = 0;       // clip the gradients' total 2-norm to this before each step; 0: off
  uint64_t seed = 0;          // the global generator (model initialisation) and the loader's shuffle

  using Flags = std::vector<std::pair<std::string, std::string>>;  // flag, text
  // The recipe of `model` when no flag is given.
  static Recipe defaults(models::Kind model);
  // Invariant 1; throws what set() and validate() throw.
  static Recipe make(const Flags& given);
  // Reads one field from its flag's text. "--model" sets the model only: make() takes its defaults.
  void set(const std::string& flag, const std::string& text);
  // What set() would refuse, in words without the flag's name; empty when `text` is fine.
  static std::string check(const std::string& flag, const std::string& text);
  void validate() const;
  // Every field as a flag whose text make() reads back to this exact recipe (numbers to 17
  // significant digits, switches as true/false); a field left unset (weight decay, memory budget)
  // is omitted. A run checkpoint records its recipe this way.
  Flags to_flags() const;
  // "model mlp, 1 epochs, batch 128, adam lr 0.001 (cosine schedule), standardised inputs, device
  // cpu, precision fp32, checkpoint none, seed 0": graft train's banner (gpt: its iterations,
  // warmup, betas, clipping and evaluation instead of epochs and inputs).
  std::string describe() const;
  // A batch of images as the model takes it: on the device, standardised when `normalize`.
  Tensor prepare_inputs(const Tensor& images) const;
  // The fields in the order --help lists them.
  static const std::vector<RecipeField>& fields();
};

}  // namespace graft::train
