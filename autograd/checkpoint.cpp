#include "autograd/checkpoint.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>

#include "autograd/autocast.h"
#include "autograd/autograd_meta.h"
#include "autograd/engine.h"
#include "autograd/grad_mode.h"
#include "autograd/saved_tensor_hooks.h"
#include "runtime/backend_hooks.h"
#include "runtime/dispatcher.h"
#include "runtime/generator.h"

namespace graft::autograd {

namespace {

struct CachedOutput {
  OpResult outputs;
  std::vector<int64_t> versions;
};

struct Frame;

// What a checkpointed op's SavedVariable holds instead of the tensor. While fn's forward is still
// running, fn may itself call grad() on its own graph: `live` then gives back the saved tensor if
// its memory is still alive, through a weak reference to its storage. Weak, so that a segment's
// forward frees each activation when fn's own code drops it, as a plain forward would, and not
// only when fn returns (the memory-budget planner counts a segment's forward as its input alone).
// A saved tensor whose memory fn has already dropped is recomputed, as after fn returns.
struct LiveView {
  std::weak_ptr<Storage> storage;
  DType dtype = kFloat32;
  Shape sizes, strides;
  int64_t offset = 0;
  bool running = false;  // fn's forward has not returned yet

  static LiveView of(const Tensor& t) {
    return LiveView{t.impl()->storage(), t.dtype(), t.sizes(), t.strides(), t.storage_offset(), true};
  }
  Tensor get() const {
    if (!running) return Tensor();
    std::shared_ptr<Storage> st = storage.lock();
    if (!st) return Tensor();
    return Tensor(std::make_shared<TensorImpl>(std::move(st), dtype, sizes, strides, offset));
  }
};

struct Placeholder {
  std::shared_ptr<Frame> frame;
  size_t index;
  LiveView live;
};

// One checkpoint call: the function, its saved inputs and what its forward saved (metadata only).
struct Frame {
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn;
  CheckpointOptions opts;
  std::vector<SavedVariable> inputs;  // saved into the enclosing context
  std::vector<bool> input_requires_grad;
  std::vector<TensorMeta> metas;
  std::vector<std::weak_ptr<Placeholder>> holders;  // alive while the graph may still unpack them
  RngState rng_cpu;
  std::vector<std::pair<int, RngState>> rng_cuda;
  autocast::AutocastState autocast;  // the forward's, reinstalled by the recomputation
  std::map<std::string, std::vector<CachedOutput>> cache;  // selective checkpointing, in call order
  std::vector<std::string> forward_ops;                     // debug: the forward's op sequence
  bool running = false;  // fn's forward has not returned: a recomputation now must stop early
  std::mutex mu;
};

// Per graph task: the recomputed tensors, dropped as they are consumed.
struct TaskResults final : GraphTaskState {
  bool ran = false;
  std::vector<Tensor> tensors;
  std::vector<bool> consumed;
  // With CheckpointOptions::recompute_hooks: the recomputed tensors in their packed form (then
  // `tensors` stays empty), and the unpack hook of the pair that packed them.
  std::vector<Packed> packed;
  std::shared_ptr<const UnpackHook> unpack;
};

struct StopRecompute {};

thread_local int t_early_stop_override = -1;  // CheckpointEarlyStop: -1 none, 0 off, 1 on

bool has_policy(const CheckpointOptions& o) { return o.policy || o.op_policy; }

bool saves_policy(const CheckpointOptions& o, const Op& op, const Stack& args) {
  if (!has_policy(o) || op.schema.is_inplace() || op.schema.is_view()) return false;
  CheckpointPolicy p;
  if (o.op_policy) {
    OpCall call{op.schema.name, {}};
    for (const auto& a : args) {
      if (const auto* t = std::get_if<Tensor>(&a)) call.inputs.push_back(*t);
      else if (const auto* ts = std::get_if<std::vector<Tensor>>(&a)) call.inputs.insert(call.inputs.end(), ts->begin(), ts->end());
    }
    p = o.op_policy(call);
  } else {
    p = o.policy(op.schema.name);
  }
  GRAFT_CHECK(p != CheckpointPolicy::MustOffload && p != CheckpointPolicy::PreferOffload, "checkpoint: op ",
              op.schema.name, " got an offload policy, which op-level policies do not support yet (offload whole "
              "layers with nn::plan_checkpoint or a SaveOnDisk/SaveOnCpu scope)");
  return p == CheckpointPolicy::MustSave || p == CheckpointPolicy::PreferSave;
}

// "mm([4, 8] float32, [8, 8] float32) -> [4, 8]": one line of checkpoint's debug op sequence.
std::string describe_call(const Op& op, const Stack& args, const OpResult& out) {
  std::ostringstream os;
  os << op.schema.name << "(";
  bool first = true;
  for (const auto& a : args) {
    if (const auto* t = std::get_if<Tensor>(&a)) {
      os << (first ? "" : ", ") << (t->defined() ? shape_str(t->sizes()) + " " + dtype_name(t->dtype()) : "undefined");
      first = false;
    }
  }
  os << ") ->";
  for (const auto& t : out) os << " " << (t.defined() ? shape_str(t.sizes()) : "undefined");
  return os.str();
}

// Debug mode: records every op the function runs, in order.
class OpRecorder final : public DispatchMode {
 public:
  explicit OpRecorder(std::vector<std::string>& ops) : ops_(ops) {}
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    OpResult out = next(args);
    ops_.push_back(describe_call(op, args, out));
    return out;
  }

