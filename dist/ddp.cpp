#include "dist/ddp.h"

#include <algorithm>
#include <map>
#include <sstream>

#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/multi_grad_hook.h"
#include "dist/dist.h"
#include "ops/ops.h"

namespace graft::dist {

struct DistributedDataParallel::Bucket {
  std::vector<int64_t> params;   // indices into params_
  std::vector<int64_t> offsets;  // element offset of each parameter's gradient in `flat`
  int64_t grad_numel = 0;
  Tensor flat;                   // [grad_numel + params.size()]: gradients, then used counts
  ProcessGroup* group = nullptr;

  Tensor slot(size_t j, const Tensor& p) const { return flat.narrow(0, offsets[j], p.numel()).view(p.sizes()); }
};

// One synced backward: which buckets are in their buffers, which were launched and how.
struct DistributedDataParallel::StepState {
  int64_t task_id = -1;
  bool finished = false;
  std::vector<bool> filled, launched_in_backward;
  std::vector<std::shared_ptr<Work>> works;
  size_t next_launch = 0;
  std::vector<int64_t> order;
  std::vector<std::chrono::steady_clock::time_point> launched_at;
};

namespace {

std::string shape_and_dtype(const std::vector<int64_t>& sig, size_t& pos) {
  std::ostringstream os;
  DType d = static_cast<DType>(sig[pos++]);
  int64_t nd = sig[pos++];
  os << "[";
  for (int64_t i = 0; i < nd; ++i) os << (i ? ", " : "") << sig[pos++];
  os << "] " << d;
  return os.str();
}

}  // namespace

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<nn::Module> module, DDPOptions options)
    : module_(std::move(module)), options_(options),
      accumulated_in_task_(std::make_shared<std::vector<int64_t>>()) {
  GRAFT_CHECK(module_ != nullptr, "DistributedDataParallel: the module is null");
  GRAFT_CHECK(options_.first_bucket_bytes > 0 && options_.bucket_cap_bytes > 0,
              "DistributedDataParallel: bucket sizes must be positive, got first_bucket_bytes ",
              options_.first_bucket_bytes, " and bucket_cap_bytes ", options_.bucket_cap_bytes);
  if (!is_initialized()) init();
  register_module("module", module_);
  for (auto& [name, p] : module_->named_parameters()) {
    if (!p.requires_grad()) continue;
    params_.push_back(p);
    param_names_.push_back(name);
  }
  accumulated_in_task_->assign(params_.size(), -1);
  if (world_size() > 1) {
    check_same_model();
    sync_module_state(true);
  }
  build_buckets();
}

DistributedDataParallel::~DistributedDataParallel() {
  for (auto& h : hooks_) h.remove();
  try {
    drain();
  } catch (...) {
  }
}

// Invariant 1: two all_gathers whose sizes every rank can compute before comparing anything:
// (count, signature length), then the signatures padded to the longest.
void DistributedDataParallel::check_same_model() {
  std::vector<int64_t> sig;
  for (const Tensor& p : params_) {
    sig.push_back(static_cast<int64_t>(p.dtype()));
    sig.push_back(p.dim());
    for (int64_t s : p.sizes()) sig.push_back(s);
  }
  Tensor head = tensor(std::vector<int64_t>{static_cast<int64_t>(params_.size()), static_cast<int64_t>(sig.size())}, {2});
  auto heads = dist::all_gather(head);
  int64_t max_len = 0;
  std::vector<std::pair<int64_t, int64_t>> h;
  for (const Tensor& t : heads) {
    auto v = t.to_vector<int64_t>();
    h.emplace_back(v[0], v[1]);
    max_len = std::max(max_len, v[1]);
  }
  std::vector<int64_t> padded = sig;
  padded.resize(static_cast<size_t>(std::max<int64_t>(max_len, 1)), -1);
  auto sigs = dist::all_gather(tensor(padded, {static_cast<int64_t>(padded.size())}));
  const int me = rank();
  for (size_t r = 1; r < sigs.size(); ++r) {
    GRAFT_CHECK(h[r].first == h[0].first, "DistributedDataParallel: rank 0 has ", h[0].first,
                " parameters that require grad but rank ", r, " has ", h[r].first,
                ": every rank must build the same model (this is rank ", me, ")");
    auto a = sigs[0].to_vector<int64_t>(), b = sigs[r].to_vector<int64_t>();
    size_t pa = 0, pb = 0;
    for (int64_t i = 0; i < h[0].first; ++i) {
      std::string da = shape_and_dtype(a, pa), db = shape_and_dtype(b, pb);
      GRAFT_CHECK(da == db, "DistributedDataParallel: parameter ", i, " ('", param_names_[static_cast<size_t>(i)],
                  "' here) is ", da, " on rank 0 but ", db, " on rank ", r,
                  ": every rank must build the same model (this is rank ", me, ")");
    }
  }
}

