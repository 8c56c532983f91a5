#include "nn/checkpoint_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <unordered_set>

#include "autograd/compress_saved.h"
#include "autograd/engine.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/save_on_disk.h"
#include "autograd/saved_tensor_hooks.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/generator.h"
#include "runtime/storage.h"

namespace graft::nn {

namespace {

using Clock = std::chrono::steady_clock;
using Modules = std::shared_ptr<const std::vector<std::shared_ptr<Module>>>;

const Storage* storage_of(const Tensor& t) { return t.defined() ? t.impl()->storage().get() : nullptr; }
int64_t storage_bytes(const Tensor& t) {
  return t.defined() ? static_cast<int64_t>(t.impl()->storage()->nbytes()) : 0;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// The hooks an offloaded layer runs under: files on a CPU device, pinned host memory on CUDA.
std::unique_ptr<autograd::SavedTensorsHooks> offload_hooks(const Tensor& like, const BudgetOptions& o) {
  if (like.is_cpu()) return std::make_unique<autograd::SaveOnDisk>(o.offload_dir, 0);
  return std::make_unique<autograd::SaveOnCpu>(/*pin_memory=*/true);
}

// Seconds per byte of writing a buffer out and reading it back where offloaded tensors go.
double offload_seconds_per_byte(const Tensor& like, const BudgetOptions& o) {
  constexpr int64_t kProbe = 8 << 20;
  Tensor probe = ops::zeros({kProbe / 4}, kFloat32, like.device());
  auto t0 = Clock::now();
  {
    // Through the very hooks run_plan uses, so the figure includes their copies.
    // v, not the leaf w: SaveOnDisk keeps leaves that require grad in memory (their owner holds them).
    Tensor w = probe.detach().requires_grad_(true);
    Tensor v = w * 1.0;
    Tensor y;
    {
      auto hooks = offload_hooks(like, o);
      y = (v * v).sum();
    }
    autograd::grad({y}, {w});
  }
  return seconds_since(t0) / static_cast<double>(2 * kProbe);  // v is saved twice by v * v
}

// The relative 2-norm error of each gradient against the exact one: the worst of them (parameters
// whose exact gradient is zero are skipped).
double worst_relative_error(const std::vector<Tensor>& got, const std::vector<Tensor>& exact) {
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!got[i].defined() || !exact[i].defined()) continue;
    const double den = ops::norm(exact[i].to(kFloat64)).item<double>();
    if (den == 0) continue;
    const double num = ops::norm(ops::sub(got[i].to(kFloat64), exact[i].to(kFloat64))).item<double>();
    worst = std::max(worst, std::isfinite(num) ? num / den : std::numeric_limits<double>::infinity());
  }
  return worst;
}

// The parameters' gradients of sum(model(input) * probe), every layer under `codec` when given.
std::vector<Tensor> probe_gradients(Sequential& model, const Tensor& input, const Tensor& probe,
                                    const std::vector<Tensor>& params, autograd::SavedCodec codec) {
  autograd::EnableGradGuard eg;
  Tensor y;
  {
    std::optional<autograd::CompressSaved> hooks;
    if (codec != autograd::SavedCodec::kNone) hooks.emplace(autograd::CompressOptions{.codec = codec});
    y = model.forward(input);
  }
  return autograd::grad({graft::sum(graft::mul(y, probe))}, params, {}, /*retain_graph=*/false,
                        /*create_graph=*/false, /*allow_unused=*/true);
}

// Per layer and codec: what the layer holds when run under the codec (its input an activation with
// history, as in training), and the codec's pack and unpack time for it.
void measure_codecs(Sequential& model, const std::vector<Tensor>& boundaries, const std::vector<autograd::SavedCodec>& codecs,
                    std::vector<LayerProfile>& L) {
  for (size_t i = 0; i < L.size(); ++i) {
    for (autograd::SavedCodec c : codecs) {
      autograd::EnableGradGuard eg;
      Tensor leaf = boundaries[i].detach().requires_grad_(true);
      Tensor x = leaf * 1.0;  // an activation with history, as the layer sees in training
      Tensor y;
      autograd::CompressStats st;
      {
        autograd::CompressSaved hooks(autograd::CompressOptions{.codec = c});
        y = (*model[i])(x);
        st = hooks.stats();
        autograd::grad({graft::sum(y)}, {leaf}, {}, false, false, /*allow_unused=*/true);
        st.unpack_seconds = hooks.stats().unpack_seconds;
      }
      L[i].codecs.push_back({autograd::codec_name(c), st.bytes_out + st.bytes_kept, st.pack_seconds + st.unpack_seconds});
    }
  }
}

// Each candidate codec on the whole model against the exact gradients of the same probe, the
// generator rewound before every pass so dropout draws the same masks.
std::vector<CodecCheck> check_codecs(Sequential& model, const Tensor& input, const BudgetOptions& o, Generator& gen,
                                     const RngState& rng) {
  GRAFT_CHECK(o.max_grad_error > 0, "plan_checkpoint: BudgetOptions::max_grad_error must be positive, got ",
              o.max_grad_error);
  // The parameters: registered ones, and leaves that require grad saved by some op (captured
  // weights, as in nn::Functional), found by a look-only pass.
  std::vector<Tensor> params = model.parameters();
  std::unordered_set<const Storage*> seen;
  for (const Tensor& p : params) seen.insert(storage_of(p));
  Tensor probe;
  {
    autograd::EnableGradGuard eg;
    autograd::SavedTensorsHooks look(
        [&](const Tensor& t) -> autograd::Packed {
          if (t.defined() && t.requires_grad() && t.is_leaf() && seen.insert(storage_of(t)).second) params.push_back(t);
          return Tensor();
        },
        [](const autograd::Packed&) -> Tensor { return Tensor(); });
    Tensor y = model.forward(input).detach();
    probe = ops::randn(y.sizes(), y.dtype(), y.device());
  }
  GRAFT_CHECK(!params.empty(), "plan_checkpoint: checking a codec needs the model's parameters, and this model has "
              "none that require grad");
  gen.set_state(rng);
  std::vector<Tensor> exact = probe_gradients(model, input, probe, params, autograd::SavedCodec::kNone);
  std::vector<CodecCheck> out;
  for (autograd::SavedCodec c : o.codecs) {
    if (c == autograd::SavedCodec::kNone) continue;
    gen.set_state(rng);
    CodecCheck k;
    k.codec = c;
    k.grad_error = worst_relative_error(probe_gradients(model, input, probe, params, c), exact);
    k.accepted = k.grad_error <= o.max_grad_error;
    out.push_back(k);
  }
  return out;
}

std::vector<LayerProfile> measure(Sequential& model, const Tensor& input, const BudgetOptions& o) {
  const size_t n = model.size();
  std::unordered_set<const Storage*> params;
  for (const Tensor& p : model.parameters()) params.insert(storage_of(p));

  struct Saved {
    size_t layer;
    const Storage* storage;
    int64_t bytes;
  };
  std::vector<Saved> saved;
  std::vector<const Storage*> in_st(n), out_st(n);
  std::vector<LayerProfile> L(n);
  std::vector<Tensor> boundaries(n);  // each layer's input, for the codecs' measurement
  size_t current = 0;
  Tensor y;
  {
    autograd::EnableGradGuard eg;
    autograd::SavedTensorsHooks record(
        [&](const Tensor& t) -> autograd::Packed {
          // Leaves that require grad are parameters (registered or captured, as in nn::Functional):
          // they exist before the step and after it, whatever the plan.
          if (t.defined() && t.requires_grad() && t.is_leaf()) params.insert(storage_of(t));
          saved.push_back({current, storage_of(t), storage_bytes(t)});
          return t;
        },
        [](const autograd::Packed& p) -> Tensor { return std::any_cast<const Tensor&>(p); });
    Tensor x = input;
    for (size_t i = 0; i < n; ++i) {
      current = i;
      in_st[i] = storage_of(x);
      if (!o.codecs.empty()) boundaries[i] = x.detach();
      L[i].input_bytes = storage_bytes(x);
      x = (*model[i])(x);
      out_st[i] = storage_of(x);
      L[i].output_bytes = storage_bytes(x);
    }
    y = x;
  }
  // Each storage counts once, for the first layer that saves it; boundaries become flags.
  std::unordered_set<const Storage*> counted;
  for (const Saved& s : saved) {
    LayerProfile& l = L[s.layer];
    if (!s.storage || params.count(s.storage)) continue;
    if (s.storage == in_st[s.layer]) l.saves_input = true;
    else if (s.storage == out_st[s.layer]) l.saves_output = true;
    else if (counted.insert(s.storage).second) l.own_bytes += s.bytes;
  }
  y = Tensor();
  // Forward times: the faster of two timed passes after the measured one (warm caches).
  for (int rep = 0; rep < 2; ++rep) {
    autograd::EnableGradGuard eg;
    Tensor x = input;
    for (size_t i = 0; i < n; ++i) {
      auto t0 = Clock::now();
      x = (*model[i])(x);
      double t = seconds_since(t0);
      L[i].forward_seconds = rep == 0 ? t : std::min(L[i].forward_seconds, t);
    }
  }
  if (o.allow_offload) {
    GRAFT_CHECK(!input.is_cpu() || !o.offload_dir.empty(),
                "plan_checkpoint: offload on a CPU device needs BudgetOptions::offload_dir (where SaveOnDisk writes)");
    double spb = offload_seconds_per_byte(input, o);
    for (auto& l : L)
      l.offload_seconds = spb * static_cast<double>(l.own_bytes + (l.saves_input ? l.input_bytes : 0) +
                                                    (l.saves_output ? l.output_bytes : 0));
  }
  if (!o.codecs.empty()) measure_codecs(model, boundaries, o.codecs, L);
  for (size_t i = 0; i < n; ++i) L[i].name = std::to_string(i) + ": " + model[i]->name();
  return L;
}

void mark(const std::vector<PlanStep>& steps, int depth, CheckpointPlan& p) {
  for (const PlanStep& s : steps)
    for (int i = s.first; i <= s.last; ++i) {
      auto& d = p.decisions[static_cast<size_t>(i)];
      if (s.kind == StepKind::Offload) d = autograd::CheckpointPolicy::MustOffload;
      if (s.kind == StepKind::Compress)
        p.codec[static_cast<size_t>(i)] = p.profiles[static_cast<size_t>(i)].codecs[static_cast<size_t>(s.codec)].name;
      if (s.kind == StepKind::Segment) {
        d = autograd::CheckpointPolicy::MustRecompute;
        p.depth[static_cast<size_t>(i)] = std::max(p.depth[static_cast<size_t>(i)], depth + 1);
      }
    }
  for (const PlanStep& s : steps)
    if (s.kind == StepKind::Segment) mark(s.inner, depth + 1, p);
}

Tensor run_steps(const Modules& mods, const std::shared_ptr<const std::vector<PlanStep>>& steps, Tensor x,
                 const BudgetOptions& o) {
  for (const PlanStep& s : *steps) {
    switch (s.kind) {
      case StepKind::Keep: x = (*(*mods)[static_cast<size_t>(s.first)])(x); break;
      case StepKind::Offload: {
        auto hooks = offload_hooks(x, o);
        x = (*(*mods)[static_cast<size_t>(s.first)])(x);
        break;
      }
      case StepKind::Compress: {
        autograd::CompressSaved hooks(autograd::CompressOptions{.codec = o.codecs[static_cast<size_t>(s.codec)]});
        x = (*(*mods)[static_cast<size_t>(s.first)])(x);
        break;
      }
      case StepKind::Segment: {
        // The re-run needs the steps after this call returned: they travel with the closure.
        auto inner = std::make_shared<const std::vector<PlanStep>>(s.inner);
        int first = s.first, last = s.last;
        x = autograd::checkpoint(
            [mods, inner, first, last, o](const Tensor& in) {
              if (!inner->empty()) return run_steps(mods, inner, in, o);
              Tensor h = in;
              for (int i = first; i <= last; ++i) h = (*(*mods)[static_cast<size_t>(i)])(h);
              return h;
            },
            x);
        break;
      }
    }
  }
  return x;
}

std::string mib(int64_t bytes) {
  std::ostringstream os;
  os << std::fixed << std::setprecision(2) << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return os.str();
}

const char* decision_name(autograd::CheckpointPolicy p) {
  switch (p) {
    case autograd::CheckpointPolicy::MustSave: return "keep";
    case autograd::CheckpointPolicy::MustRecompute: return "recompute";
    case autograd::CheckpointPolicy::MustOffload: return "offload";
    default: return "?";
  }
}

}  // namespace

