#include "train/console_log.h"

#include <algorithm>

#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

namespace {
double mib(int64_t bytes) { return static_cast<double>(bytes) / (1 << 20); }
}  // namespace

ConsoleLog::ConsoleLog(std::FILE* out) : out_(out) { GRAFT_CHECK(out != nullptr, "ConsoleLog: no stream"); }

void ConsoleLog::on_before_backward(TrainerState& s) {
  if (!s.budget || s.budget->replans() <= plans_printed_) return;
  plans_printed_ = s.budget->replans();
  const nn::CheckpointPlan& plan = s.budget->plan();
  predicted_peak_ = std::max(predicted_peak_, plan.predicted_peak_bytes + plan.budget_bytes - plan.step_budget_bytes);
  std::fprintf(out_, "%s", s.budget->plan().table().c_str());
}

void ConsoleLog::on_epoch_end(TrainerState& s) {
  const auto epoch = static_cast<long long>(s.epoch + 1);
  if (const EvalResult* ev = s.fresh_eval())
    std::fprintf(out_, "epoch %lld: train loss %.4f, test loss %.4f, test accuracy %.2f%%, %.1f s\n", epoch,
                 s.train_loss, ev->loss, 100 * ev->accuracy, s.epoch_seconds);
  else
    std::fprintf(out_, "epoch %lld: train loss %.4f, %.1f s\n", epoch, s.train_loss, s.epoch_seconds);
  std::fflush(out_);
}

void ConsoleLog::on_train_end(TrainerState& s) {
  if (s.peak_cpu_bytes == 0) return;  // no epoch ran here (a resumed run that had already ended)
  std::fprintf(out_, "peak memory while training: %.1f MiB allocated on cpu, %.1f MiB above the data set and model",
               mib(s.peak_cpu_bytes), mib(s.peak_cpu_bytes - s.base_cpu_bytes));
  if (s.budget)
    std::fprintf(out_,
                 " (the plans predicted at most %.1f MiB: the step, the optimizer's state and the input batch)",
                 mib(predicted_peak_));
  if (s.device.is_cuda()) std::fprintf(out_, ", %.1f MiB on %s", mib(s.peak_device_bytes), s.device.str().c_str());
  std::fprintf(out_, "\n");
}

}  // namespace graft::train