void DistributedDataParallel::sync_module_state(bool params) {
  NoGradGuard no_grad;
  if (params)
    for (Tensor& p : params_) {
      Tensor t = p;
      dist::broadcast(t, 0);
    }
  for (Tensor b : module_->buffers()) dist::broadcast(b, 0);
}

// Invariant 2: PyTorch's assignment (compute_bucket_assignment_by_size) in reverse order.
void DistributedDataParallel::build_buckets() {
  struct Open {
    int64_t bucket = -1;
    int64_t limit;
  };
  std::map<std::pair<int, std::pair<int, int>>, Open> open;  // (dtype, (device type, index))
  std::vector<BucketInfo> infos;
  for (int64_t i = static_cast<int64_t>(params_.size()) - 1; i >= 0; --i) {
    const Tensor& p = params_[static_cast<size_t>(i)];
    auto key = std::make_pair(static_cast<int>(p.dtype()),
                              std::make_pair(static_cast<int>(p.device().type), p.device().index));
    auto it = open.find(key);
    if (it == open.end()) it = open.emplace(key, Open{-1, options_.first_bucket_bytes}).first;
    if (it->second.bucket < 0) {
      it->second.bucket = static_cast<int64_t>(infos.size());
      infos.push_back(BucketInfo{{}, p.dtype(), p.device(), 0});
    }
    BucketInfo& info = infos[static_cast<size_t>(it->second.bucket)];
    info.params.push_back(i);
    info.bytes += p.numel() * static_cast<int64_t>(element_size(p.dtype()));
    if (info.bytes >= it->second.limit) {
      it->second.bucket = -1;
      it->second.limit = options_.bucket_cap_bytes;
    }
  }
  bucket_info_ = infos;
  const bool distributed = world_size() > 1;
  for (size_t b = 0; b < infos.size(); ++b) {
    auto bucket = std::make_unique<Bucket>();
    bucket->params = infos[b].params;
    std::vector<Tensor> tensors;
    for (int64_t i : bucket->params) {
      const Tensor& p = params_[static_cast<size_t>(i)];
      bucket->offsets.push_back(bucket->grad_numel);
      bucket->grad_numel += p.numel();
      tensors.push_back(p);
    }
    if (distributed) {
      // A world of one gets no buffers and no hooks: one rank's average is its own gradient,
      // already in .grad, and a parameter it did not use keeps its .grad, exactly as invariant 5
      // would leave them (and accumulate_directly stays available to the optimizer-free path).
      bucket->flat = ops::zeros({bucket->grad_numel + static_cast<int64_t>(bucket->params.size())},
                                infos[b].dtype, infos[b].device);
      bucket->group = &process_group(infos[b].device);
      stats_.bucket_buffer_bytes += bucket->flat.numel() * static_cast<int64_t>(element_size(infos[b].dtype));
      hooks_.push_back(autograd::register_multi_grad_hook(
          tensors, [this, b](const std::vector<Tensor>& grads) { on_bucket_ready(b, grads); }));
    }
    buckets_.push_back(std::move(bucket));
  }
  if (distributed)
    for (size_t i = 0; i < params_.size(); ++i)
      hooks_.push_back(params_[i].register_post_accumulate_grad_hook([this, i](Tensor&) {
        (*accumulated_in_task_)[i] = autograd::current_graph_task_id();
        poll();
      }));
}

Tensor DistributedDataParallel::forward(const Tensor& input) {
  drain();  // invariant 7
  if (is_grad_enabled()) {
    sync_armed_ = require_sync_;
    if (options_.broadcast_buffers && world_size() > 1 && !module_->buffers().empty()) sync_module_state(false);
  }
  return (*module_)(input);
}

void DistributedDataParallel::on_bucket_ready(size_t b, const std::vector<Tensor>& grads) {
  if (!sync_armed_) return;
  // Only a task that accumulates into .grad takes part: autograd::grad() (or backward(inputs=)
  // elsewhere) captures the gradients and must neither communicate nor touch .grad.
  bool accumulates = false;
  for (size_t j = 0; j < grads.size() && !accumulates; ++j)
    if (grads[j].defined()) {
      auto acc = autograd::grad_accumulator(params_[static_cast<size_t>(buckets_[b]->params[j])]);
      accumulates = acc && autograd::task_runs_without_capture(acc.get());
    }
  if (!accumulates) return;
  const int64_t task = autograd::current_graph_task_id();
  if (!step_ || step_->task_id != task) {
    drain();
    step_ = std::make_unique<StepState>();
    step_->task_id = task;
    step_->filled.assign(buckets_.size(), false);
    step_->launched_in_backward.assign(buckets_.size(), false);
    step_->works.resize(buckets_.size());
    step_->launched_at.resize(buckets_.size());
    autograd::queue_callback([this] { finalize_backward(); });
  }
  fill_bucket(b, &grads);
  launch_ready_buckets(true);
}

