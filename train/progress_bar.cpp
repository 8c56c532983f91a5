#include "train/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <string>

#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

ProgressBar::ProgressBar(std::FILE* out, int64_t every) : ProgressBar(out, isatty(fileno(out)) != 0, every) {}

ProgressBar::ProgressBar(std::FILE* out, bool terminal, int64_t every) : out_(out), terminal_(terminal), every_(every) {
  GRAFT_CHECK(out != nullptr && every > 0, "ProgressBar: needs a stream and a positive interval, got every = ", every);
}

void ProgressBar::on_step_end(TrainerState& s) {
  const double sps = static_cast<double>(s.epoch_samples) / s.epoch_seconds;
  const double eta = s.epoch_seconds / static_cast<double>(s.step) * static_cast<double>(s.steps_per_epoch - s.step);
  const auto epoch = static_cast<long long>(s.epoch + 1), epochs = static_cast<long long>(s.epochs);
  const auto step = static_cast<long long>(s.step), steps = static_cast<long long>(s.steps_per_epoch);
  if (terminal_) {
    const int width = 30, filled = static_cast<int>(width * s.step / std::max<int64_t>(1, s.steps_per_epoch));
    std::fprintf(out_, "\repoch %lld/%lld [%s%s] %lld/%lld loss %.4f %.0f samples/s ETA %.0fs ", epoch, epochs,
                 std::string(filled, '#').c_str(), std::string(width - filled, '.').c_str(), step, steps, s.step_loss,
                 sps, eta);
  } else if (s.step % every_ == 0 || s.step == s.steps_per_epoch) {
    std::fprintf(out_, "epoch %lld/%lld step %lld/%lld loss %.4f %.0f samples/s ETA %.0fs\n", epoch, epochs, step,
                 steps, s.step_loss, sps, eta);
  }
}

void ProgressBar::on_epoch_steps_end(TrainerState&) {
  if (terminal_) std::fprintf(out_, "\n");
}

}  // namespace graft::train