 private:
  std::vector<std::string>& ops_;
};

// The forward's and the recomputation's op sequences side by side, the first difference marked.
std::string debug_table(const std::vector<std::string>& fwd, const std::vector<std::string>& rec) {
  size_t w = 8;
  for (const auto& e : fwd) w = std::max(w, e.size());
  std::ostringstream os;
  os << "\ncheckpoint debug: ops of the original forward and of the recomputation (the recomputation stops at the "
        "failure):\n";
  os << "      #  " << std::left << std::setw(static_cast<int>(w)) << "forward" << "  recomputation\n";
  bool marked = false;
  for (size_t i = 0; i < std::max(fwd.size(), rec.size()); ++i) {
    std::string a = i < fwd.size() ? fwd[i] : "-", b = i < rec.size() ? rec[i] : "-";
    bool diff = !marked && a != b && (i < rec.size());
    os << (diff ? " >> " : "    ") << std::right << std::setw(3) << i << "  " << std::left << std::setw(static_cast<int>(w))
       << a << "  " << b
       << (diff ? "   <-- first difference" : "") << "\n";
    marked = marked || diff;
  }
  return os.str();
}

// Selective checkpointing as a dispatch mode: in the forward it keeps the outputs of *Save ops; in
// the recomputation it hands them back in the same order instead of running the kernel.
class PolicyMode final : public DispatchMode {
 public:
  PolicyMode(Frame& f, bool recompute) : f_(f), recompute_(recompute) {}
  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override {
    if (!saves_policy(f_.opts, op, args)) return next(args);
    const std::string& name = op.schema.name;
    if (!recompute_) {
      OpResult out = next(args);
      // Data only (same storage, so in-place writes still show in the version): the forward's
      // tensor gets a grad_fn whose saved placeholders own this frame, and keeping it here would
      // close a cycle.
      CachedOutput c;
      for (auto& t : out) {
        c.outputs.push_back(t.defined() ? alias_without_history(t) : Tensor());
        c.versions.push_back(t.defined() ? t.version() : 0);
      }
      std::lock_guard<std::mutex> lock(f_.mu);
      f_.cache[name].push_back(std::move(c));
      return out;
    }
    size_t k = cursor_[name]++;
    std::lock_guard<std::mutex> lock(f_.mu);
    auto it = f_.cache.find(name);
    GRAFT_CHECK(it != f_.cache.end() && k < it->second.size(), "checkpoint: the recomputation called ", name,
                " more often than the original forward (call ", k + 1, "); the checkpointed function must run the "
                "same ops in the same order");
    const CachedOutput& c = it->second[k];
    for (size_t i = 0; i < c.outputs.size() && !f_.opts.allow_cache_entry_mutation; ++i)
      GRAFT_CHECK(!c.outputs[i].defined() || c.outputs[i].version() == c.versions[i], "checkpoint: the output of ",
                  name, " kept by the selective checkpoint policy was modified in place after the forward (version ",
                  c.versions[i], " -> ", c.outputs[i].version(), "); set allow_cache_entry_mutation=true to allow it");
    // A fresh alias per recomputation: the recomputed graph attaches its history to it.
    OpResult out;
    for (const auto& t : c.outputs) out.push_back(t.defined() ? alias_without_history(t) : Tensor());
    return out;
  }