// Invariant 4: the value .grad will hold once this task's accumulation is done.
void DistributedDataParallel::fill_bucket(size_t b, const std::vector<Tensor>* grads) {
  NoGradGuard no_grad;
  Bucket& bucket = *buckets_[b];
  const int64_t task = step_->task_id;
  std::vector<double> used(bucket.params.size(), 0.0);
  for (size_t j = 0; j < bucket.params.size(); ++j) {
    const size_t i = static_cast<size_t>(bucket.params[j]);
    const Tensor& p = params_[i];
    Tensor dest = bucket.slot(j, p);
    Tensor g = grads ? (*grads)[j] : Tensor();
    Tensor cur = p.grad();
    const bool accumulated = (*accumulated_in_task_)[i] == task;
    if (accumulated) {
      dest.copy_(cur);
    } else if (cur.defined() && g.defined()) {
      dest.copy_(cur);
      dest.add_(g);
    } else if (g.defined()) {
      dest.copy_(g);
    } else if (cur.defined()) {
      dest.copy_(cur);
    } else {
      dest.zero_();
    }
    used[j] = accumulated || g.defined() ? 1.0 : 0.0;
  }
  Tensor counts = bucket.flat.narrow(0, bucket.grad_numel, static_cast<int64_t>(used.size()));
  counts.copy_(tensor(used, {static_cast<int64_t>(used.size())}).to(counts.dtype()));
  step_->filled[b] = true;
}

void DistributedDataParallel::launch_ready_buckets(bool in_backward) {
  StepState& s = *step_;
  while (s.next_launch < buckets_.size() && s.filled[s.next_launch]) {
    const size_t b = s.next_launch++;
    Bucket& bucket = *buckets_[b];
    s.works[b] = bucket.group->all_reduce(bucket.flat, ReduceOp::Sum);
    s.launched_in_backward[b] = in_backward;
    s.launched_at[b] = std::chrono::steady_clock::now();
    s.order.push_back(static_cast<int64_t>(b));
  }
}

void DistributedDataParallel::poll() {
  if (!options_.poll_during_backward || !step_ || step_->finished) return;
  for (size_t b = 0; b < step_->next_launch; ++b)
    if (step_->works[b] && step_->works[b]->test()) step_->works[b].reset();
}

// Invariant 5, run by the engine when the graph task has run its last node.
void DistributedDataParallel::finalize_backward() {
  StepState& s = *step_;
  auto t0 = std::chrono::steady_clock::now();  // backward's last node has run
  for (size_t b = 0; b < buckets_.size(); ++b)
    if (!s.filled[b]) fill_bucket(b, nullptr);
  launch_ready_buckets(false);
  std::vector<double> lead(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b)
    lead[b] = std::max(0.0, std::chrono::duration<double, std::milli>(t0 - s.launched_at[b]).count());
  for (auto& w : s.works)
    if (w) w->wait();
  double wait_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  s.finished = true;

  NoGradGuard no_grad;
  const double world = static_cast<double>(world_size());
  int64_t bytes = 0, bytes_in_backward = 0;
  for (size_t b = 0; b < buckets_.size(); ++b) {
    Bucket& bucket = *buckets_[b];
    auto counts = bucket.flat.narrow(0, bucket.grad_numel, static_cast<int64_t>(bucket.params.size()))
                      .to(kFloat64).to_vector<double>();
    bucket.flat.narrow(0, 0, bucket.grad_numel).div_(world);
    for (size_t j = 0; j < bucket.params.size(); ++j) {
      if (counts[j] == 0) continue;  // no rank used it: .grad stays as it was
      Tensor& p = params_[static_cast<size_t>(bucket.params[j])];
      Tensor reduced = bucket.slot(j, p);
      Tensor& g = p.mutable_grad();
      if (g.defined() && !g.requires_grad() && g.sizes() == p.sizes() && g.is_contiguous()) g.copy_(reduced);
      else g = ops::clone(reduced);
    }
    const int64_t nbytes = bucket_info_[b].bytes;
    bytes += nbytes;
    if (s.launched_in_backward[b]) bytes_in_backward += nbytes;
  }
  stats_.steps += 1;
  stats_.bytes_per_step = bytes;
  stats_.launch_order = s.order;
  stats_.launched_in_backward = s.launched_in_backward;
  stats_.last_exposed_wait_ms = wait_ms;
  stats_.launch_lead_ms = lead;
  for (double l : lead) stats_.total_launch_lead_ms += l;
  stats_.total_exposed_wait_ms += wait_ms;
  stats_.bytes_launched_in_backward += bytes_in_backward;
  stats_.bytes_launched_total += bytes;
  step_.reset();
}

void DistributedDataParallel::drain() {
  if (!step_) return;
  auto step = std::move(step_);
  for (auto& w : step->works)
    if (w) w->wait();
}

DistributedDataParallel::NoSync::NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.require_sync_) {
  ddp_.require_sync_ = false;
}
DistributedDataParallel::NoSync::~NoSync() { ddp_.require_sync_ = prev_; }

}  // namespace graft::dist
