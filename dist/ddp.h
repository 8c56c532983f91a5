#pragma once
// DistributedDataParallel: data-parallel training. Each rank runs the whole model on its share of
// the batch; backward all-reduces the gradients in buckets while it is still computing the rest.
//
// Invariants:
// 1. Same start: the constructor checks, with one collective whose size does not depend on the
//    model, that every rank has the same parameter count, shapes and dtypes (a mismatch is an
//    error on every rank, never a hang), then copies rank 0's parameters and buffers everywhere.
// 2. Buckets: parameters that require grad, in reverse registration order (backward produces the
//    last layers' gradients first), grouped by (dtype, device); a bucket closes once it holds
//    first_bucket_bytes (the first of a kind) or bucket_cap_bytes. Each owns one flat buffer:
//    its gradients, then one slot per parameter counting the ranks that used it.
// 3. Readiness comes from autograd: one multi-grad hook (All) per bucket fires in the graph task
//    once every parameter of the bucket the task reaches has its gradient. A fired bucket is
//    copied into its buffer and launched (async all-reduce) when every bucket before it was:
//    buckets launch strictly in index order on every rank, so collectives match by order.
// 4. A bucket's value for a parameter is what .grad will hold after this backward's accumulation
//    (earlier no_sync gradients included): the parameter's .grad once its accumulator ran in this
//    task (a post-accumulate hook records the task), else .grad plus the incoming gradient. A
//    parameter this rank did not use contributes its .grad or zeros and a used count of 0.
// 5. The end of the graph task (autograd::queue_callback) launches buckets whose hook never fired
//    (every parameter unused here), waits for all, and writes sum / world_size into .grad. A
//    parameter no rank used keeps its .grad (undefined when it had none). Every rank does the same
//    arithmetic on the same summed bits, so parameters stay bit-identical across ranks.
// 6. no_sync(): while it lives, backward only accumulates locally; the first backward after it
//    reduces the accumulated gradients (invariant 4). The mode is read at forward time, as
//    PyTorch's require_backward_grad_sync.
// 7. A backward that failed half-way leaves launched buckets behind; the next forward waits for
//    them and starts clean, so the ranks' collective sequences stay aligned.
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/process_group.h"
#include "nn/module.h"

namespace graft::dist {

struct DDPOptions {
  int64_t first_bucket_bytes = 1 << 20;
  int64_t bucket_cap_bytes = 25 << 20;
  bool broadcast_buffers = true;
  // Poll the in-flight all-reduces (Work::test) after each parameter's gradient is accumulated:
  // Open MPI has no progress thread, so an unpolled large message waits for the end of backward.
  bool poll_during_backward = true;
};

class DistributedDataParallel : public nn::Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options = {});
  ~DistributedDataParallel() override;
  DistributedDataParallel(const DistributedDataParallel&) = delete;
  DistributedDataParallel& operator=(const DistributedDataParallel&) = delete;

  Tensor forward(const Tensor& input) override;
  nn::Module& module() const { return *module_; }

  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp);
    ~NoSync();
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  NoSync no_sync() { return NoSync(*this); }

  struct BucketInfo {
    std::vector<int64_t> params;  // indices into the registration-ordered parameters
    DType dtype = kFloat32;
    Device device;
    int64_t bytes = 0;            // gradient bytes (the used counts are not counted)
  };
  struct Stats {
    int64_t steps = 0;                      // synced backwards finished
    int64_t bytes_per_step = 0;             // gradient bytes all-reduced per synced backward
    int64_t bucket_buffer_bytes = 0;        // memory DDP adds (the flat buffers)
    std::vector<int64_t> launch_order;      // last step: bucket indices in launch order
    std::vector<bool> launched_in_backward; // last step, per bucket: launched before the graph task's end
    std::vector<double> launch_lead_ms;     // last step, per bucket: how long before that end it launched
    double last_exposed_wait_ms = 0;        // last step: time the end of backward waited for all-reduces
    double total_exposed_wait_ms = 0;
    double total_launch_lead_ms = 0;        // summed over steps and buckets: all-reduce time hidden behind backward
    int64_t bytes_launched_in_backward = 0; // summed over steps
    int64_t bytes_launched_total = 0;
  };
  const std::vector<BucketInfo>& buckets() const { return bucket_info_; }
  const Stats& stats() const { return stats_; }
  void reset_stats() { stats_ = Stats(); }

 private:
  struct Bucket;
  struct StepState;
  void check_same_model();
  void sync_module_state(bool params);
  void build_buckets();
  void on_bucket_ready(size_t b, const std::vector<Tensor>& grads);
  void fill_bucket(size_t b, const std::vector<Tensor>* grads);
  void launch_ready_buckets(bool in_backward);
  void finalize_backward();
  void poll();
  void drain();

  std::shared_ptr<nn::Module> module_;
  DDPOptions options_;
  std::vector<Tensor> params_;            // registration order, requires grad
  std::vector<std::string> param_names_;
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::vector<BucketInfo> bucket_info_;
  std::vector<HookHandle> hooks_;
  std::shared_ptr<std::vector<int64_t>> accumulated_in_task_;  // per param: graph task id of its last accumulation
  bool require_sync_ = true;   // false inside no_sync
  bool sync_armed_ = true;     // require_sync_ at the last forward
  std::unique_ptr<StepState> step_;
  Stats stats_;
};

}  // namespace graft::dist