 private:
  Frame& f_;
  bool recompute_;
  std::map<std::string, size_t> cursor_;
};

// Restores the RNG states of the original call for the guard's lifetime.
class RngReplay {
 public:
  explicit RngReplay(const Frame& f) {
    saved_cpu_ = default_generator().get_state();
    default_generator().set_state(f.rng_cpu);
    for (auto& [idx, st] : f.rng_cuda) {
      Generator& g = default_generator(Device(DeviceType::CUDA, idx));
      saved_cuda_.emplace_back(idx, g.get_state());
      g.set_state(st);
    }
  }
  ~RngReplay() {
    default_generator().set_state(saved_cpu_);
    for (auto& [idx, st] : saved_cuda_) default_generator(Device(DeviceType::CUDA, idx)).set_state(st);
  }

 private:
  RngState saved_cpu_;
  std::vector<std::pair<int, RngState>> saved_cuda_;
};

void recompute(Frame& f, TaskResults& r) {
  size_t n = f.metas.size();
  // The last index the graph may still unpack: later ones were consumed and released already.
  size_t target = 0;
  bool any = false;
  for (size_t i = 0; i < n; ++i)
    if (!(f.opts.early_stop || f.running) || !f.holders[i].expired()) {
      target = i;
      any = true;
    }
  r.tensors.assign(n, Tensor());
  r.packed.assign(n, Packed());
  r.consumed.assign(n, false);
  if (!any) return;

  // Inputs first: for a nested checkpoint this recomputes the parent (only as far as needed).
  std::vector<Tensor> ins;
  for (size_t i = 0; i < f.inputs.size(); ++i) {
    Tensor t = f.inputs[i].unpack();
    if (!t.defined()) {
      ins.push_back(t);
      continue;
    }
    Tensor d = t.detach();
    if (f.input_requires_grad[i]) d.requires_grad_(true);
    ins.push_back(d);
  }

  std::optional<RngReplay> rng;
  if (f.opts.preserve_rng_state) rng.emplace(f);
  std::vector<std::string> rec_ops;  // debug: this recomputation's op sequence
  auto debug_info = [&]() { return f.opts.debug ? debug_table(f.forward_ops, rec_ops) : std::string(); };
  // A save that fails the check: ops save their inputs before their kernel runs (so an early stop
  // skips the kernel), so the failing op is not in rec_ops yet; its line names the saving node.
  auto debug_info_at = [&](const Tensor& t) {
    if (!f.opts.debug) return std::string();
    const SaveSite* site = current_save_site();
    std::vector<std::string> rec = rec_ops;
    rec.push_back((site && site->node ? site->node->name() : std::string("a save outside any op")) + " saves " +
                  (site && site->is_output ? "output " : "input ") + TensorMeta::of(t).str());
    return debug_table(f.forward_ops, rec);
  };
  AutogradTls fresh;  // no enclosing hooks, grad mode on
  fresh.grad_enabled = true;
  AutogradTlsGuard tls(fresh);
  // The forward's autocast state (the engine runs backward with it off), so every op casts as it
  // did and saves tensors of the same dtypes, as torch.utils.checkpoint does.
  autocast::AutocastStateGuard autocast_state(f.autocast);
  // The packing pair for what comes back, made in the fresh context and under `collect`, which
  // calls it itself: fn's own saves reach `collect` first, as without it.
  std::unique_ptr<SavedTensorsHooks> packing;
  std::optional<SavedHooksPair> pack_pair;
  if (f.opts.recompute_hooks) {
    packing = f.opts.recompute_hooks();
    GRAFT_CHECK(packing != nullptr && current_saved_hooks() != nullptr,
                "checkpoint: CheckpointOptions::recompute_hooks returned no hooks");
    pack_pair = *current_saved_hooks();
    r.unpack = pack_pair->unpack;
  }
  size_t next = 0;
  bool stopped = false;
  {
    SavedTensorsHooks collect(
        [&](const Tensor& t) -> Packed {
          size_t k = next++;
          if (k >= n) {
            GRAFT_CHECK(!f.opts.determinism_check, "checkpoint: the recomputation saved a different number of tensors "
                        "than the original forward (more than ", n, "). Hint: the checkpointed function must be "
                        "deterministic (same ops, same shapes, same control flow); set determinism_check=false to "
                        "skip this check.", debug_info_at(t));
            return Packed{alias_without_history(t)};
          }
          TensorMeta now = TensorMeta::of(t);
          const TensorMeta& was = f.metas[k];
          GRAFT_CHECK(!f.opts.determinism_check || now == was,
                      "checkpoint: recomputed tensor ", k, " has different metadata than during the original "
                      "forward: ", was.str(), " before, ", now.str(), " after. Hint: the checkpointed function "
                      "must be deterministic (same ops on the same shapes); set determinism_check=false to skip this "
                      "check.", debug_info_at(t));
          // Data only: the original graph gives it back its history when it unpacks (see
          // SavedVariable), so nothing of the recomputation's graph outlives this call.
          Tensor data = alias_without_history(t);
          Packed kept = data;
          if (pack_pair) {
            // t: as the op saved it (the hooks read its save site). The recomputation's own graph
            // gets the packed value too, so that it does not hold every activation in full until fn
            // returns: a compressed re-run then peaks as a compressed forward does.
            r.packed[k] = (*pack_pair->pack)(t);
            kept = r.packed[k];
          } else {
            r.tensors[k] = data;
          }
          // While fn's forward still runs (it called grad()), the original forward has saved only
          // the first n tensors: a recomputation must stop there.
          if ((f.opts.early_stop || f.running) && k >= target) throw StopRecompute{};
          return kept;
        },
        // Only reached when fn calls grad() on its own graph during the recomputation. It keeps no
        // reference to this task's results: the recomputed graph may outlive them.
        [pack_pair](const Packed& p) -> Tensor {
          if (pack_pair) return (*pack_pair->unpack)(p);
          return std::any_cast<const Tensor&>(p);
        });
    std::unique_ptr<PolicyMode> pmode;
    std::unique_ptr<DispatchModeGuard> pguard;
    if (has_policy(f.opts)) {
      pmode = std::make_unique<PolicyMode>(f, /*recompute=*/true);
      pguard = std::make_unique<DispatchModeGuard>(pmode.get());
    }
    // Innermost, so it also sees the calls the policy answers from its cache.
    std::optional<OpRecorder> recorder;
    std::optional<DispatchModeGuard> rguard;
    if (f.opts.debug) {
      recorder.emplace(rec_ops);
      rguard.emplace(&*recorder);
    }
    try {
      f.fn(ins);
    } catch (const StopRecompute&) {
      stopped = true;
    }
  }
  GRAFT_CHECK(stopped || !f.opts.determinism_check || next == n, "checkpoint: the recomputation saved a different "
              "number of tensors than the original forward: ", n, " originally, ", next, " when recomputed. Hint: "
              "the checkpointed function must be deterministic (same ops, same control flow); set "
              "determinism_check=false to skip this check.", debug_info());
}

Tensor unpack_placeholder(const Packed& p) {
  const auto& ph = std::any_cast<const std::shared_ptr<Placeholder>&>(p);
  if (Tensor t = ph->live.get(); t.defined()) return t;  // fn is still running its forward (it called grad())
  Frame& f = *ph->frame;
  GraphTask* task = current_graph_task();
  GRAFT_CHECK(task != nullptr, "checkpoint: saved tensors of a checkpointed function can only be unpacked during a "
                               "backward (they are recomputed on demand)");
  TaskResults* r = &graph_task_state<TaskResults>(task, &f);
  if (!r->ran) {
    r->ran = true;
    recompute(f, *r);
  }
  size_t k = ph->index;
  GRAFT_CHECK(!r->consumed[k], "checkpoint: saved tensor ", k, " of a checkpointed function was unpacked twice in "
              "one backward. Recomputed tensors are handed out once per graph task and then dropped to free memory, "
              "so a second read cannot be served without recomputing the whole function again; read each saved "
              "tensor once per backward (e.g. keep the value from ctx->saved_tensors() instead of calling it twice).");
  GRAFT_CHECK(r->tensors[k].defined() || r->packed[k].has_value(), "checkpoint: saved tensor ", k,
              " was not recomputed (it was already released when the recomputation ran)");
  r->consumed[k] = true;
  if (r->packed[k].has_value()) {
    Packed p = std::exchange(r->packed[k], Packed());
    return (*r->unpack)(p);
  }
  return std::move(r->tensors[k]);
}

}  // namespace