CheckpointPlan plan_checkpoint(Sequential& model, const Tensor& example_input, int64_t budget_bytes,
                               const BudgetOptions& options) {
  GRAFT_CHECK(example_input.defined(), "plan_checkpoint: the example input is undefined");
  GRAFT_CHECK(budget_bytes > 0, "plan_checkpoint: the budget must be positive, got ", budget_bytes, " bytes");
  GRAFT_CHECK(!model.empty(), "plan_checkpoint: the model has no layers");
  Generator& gen = default_generator(example_input.device());
  RngState rng = gen.get_state();
  std::vector<LayerProfile> L;
  std::vector<CodecCheck> checks;
  BudgetOptions measured = options;
  try {
    if (!options.codecs.empty()) {
      checks = check_codecs(model, example_input.detach(), options, gen, rng);
      measured.codecs.clear();
      for (const CodecCheck& c : checks)
        if (c.accepted) measured.codecs.push_back(c.codec);
      gen.set_state(rng);
    }
    L = measure(model, example_input.detach(), measured);
  } catch (...) {
    gen.set_state(rng);
    throw;
  }
  gen.set_state(rng);

  CheckpointPlan p;
  p.budget_bytes = budget_bytes;
  p.options = measured;
  p.codec_checks = checks;
  p.profiles = L;
  p.plain_peak_bytes = evaluate_plan(L, sequential_plan(static_cast<int>(L.size()), 1)).peak_bytes;
  SolvedPlan s = solve_plan(L, budget_bytes, options.units);
  if (s.cost.peak_bytes < 0) {
    int64_t minimum = min_peak_bytes(L);
    GRAFT_ERROR("plan_checkpoint: no plan fits a budget of ", mib(budget_bytes), " (", budget_bytes,
                " bytes): the minimum any plan reaches is ", mib(minimum), " (", minimum,
                " bytes); keeping everything needs ", mib(p.plain_peak_bytes));
  }
  p.steps = s.steps;
  p.predicted_peak_bytes = s.cost.peak_bytes;
  double fwd = 0;
  for (const auto& l : L) fwd += l.forward_seconds;
  p.predicted_extra_forward = fwd > 0 ? s.cost.extra_seconds / fwd : 0;
  p.decisions.assign(L.size(), autograd::CheckpointPolicy::MustSave);
  p.depth.assign(L.size(), 0);
  p.codec.assign(L.size(), "");
  for (const auto& l : L) p.layers.push_back(l.name);
  mark(p.steps, 0, p);
  return p;
}

