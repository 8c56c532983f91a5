#include "dist/ddp_callback.h"

#include <algorithm>

#include "autograd/functional.h"
#include "dist/dist.h"
#include "train/trainer_state.h"

namespace graft::dist {

train::World training_world() {
  train::World w;
  w.rank = rank();
  w.size = world_size();
  if (w.size > 1)
    w.sum_in_place = [](std::vector<double>& v) {
      Tensor t = tensor(v, {static_cast<int64_t>(v.size())}, dtype(kFloat64));
      all_reduce(t);
      v = t.to_vector<double>();
    };
  return w;
}

DDPCallback::DDPCallback(DDPOptions options, std::FILE* out) : options_(options), out_(out) {}

void DDPCallback::on_train_begin(train::TrainerState& s) {
  if (world_size() <= 1) return;
  ddp_ = std::make_shared<DistributedDataParallel>(s.forward, options_);
  s.forward = ddp_;
}

void DDPCallback::on_train_end(train::TrainerState&) {
  if (!ddp_) return;
  const auto& st = ddp_->stats();
  const double steps = static_cast<double>(std::max<int64_t>(1, st.steps));
  const double launched = st.bytes_launched_total ? 100.0 * static_cast<double>(st.bytes_launched_in_backward) /
                                                        static_cast<double>(st.bytes_launched_total)
                                                  : 0.0;
  std::fprintf(out_,
               "data-parallel: %zu bucket(s), %.2f MiB all-reduced per step, %.0f%% of it launched before backward "
               "ended (%.3f ms ahead of the end per step, summed over buckets), exposed wait %.3f ms per step "
               "(polling %s), %.2f MiB of bucket buffers\n",
               ddp_->buckets().size(), static_cast<double>(st.bytes_per_step) / (1 << 20), launched,
               st.total_launch_lead_ms / steps, st.total_exposed_wait_ms / steps,
               options_.poll_during_backward ? "on" : "off", static_cast<double>(st.bucket_buffer_bytes) / (1 << 20));
}

}  // namespace graft::dist
