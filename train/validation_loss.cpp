#include "train/validation_loss.h"

#include <algorithm>

#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "data/char_corpus.h"
#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

ValidationLoss::ValidationLoss(Tensor val_ids, ValidationLossOptions o) : ids_(std::move(val_ids)), options_(o) {
  GRAFT_CHECK(ids_.defined() && ids_.dim() == 1 && ids_.size(0) > o.context, "ValidationLoss: the validation split "
              "has ", ids_.defined() ? ids_.numel() : 0, " characters, fewer than one window of ", o.context + 1,
              " (the context plus its next character); use a longer text");
  GRAFT_CHECK(o.windows >= 1 && o.every >= 0 && o.batch >= 1, "ValidationLoss: windows and batch must be positive "
              "and every at least 0");
}

EvalResult windows_loss(nn::Module& model, const Tensor& ids, const std::vector<int64_t>& starts, int64_t context,
                        int64_t batch, Device device, const std::function<Tensor(const Tensor&)>& prepare) {
  GRAFT_CHECK(!starts.empty() && batch >= 1, "windows_loss: no windows to evaluate (", starts.size(),
              " starts, batch ", batch, ")");
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard no_grad;
  double loss_sum = 0;
  int64_t correct = 0, tokens = 0;
  for (size_t first = 0; first < starts.size(); first += static_cast<size_t>(batch)) {
    const size_t last = std::min(starts.size(), first + static_cast<size_t>(batch));
    std::vector<int64_t> chunk(starts.begin() + static_cast<std::ptrdiff_t>(first),
                               starts.begin() + static_cast<std::ptrdiff_t>(last));
    const auto b = static_cast<int64_t>(chunk.size());
    data::Batch w = data::text_windows(ids, graft::tensor(chunk, {b}, TensorOptions{}.dtype(kInt64)), context);
    Tensor y = w.labels.to(device).flatten();
    Tensor logits = model(prepare ? prepare(w.images) : w.images.to(device));
    logits = logits.reshape({-1, logits.size(-1)}).to(kFloat32);
    loss_sum += graft::cross_entropy(logits, y, {}, LossReduction::Sum).item<double>();
    correct += graft::eq(graft::argmax(logits, 1), y).sum().item<int64_t>();
    tokens += y.numel();
  }
  model.train(was_training);
  EvalResult r;
  r.loss = loss_sum / static_cast<double>(tokens);
  r.accuracy = static_cast<double>(correct) / static_cast<double>(tokens);
  r.samples = tokens;
  return r;
}

std::vector<int64_t> tiling_starts(int64_t num_ids, int64_t context) {
  std::vector<int64_t> starts;
  for (int64_t s = 0; s + context < num_ids; s += context) starts.push_back(s);
  return starts;
}

EvalResult ValidationLoss::evaluate(TrainerState& s, int64_t global_step) const {
  const int64_t T = options_.context, n = ids_.size(0);
  return windows_loss(*s.model, ids_, data::random_draws(n - T, options_.windows, options_.seed, global_step), T,
                      options_.batch, s.device, s.prepare_inputs);
}

void ValidationLoss::on_step_end(TrainerState& s) {
  const bool last = s.step == s.steps_per_epoch && s.epoch + 1 == s.epochs;
  const bool due = options_.every > 0 && s.global_step % options_.every == 0;
  if (!due && !last && !(s.stop && s.max_steps > 0 && s.global_step >= s.max_steps)) return;
  s.eval = evaluate(s, s.global_step);
  s.eval_step = s.global_step;
}

}  // namespace graft::train
