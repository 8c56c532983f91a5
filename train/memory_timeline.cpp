#include "train/memory_timeline.h"

#include <cstdio>
#include <functional>
#include <utility>
#include <vector>

#include "autograd/compress_saved.h"
#include "runtime/error.h"
#include "runtime/generator.h"
#include "train/memory_timeline_chart.h"
#include "train/staged_forward.h"
#include "train/trainer_state.h"

namespace graft::train {

namespace {

using Mode = std::pair<std::string, std::function<Tensor()>>;  // label, forward

std::vector<Mode> modes(TrainerState& s, const Tensor& x) {
  GRAFT_CHECK(s.stages != nullptr, "train: --memory-timeline needs a model with stages");
  const Recipe& r = *s.recipe;
  std::vector<Mode> m;
  m.emplace_back("plain", [&s, x] { return run_stages(*s.stages, x, Checkpointing::None); });
  if (r.checkpoint != Checkpointing::None)
    m.emplace_back("checkpoint " + std::string(name(r.checkpoint)),
                   [&s, x, mode = r.checkpoint] { return run_stages(*s.stages, x, mode); });
  if (s.budget) m.emplace_back("budget " + r.memory_budget->text, [&s, x] { return (*s.budget)(x); });
  // --compress without a budget: every layer under the codec, as the training step runs it.
  if (r.compress != autograd::SavedCodec::kNone && !s.budget)
    m.emplace_back(std::string("compress ") + autograd::codec_name(r.compress), [&s, x, c = r.compress, seed = r.seed] {
      autograd::CompressSaved hooks(autograd::CompressOptions{.codec = c, .seed = seed});
      return run_stages(*s.stages, x, Checkpointing::None);
    });
  return m;
}

void clear_grads(nn::Module& model) {
  for (Tensor& p : model.parameters()) p.mutable_grad() = Tensor();
}

}  // namespace

MemoryTimeline::MemoryTimeline(std::string path, std::FILE* out) : path_(std::move(path)), out_(out) {}

void MemoryTimeline::on_train_begin(TrainerState& s) {
  auto b = s.loader->next();
  GRAFT_CHECK(b.has_value(), "train: --memory-timeline needs at least one batch");
  Tensor x = s.prepare_inputs(b->images), y = b->labels.to(s.device);
  std::vector<TimelineSeries> series;
  Generator& gen = default_generator(s.device);
  RngState rng = gen.get_state();
  for (auto& [label, forward] : modes(s, x)) {
    if (label.rfind("budget", 0) == 0) s.loss_fn(forward(), y).backward();  // plans outside the log
    clear_grads(*s.model);
    gen.set_state(rng);
    series.push_back(record_timeline(label, s.device, [&] { s.loss_fn(forward(), y).backward(); }));
    if (label.rfind("budget", 0) == 0) series.back().budget_bytes = s.recipe->memory_budget->bytes;
  }
  clear_grads(*s.model);
  gen.set_state(rng);
  s.loader->set_epoch(0);  // the loop starts the loader over
  write_memory_timeline(path_, series);
  std::fprintf(out_, "wrote the memory timeline of one step (%zu modes) to %s\n", series.size(), path_.c_str());
}

}  // namespace graft::train