std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs, CheckpointOptions options) {
  GRAFT_CHECK(fn != nullptr, "checkpoint: the function is empty");
  // Nothing fn runs is recorded now (grad mode off, or InferenceMode), so no backward can ask for a
  // recomputation: run it plainly, saving neither its inputs (an inference tensor cannot be saved)
  // nor placeholders.
  if (!is_recording_enabled()) return fn(inputs);
  auto f = std::make_shared<Frame>();
  f->fn = fn;
  f->opts = std::move(options);
  // The inputs are saved into the enclosing context, before this checkpoint's hooks exist, so an
  // outer hook pair or checkpoint packs exactly them.
  for (const Tensor& t : inputs) {
    f->inputs.emplace_back(t, false, nullptr, f->opts.input_tolerance);
    f->input_requires_grad.push_back(t.defined() && t.requires_grad());
  }
  if (t_early_stop_override >= 0) f->opts.early_stop = t_early_stop_override == 1;
  f->autocast = autocast::current_state();
  if (f->opts.preserve_rng_state) {
    f->rng_cpu = default_generator().get_state();
    for (int i = 0; i < cuda_device_count(); ++i)
      f->rng_cuda.emplace_back(i, default_generator(Device(DeviceType::CUDA, i)).get_state());
  }

  std::weak_ptr<Frame> weak = f;
  SavedTensorsHooks hooks(
      [weak](const Tensor& t) -> Packed {
        auto frame = weak.lock();
        auto ph = std::make_shared<Placeholder>(Placeholder{frame, frame->metas.size(), LiveView::of(t)});
        frame->metas.push_back(TensorMeta::of(t));
        frame->holders.push_back(ph);
        return ph;
      },
      unpack_placeholder,
      // With determinism_check off the recomputed tensor is used as computed (PyTorch's behaviour);
      // with it on, recompute() has already compared the metadata.
      /*check_unpacked_metadata=*/f->opts.determinism_check, "checkpoint");
  std::unique_ptr<PolicyMode> pmode;
  std::unique_ptr<DispatchModeGuard> pguard;
  if (has_policy(f->opts)) {
    pmode = std::make_unique<PolicyMode>(*f, /*recompute=*/false);
    pguard = std::make_unique<DispatchModeGuard>(pmode.get());
  }
  std::optional<OpRecorder> recorder;
  std::optional<DispatchModeGuard> rguard;
  if (f->opts.debug) {
    recorder.emplace(f->forward_ops);
    rguard.emplace(&*recorder);
  }
  // When fn is done (or throws), the graph holds only placeholders and the activations can go.
  struct DropLive {
    Frame& f;
    ~DropLive() {
      f.running = false;
      for (auto& w : f.holders)
        if (auto ph = w.lock()) ph->live = LiveView{};
    }
  } drop{*f};
  f->running = true;
  return fn(inputs);
}

std::function<CheckpointPolicy(const OpCall&)> save_ops(std::vector<std::string> op_names) {
  return [names = std::move(op_names)](const OpCall& call) {
    for (const auto& n : names)
      if (call.name == n) return CheckpointPolicy::MustSave;
    return CheckpointPolicy::PreferRecompute;
  };
}

CheckpointEarlyStop::CheckpointEarlyStop(bool enabled) : prev_(t_early_stop_override) {
  t_early_stop_override = enabled ? 1 : 0;
}
CheckpointEarlyStop::~CheckpointEarlyStop() { t_early_stop_override = prev_; }

Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, CheckpointOptions options) {
  return checkpoint([fn](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in[0])}; }, {input},
                    std::move(options))[0];
}

}  // namespace graft::autograd