Tensor run_plan(Sequential& model, const CheckpointPlan& plan, const Tensor& input) {
  GRAFT_CHECK(plan.layers.size() == model.size(), "run_plan: the plan has ", plan.layers.size(),
              " layers but the model has ", model.size());
  auto mods = std::make_shared<const std::vector<std::shared_ptr<Module>>>(model.begin(), model.end());
  return run_steps(mods, std::make_shared<const std::vector<PlanStep>>(plan.steps), input, plan.options);
}

std::string CheckpointPlan::table() const {
  std::ostringstream os;
  os << "memory budget plan: budget " << mib(budget_bytes) << ", predicted peak " << mib(predicted_peak_bytes)
     << " (keeping everything: " << mib(plain_peak_bytes) << "), extra forward time "
     << std::fixed << std::setprecision(2) << predicted_extra_forward << "x\n";
  for (const CodecCheck& c : codec_checks) {
    std::ostringstream err;
    err << std::scientific << std::setprecision(2) << c.grad_error;
    os << "codec " << autograd::codec_name(c.codec) << ": largest parameter-gradient error " << err.str()
       << (c.accepted ? " (accepted" : " (rejected") << ", limit " << options.max_grad_error << ")\n";
  }
  size_t w = 5;
  for (const auto& l : layers) w = std::max(w, l.size());
  os << std::left << std::setw(static_cast<int>(w)) << "layer" << "  " << std::setw(13) << "decision" << "  "
     << std::setw(5) << "depth" << "  " << std::right << std::setw(12) << "saved" << "  " << std::setw(12) << "output"
     << "  " << std::setw(10) << "fwd ms" << "\n";
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerProfile& l = profiles[i];
    int64_t saved = l.own_bytes + (l.saves_input ? l.input_bytes : 0) + (l.saves_output ? l.output_bytes : 0);
    const std::string what = i < codec.size() && !codec[i].empty() ? "compress " + codec[i] : decision_name(decisions[i]);
    os << std::left << std::setw(static_cast<int>(w)) << layers[i] << "  " << std::setw(13) << what
       << "  " << std::setw(5) << depth[i] << "  " << std::right << std::setw(12) << mib(saved) << "  " << std::setw(12)
       << mib(l.output_bytes) << "  " << std::setw(10) << std::setprecision(3) << l.forward_seconds * 1e3 << "\n";
  }
  return os.str();
}

AutoCheckpoint::AutoCheckpoint(std::shared_ptr<Sequential> model, int64_t budget_bytes, BudgetOptions options)
    : model_(std::move(model)), budget_(budget_bytes), options_(std::move(options)) {
  GRAFT_CHECK(model_ != nullptr, "AutoCheckpoint: the model is null");
  register_module("model", model_);
}

Tensor AutoCheckpoint::forward(const Tensor& input) {
  auto it = plans_.find(input.sizes());
  if (it == plans_.end()) {
    it = plans_.emplace(input.sizes(), plan_checkpoint(*model_, input, budget_, options_)).first;
    ++replans_;
  }
  current_ = &it->second;
  return run_plan(*model_, *current_, input);
}

const CheckpointPlan& AutoCheckpoint::plan() const {
  GRAFT_CHECK(current_ != nullptr, "AutoCheckpoint: no plan yet (it is made on the first forward)");
  return *current_;
}

}  // namespace graft::nn
