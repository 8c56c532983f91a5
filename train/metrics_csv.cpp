#include "train/metrics_csv.h"

#include <sstream>

#include "runtime/error.h"
#include "train/trainer_state.h"

namespace graft::train {

MetricsCsv::MetricsCsv(const std::string& path) : path_(path), file_(path) {
  GRAFT_CHECK(file_.good(), "train: cannot write ", path);
  file_ << "kind,epoch,step,loss,test_loss,test_accuracy,samples_per_s,seconds\n";
}

void MetricsCsv::on_step_end(TrainerState& s) {
  file_ << "step," << s.epoch + 1 << ',' << s.global_step << ',' << s.step_loss << ",,,"
        << static_cast<double>(s.epoch_samples) / s.epoch_seconds << ',' << s.epoch_seconds << '\n';
}

void MetricsCsv::on_epoch_end(TrainerState& s) {
  file_ << "epoch," << s.epoch + 1 << ',' << s.global_step << ',' << s.train_loss << ',';
  if (const EvalResult* ev = s.fresh_eval()) file_ << ev->loss << ',' << ev->accuracy;
  else file_ << ',';
  file_ << ',' << static_cast<double>(s.train_samples) / s.epoch_seconds << ',' << s.epoch_seconds << '\n';
  file_.flush();  // a run that stops later keeps its finished epochs
}

std::string MetricsCsv::save_state() {
  file_.flush();
  std::ifstream in(path_, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void MetricsCsv::load_state(const std::string& state) {
  file_.close();
  file_.open(path_, std::ios::binary | std::ios::trunc);
  file_ << state;
  file_.flush();
  GRAFT_CHECK(file_.good(), "train: cannot write ", path_);
}

}  // namespace graft::train
