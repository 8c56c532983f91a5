#include "train/iteration_log.h"

#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

IterationLog::IterationLog(int64_t tokens_per_sample, std::FILE* out, int64_t every)
    : tokens_per_sample_(tokens_per_sample), out_(out), every_(every) {
  GRAFT_CHECK(out != nullptr && every > 0 && tokens_per_sample > 0,
              "IterationLog: needs a stream, a positive interval and tokens per sample, got every = ", every,
              ", tokens per sample = ", tokens_per_sample);
}

void IterationLog::on_step_end(TrainerState& s) {
  const int64_t total = s.max_steps > 0 ? std::min(s.max_steps, s.epochs * s.steps_per_epoch)
                                        : s.epochs * s.steps_per_epoch;
  if (s.global_step % every_ == 0 || s.global_step == total) {
    const double tps = static_cast<double>(s.epoch_samples * tokens_per_sample_) / s.epoch_seconds;
    const double eta = s.epoch_seconds / static_cast<double>(s.step) * static_cast<double>(total - s.global_step);
    const double lr = s.optimizer ? s.optimizer->lr() : 0.0;
    std::fprintf(out_, "iter %lld/%lld loss %.4f lr %.3g %.0f tokens/s ETA %.0fs\n",
                 static_cast<long long>(s.global_step), static_cast<long long>(total), s.step_loss, lr, tps, eta);
  }
  if (const EvalResult* ev = s.fresh_eval())
    std::fprintf(out_, "iter %lld: val loss %.4f, next-char accuracy %.2f%%\n", static_cast<long long>(s.global_step),
                 ev->loss, 100 * ev->accuracy);
  std::fflush(out_);
}

void IterationLog::on_train_end(TrainerState& s) {
  if (s.interrupted || !s.eval) return;
  std::fprintf(out_, "final val loss %.4f after %lld iterations\n", s.eval->loss,
               static_cast<long long>(s.eval_step));
}

}  // namespace graft::train
