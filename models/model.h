#pragma once
// graft::models: the models `graft train`, `graft eval` and `graft bench` build, defined once.
//
// A Model is a module plus the same computation as a Sequential of checkpointable units:
// `module` owns the parameters (move, save, load and switch train/eval through it); `stages`
// shares its tensors and runs the same function, its children being the units that
// checkpoint_sequential, checkpoint_nested and AutoCheckpoint work on (the layers of mlp and cnn,
// whose stages are the module itself; the embedding, each transformer block and the classifier of
// vit). Without stages a model trains plainly but cannot be checkpointed.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "nn/module.h"
#include "nn/sequential.h"

namespace graft::models {

// Gpt is the character-level language model (models/gpt.h): it is made from its vocabulary's size.
enum class Kind { Mlp, Cnn, Vit, Gpt };

struct Model {
  Model() = default;
  // A Sequential is its own stages.
  Model(std::shared_ptr<nn::Sequential> sequential) : module(sequential), stages(sequential) {}  // NOLINT
  // Any other module: trained plainly (no stages).
  Model(std::shared_ptr<nn::Module> m) : module(std::move(m)) {}  // NOLINT
  Model(std::shared_ptr<nn::Module> m, std::shared_ptr<nn::Sequential> s) : module(std::move(m)), stages(std::move(s)) {}

  std::shared_ptr<nn::Module> module;
  std::shared_ptr<nn::Sequential> stages;  // null: no checkpointable units
};

// A fresh model of `kind`, initialised from the global generator (seed it first). Gpt needs its
// vocabulary: make_model(Kind::Gpt, dropout, vocab_size).
Model make_model(Kind kind);
// The same with dropout probability `dropout` where the model has dropout layers (vit); a model
// without them refuses a nonzero probability.
Model make_model(Kind kind, double dropout, int64_t vocab_size = 0);

// Moves the module to `device`, and on the CPU to channels-last: oneDNN then convolves NHWC
// activations without reorders (a model without 4-D parameters is unaffected). Parameters keep
// their identity, so an optimizer built before still works.
void place_on(nn::Module& module, Device device);

// Whether `kind` reads images (Fashion-MNIST) rather than text.
bool is_image_model(Kind kind);

// "mlp", "cnn", "vit", "gpt": the names the command line uses.
std::string_view kind_name(Kind kind);
// Every kind, in the order the command line lists them.
const std::vector<Kind>& all_kinds();
// The kind named `name`; an error lists the names there are.
Kind kind_from_name(std::string_view name);

}  // namespace graft::models
