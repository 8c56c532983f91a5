#include "nn/checkpoint_plan.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <unordered_set>

#include "autograd/checkpoint_rows.h"
#include "autograd/compress_saved.h"
#include "autograd/engine.h"
#include "autograd/functional.h"
#include "autograd/grad_mode.h"
#include "autograd/save_on_disk.h"
#include "autograd/saved_tensor_hooks.h"
#include "ops/ops.h"
#include "runtime/error.h"
#include "runtime/generator.h"
#include "runtime/memory_log.h"
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

// The parameters' gradients of sum(model(input) * probe), every layer under `codec` when given,
// `chunks` rows of the batch at a time (summed: each row's term is separate), so that the pass
// holds one chunk's activations.
std::vector<Tensor> probe_gradients(Sequential& model, const Tensor& input, const Tensor& probe,
                                    const std::vector<Tensor>& params, autograd::SavedCodec codec, int64_t chunks) {
  const int64_t rows = input.dim() > 0 ? input.size(0) : 1;
  chunks = input.dim() > 0 ? std::clamp<int64_t>(chunks, 1, std::max<int64_t>(rows, 1)) : 1;
  const int64_t per = (rows + chunks - 1) / chunks;
  std::vector<Tensor> sum;
  for (int64_t lo = 0; lo < rows; lo += per) {
    const int64_t len = std::min(per, rows - lo);
    const Tensor in = chunks == 1 ? input : input.narrow(0, lo, len);
    const Tensor pr = chunks == 1 ? probe : probe.narrow(0, lo, len);
    autograd::EnableGradGuard eg;
    Tensor y;
    {
      std::optional<autograd::CompressSaved> hooks;
      if (codec != autograd::SavedCodec::kNone) hooks.emplace(autograd::CompressOptions{.codec = codec});
      y = model.forward(in);
    }
    std::vector<Tensor> g = autograd::grad({graft::sum(graft::mul(y, pr))}, params, {}, /*retain_graph=*/false,
                                           /*create_graph=*/false, /*allow_unused=*/true);
    if (sum.empty()) {
      sum = std::move(g);
    } else {
      for (size_t i = 0; i < g.size(); ++i)
        if (g[i].defined()) sum[i] = sum[i].defined() ? graft::add(sum[i], g[i]) : g[i];
    }
    if (chunks == 1) break;
  }
  return sum;
}

// The peak of one layer's backward above what is held when it starts (budget_solver.h, invariant
// 3): `y` is the layer's output and `input` its input when that needs a gradient, made in the
// caller's scope (under a codec's hooks for invariant 7). The layer gets a gradient of its own in
// y's layout (y * ones' backward makes one, as the next layer's would; a channels-last layer handed
// an NCHW gradient would pay a layout copy that training does not), so a backward that writes in
// place does so here too. Through autograd::grad, so no .grad is touched (invariant 1): the
// gradients of its parameters are fresh tensors, as a step after zero_grad(set_to_none) makes them,
// and the gradient it hands on is returned as computed. Measured with the memory log, which sees
// only what this work adds and leaves the allocator's peak alone; -1 (the model's estimate) while
// another log runs, e.g. a memory timeline's.
int64_t measure_backward(Module& layer, Tensor y, const Tensor& input, Device device) {
  if (!y.defined() || !y.requires_grad()) return 0;
  if (detail::g_memory_log_on.load()) return -1;
  std::vector<Tensor> inputs;
  for (const Tensor& p : layer.parameters())
    if (p.requires_grad()) inputs.push_back(p);
  if (input.defined() && input.requires_grad()) inputs.push_back(input);
  if (inputs.empty()) return 0;
  autograd::EnableGradGuard eg;
  // Held to the end, so that mul's node freeing its saved copy does not offset the log.
  const Tensor ones = ops::contiguous(ops::ones_like(y), y.suggest_memory_format());
  Tensor loss;
  {
    // This function's own saves stay as they are, whatever hooks the caller opened (a codec's).
    autograd::SavedTensorsHooks plain([](const Tensor& t) -> autograd::Packed { return t; },
                                      [](const autograd::Packed& p) { return std::any_cast<Tensor>(p); });
    loss = graft::sum(graft::mul(y, ones));
  }
  y = Tensor();
  memory_log_start(device);
  std::vector<MemoryEvent> ev;
  try {
    std::vector<Tensor> g = autograd::grad({loss}, inputs, {}, /*retain_graph=*/false, /*create_graph=*/false,
                                           /*allow_unused=*/true);
  } catch (...) {
    memory_log_stop();
    throw;
  }
  ev = memory_log_stop();
  int64_t peak = 0;
  for (const MemoryEvent& e : ev) peak = std::max(peak, e.bytes);
  return peak;
}

// Saves t under the open hooks as a neighbour would: mul declares both of its inputs lossy.
Tensor save_lossy(const Tensor& t) { return graft::mul(t, t); }

// One layer under each codec, on `boundary` (its input, made an activation with history as in
// training): what it holds, and the codec's pack and unpack time for it. Also what invariant 7 of
// budget_solver.h needs for two compressed neighbours: the bytes of its input's packing (held minus
// what it holds when its input was already packed, as a compressed predecessor's output is), and
// whether a later save of its output is deduplicated (its output is packed).
void measure_codecs(Module& layer, const Tensor& boundary, bool input_requires_grad,
                    const std::vector<autograd::SavedCodec>& codecs, LayerProfile& l) {
  for (autograd::SavedCodec c : codecs) {
    autograd::EnableGradGuard eg;
    Tensor leaf = boundary.detach().requires_grad_(input_requires_grad);
    LayerProfile::Codec m{autograd::codec_name(c)};
    // The pack and unpack time is the faster of two passes, as forward_seconds is: the first one
    // also pays for the codec's buffers of new sizes, which a step reuses from the allocator's
    // cache. One cold pass measured a ViT block's bf16 cost at 0.9-2.2 ms against 0.6 ms in steps,
    // dearer than recomputing the block, so the plan never chose the codec there.
    for (int rep = 0; rep < 2; ++rep) {
      Tensor x = leaf * 1.0;
      autograd::CompressSaved hooks(autograd::CompressOptions{.codec = c});
      Tensor y = layer(x);
      const autograd::CompressStats st = hooks.stats();
      m.held_bytes = st.bytes_out + st.bytes_kept;
      {
        Tensor after = save_lossy(y);
        const autograd::CompressStats st2 = hooks.stats();
        m.shares_output = st2.bytes_out + st2.bytes_kept == m.held_bytes && st2.deduplicated > st.deduplicated;
      }
      m.backward_bytes = measure_backward(layer, std::move(y), x, boundary.device());
      const double seconds = st.pack_seconds + hooks.stats().unpack_seconds;
      m.seconds = rep == 0 ? seconds : std::min(m.seconds, seconds);
    }
    {
      Tensor x = leaf * 1.0;
      autograd::CompressSaved hooks(autograd::CompressOptions{.codec = c});
      Tensor before = save_lossy(x);
      const autograd::CompressStats s0 = hooks.stats();
      Tensor y = layer(x);
      const autograd::CompressStats s1 = hooks.stats();
      const int64_t without_input = (s1.bytes_out + s1.bytes_kept) - (s0.bytes_out + s0.bytes_kept);
      m.input_bytes = std::clamp<int64_t>(m.held_bytes - without_input, 0, m.held_bytes);
    }
    l.codecs.push_back(std::move(m));
  }
}

// Each layer's backward peak (when `backward`) and its figures under each codec (when any), for the
// batch `input`, walking the model's boundaries one at a time: no grad between layers, so only the
// current boundary is held, and each layer's graph is freed before the next one runs.
void measure_rows(Sequential& model, const Tensor& input, const std::vector<autograd::SavedCodec>& codecs,
                  bool backward, std::vector<LayerProfile>& L) {
  Tensor x = input;
  for (size_t i = 0; i < L.size(); ++i) {
    if (backward) {
      autograd::EnableGradGuard eg;
      Tensor in = i == 0 ? x : x.detach().requires_grad_(true);
      Tensor y = (*model[i])(in);
      L[i].backward_bytes = measure_backward(*model[i], std::move(y), in, input.device());
    }
    if (!codecs.empty()) measure_codecs(*model[i], x, i > 0, codecs, L[i]);
    autograd::NoGradGuard ng;
    // Passed on as run_plan passes it, so a layer that works in place does so here too.
    x = model[i]->call_owned(std::move(x));
  }
}

// measure_rows for the whole batch, on the batch itself (chunk = 0) or, where measuring the whole
// batch would not fit the budget, on its first `chunk` and `2 chunk` rows, extrapolated along the
// line through the two. Every figure measured here is affine in the rows: activations, packings,
// their codes and kernel temporaries grow with the batch, parameters' gradients and per-channel
// scales do not. Two points fix an affine figure exactly, up to the allocator's rounding of each
// block. A throwaway pass on `chunk` rows comes first, so caches that fill once (oneDNN's weight
// reorders) fill there and not in one of the two measured passes, which would bend the line.
void measure_scaled(Sequential& model, const Tensor& input, const std::vector<autograd::SavedCodec>& codecs,
                    bool backward, int64_t chunk, std::vector<LayerProfile>& L) {
  if (chunk <= 0) {
    measure_rows(model, input, codecs, backward, L);
    return;
  }
  auto run = [&](int64_t rows) {
    std::vector<LayerProfile> P(L.size());
    measure_rows(model, input.narrow(0, 0, rows), codecs, backward, P);
    return P;
  };
  run(chunk);
  const std::vector<LayerProfile> a = run(chunk), b = run(2 * chunk);
  const double f = static_cast<double>(input.size(0) - chunk) / static_cast<double>(chunk);
  auto line = [f](int64_t at1, int64_t at2) -> int64_t {
    if (at1 < 0 || at2 < 0) return -1;  // not measured (invariant 3's -1)
    return std::max<int64_t>(0, std::llround(static_cast<double>(at1) + static_cast<double>(at2 - at1) * f));
  };
  for (size_t i = 0; i < L.size(); ++i) {
    if (backward) L[i].backward_bytes = line(a[i].backward_bytes, b[i].backward_bytes);
    for (size_t c = 0; c < b[i].codecs.size(); ++c) {
      LayerProfile::Codec m = b[i].codecs[c];
      const LayerProfile::Codec& m1 = a[i].codecs[c];
      m.held_bytes = line(m1.held_bytes, m.held_bytes);
      m.input_bytes = std::min(line(m1.input_bytes, m.input_bytes), m.held_bytes);
      m.backward_bytes = line(m1.backward_bytes, m.backward_bytes);
      m.seconds = std::max(0.0, m1.seconds + (m.seconds - m1.seconds) * f);
      L[i].codecs.push_back(std::move(m));
    }
  }
}

// Each candidate codec on the whole model against the exact gradients of the same probe, the
// generator rewound before every pass so dropout draws the same masks. `chunks` splits the batch
// (probe_gradients), so the check holds no more than the budget does.
std::vector<CodecCheck> check_codecs(Sequential& model, const Tensor& input, const BudgetOptions& o, Generator& gen,
                                     const RngState& rng, int64_t chunks) {
  GRAFT_CHECK(o.max_grad_error > 0, "plan_checkpoint: BudgetOptions::max_grad_error must be positive, got ",
              o.max_grad_error);
  // The parameters: registered ones, and leaves that require grad saved by some op (captured
  // weights, as in nn::Functional), found by a look-only pass that keeps nothing.
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
    // On the first chunk only, as the passes below run, so that it holds no more than they do; the
    // probe gets the whole batch's rows.
    const int64_t rows = input.dim() > 0 ? input.size(0) : 1;
    const int64_t per = chunks > 1 && input.dim() > 0 ? (rows + chunks - 1) / chunks : rows;
    Tensor y = model.forward(per == rows ? input : input.narrow(0, 0, per)).detach();
    Shape shape = y.sizes();
    if (per != rows && !shape.empty() && shape[0] == per) shape[0] = rows;
    probe = ops::randn(shape, y.dtype(), y.device());
  }
  GRAFT_CHECK(!params.empty(), "plan_checkpoint: checking a codec needs the model's parameters, and this model has "
              "none that require grad");
  gen.set_state(rng);
  std::vector<Tensor> exact = probe_gradients(model, input, probe, params, autograd::SavedCodec::kNone, chunks);
  std::vector<CodecCheck> out;
  for (autograd::SavedCodec c : o.codecs) {
    if (c == autograd::SavedCodec::kNone) continue;
    gen.set_state(rng);
    CodecCheck k;
    k.codec = c;
    k.grad_error = worst_relative_error(probe_gradients(model, input, probe, params, c, chunks), exact);
    k.accepted = k.grad_error <= o.max_grad_error;
    out.push_back(k);
  }
  return out;
}

// The profiles of keeping everything, measured layer by layer so that measuring fits where the plan
// does: the recording hooks keep nothing (they note each saved storage and drop it), and the timed
// passes free each layer's graph before the next layer runs. So the measuring pass holds the
// current boundary and one layer's tensors, never the whole forward's activations.
std::vector<LayerProfile> measure(Sequential& model, const Tensor& input, bool input_requires_grad,
                                  const BudgetOptions& o) {
  const size_t n = model.size();
  // Storages by owner: a weak reference keeps the control block, so a freed storage's identity is
  // never taken by a new one during the pass.
  using Key = std::weak_ptr<Storage>;
  using KeySet = std::set<Key, std::owner_less<Key>>;
  auto key = [](const Tensor& t) { return t.defined() ? Key(t.impl()->storage()) : Key(); };
  auto same = [](const Key& a, const Key& b) { return !a.owner_before(b) && !b.owner_before(a); };
  KeySet params;
  for (const Tensor& p : model.parameters()) params.insert(key(p));

  struct Saved {
    size_t layer;
    Key storage;
    int64_t bytes;
  };
  std::vector<Saved> saved;
  std::vector<Key> in_st(n), out_st(n);
  std::vector<LayerProfile> L(n);
  size_t current = 0;
  {
    autograd::EnableGradGuard eg;
    autograd::SavedTensorsHooks record(
        [&](const Tensor& t) -> autograd::Packed {
          // Leaves that require grad are parameters (registered or captured, as in nn::Functional):
          // they exist before the step and after it, whatever the plan.
          if (t.defined() && t.requires_grad() && t.is_leaf()) params.insert(key(t));
          if (t.defined()) saved.push_back({current, key(t), storage_bytes(t)});
          return autograd::Packed();
        },
        [](const autograd::Packed&) -> Tensor {
          GRAFT_ERROR("plan_checkpoint: the measuring pass saves nothing, so it has no backward");
        });
    Tensor x = input;
    for (size_t i = 0; i < n; ++i) {
      current = i;
      const size_t first_save = saved.size();
      in_st[i] = key(x);
      L[i].input_bytes = storage_bytes(x);
      const int64_t rows =
          o.allow_chunks && x.defined() && x.dim() >= 1 && model[i]->splits_by_rows(x) ? x.size(0) : 0;
      // Passed on as run_plan passes it: a layer that works in place writes over x here too, so
      // this pass holds one buffer where the plan does. Its saves of that storage are of its output.
      Tensor y = model[i]->call_owned(std::move(x));
      out_st[i] = key(y);
      L[i].output_bytes = storage_bytes(y);
      L[i].rows = y.defined() && y.dim() >= 1 && y.size(0) == rows ? rows : 0;  // budget_solver.h, invariant 12
      const bool wrote_over = model[i]->works_in_place() && same(in_st[i], out_st[i]);
      // This layer's saves, classified now, while both boundaries are alive.
      for (size_t k = first_save; k < saved.size(); ++k) {
        Saved& s = saved[k];
        if (params.count(s.storage)) s.bytes = -1;
        else if (!wrote_over && same(s.storage, in_st[i])) L[i].saves_input = true, s.bytes = -1;
        else if (same(s.storage, out_st[i])) L[i].saves_output = true, s.bytes = -1;
      }
      x = y;
    }
  }
  // Each other storage counts once, for the first layer that saves it.
  KeySet counted;
  for (const Saved& s : saved)
    if (s.bytes >= 0 && counted.insert(s.storage).second)
      L[s.layer].own_bytes += s.bytes;
  // Forward times: the faster of two timed passes after the measured one (warm caches). Each layer
  // runs on a detached copy of its input boundary (requiring grad as in training), and its graph is
  // dropped before the next one runs. Backward peaks come later (measure_scaled), once the plan
  // knows whether the whole batch can be measured within the budget.
  for (int rep = 0; rep < 2; ++rep) {
    autograd::EnableGradGuard eg;
    Tensor x = input;
    for (size_t i = 0; i < n; ++i) {
      // A layer that works in place runs so on the boundary itself (a leaf that requires grad
      // cannot be written in place, and a copy would hold a second buffer): its time then leaves
      // out recording its node, a few microseconds.
      const bool over = i > 0 && model[i]->works_in_place();
      Tensor in = i == 0 || over ? x : x.detach().requires_grad_(true);
      if (over) x = Tensor();
      auto t0 = Clock::now();
      Tensor y = over ? model[i]->call_owned(std::move(in)) : (*model[i])(in);
      double t = seconds_since(t0);
      L[i].forward_seconds = rep == 0 ? t : std::min(L[i].forward_seconds, t);
      x = y.detach();
      if (rep == 0)
        for (const Tensor& p : model[i]->parameters())
          if (p.requires_grad()) L[i].param_bytes += static_cast<int64_t>(p.nbytes());
      if (rep == 0 && !o.gradients_preallocated) L[i].param_grad_bytes = L[i].param_bytes;
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
  // Invariant 12 of budget_solver.h: a layer's input needs a gradient once the input or an earlier
  // layer's parameters do.
  bool needs = input_requires_grad;
  for (size_t i = 0; i < n; ++i) {
    L[i].name = std::to_string(i) + ": " + model[i]->name();
    L[i].in_place = model[i]->works_in_place();
    L[i].input_needs_grad = needs;
    for (const Tensor& p : model[i]->parameters()) needs = needs || p.requires_grad();
  }
  return L;
}

// measure() where the whole batch fits: a probe on a sixteenth of the batch scales its largest
// point (a layer's input, saves and output) up to the whole batch. Where that breaks half the
// budget, which a plan of slices of the batch can still meet (budget_solver.h, invariant 12), the
// profiles come from `chunk` and `2 chunk` rows instead, extrapolated along the line through the
// two as measure_scaled does: boundaries and saves are proportional to the rows, parameters are
// not, and forward times are close to affine.
std::vector<LayerProfile> measure_within(Sequential& model, const Tensor& input, bool input_requires_grad,
                                         const BudgetOptions& o, int64_t budget) {
  const int64_t rows = input.dim() > 0 ? input.size(0) : 1;
  if (rows >= 8) {
    const int64_t probe_rows = std::max<int64_t>(1, rows / 16);
    const std::vector<LayerProfile> P = measure(model, input.narrow(0, 0, probe_rows), input_requires_grad, o);
    int64_t point = 0;
    for (const LayerProfile& l : P) point = std::max(point, l.input_bytes + l.own_bytes + l.output_bytes);
    const double whole = static_cast<double>(point) * static_cast<double>(rows) / static_cast<double>(probe_rows);
    if (whole > static_cast<double>(std::max<int64_t>(budget, 0)) / 2) {
      const int64_t chunk = std::clamp<int64_t>(
          static_cast<int64_t>(static_cast<double>(rows) * static_cast<double>(std::max<int64_t>(budget, 0)) / (4 * whole)),
          1, rows / 4);
      const std::vector<LayerProfile> a = measure(model, input.narrow(0, 0, chunk), input_requires_grad, o);
      std::vector<LayerProfile> L = measure(model, input.narrow(0, 0, 2 * chunk), input_requires_grad, o);
      const double f = static_cast<double>(rows - chunk) / static_cast<double>(chunk);
      auto line = [f](int64_t at1, int64_t at2) {
        return std::max<int64_t>(0, std::llround(static_cast<double>(at1) + static_cast<double>(at2 - at1) * f));
      };
      for (size_t i = 0; i < L.size(); ++i) {
        LayerProfile& l = L[i];
        l.input_bytes = line(a[i].input_bytes, l.input_bytes);
        l.output_bytes = line(a[i].output_bytes, l.output_bytes);
        l.own_bytes = line(a[i].own_bytes, l.own_bytes);
        l.forward_seconds = std::max(0.0, a[i].forward_seconds + (l.forward_seconds - a[i].forward_seconds) * f);
        if (l.offload_seconds >= 0)
          l.offload_seconds = std::max(0.0, a[i].offload_seconds + (l.offload_seconds - a[i].offload_seconds) * f);
        l.rows = l.rows > 0 && a[i].rows > 0 ? rows : 0;
      }
      return L;
    }
  }
  return measure(model, input, input_requires_grad, o);
}

void mark(const std::vector<PlanStep>& steps, int depth, CheckpointPlan& p) {
  for (const PlanStep& s : steps)
    for (int i = s.first; i <= s.last; ++i) {
      auto& d = p.decisions[static_cast<size_t>(i)];
      if (s.kind == StepKind::Offload) d = autograd::CheckpointPolicy::MustOffload;
      if (s.kind == StepKind::Compress)
        p.codec[static_cast<size_t>(i)] = p.profiles[static_cast<size_t>(i)].codecs[static_cast<size_t>(s.codec)].name;
      if (s.kind == StepKind::Chunked || s.kind == StepKind::Sliced) p.chunks[static_cast<size_t>(i)] = s.chunks;
      if (s.kind == StepKind::Sliced && s.codec >= 0)
        p.codec[static_cast<size_t>(i)] = p.profiles[static_cast<size_t>(i)].codecs[static_cast<size_t>(s.codec)].name;
      if (s.kind == StepKind::Segment || s.kind == StepKind::Chunked) {
        d = autograd::CheckpointPolicy::MustRecompute;
        p.depth[static_cast<size_t>(i)] = std::max(p.depth[static_cast<size_t>(i)], depth + 1);
      }
    }
  for (const PlanStep& s : steps)
    if (s.kind == StepKind::Segment) mark(s.inner, depth + 1, p);
}

// `top`: the plan's own steps, not a segment's re-run. There a kept or compressed layer gets its
// input by call_owned, so a layer that works in place may reuse it (budget_solver.h, invariant 11).
// `packed_by_checkpoint`: the steps of a re-run under a codec, whose Compress steps the checkpoint's
// recompute_hooks pack (budget_solver.h, invariant 7): hooks of their own would stand in front of
// the checkpoint's, in the forward and in the re-run alike.
Tensor run_steps(const Modules& mods, const std::shared_ptr<const std::vector<PlanStep>>& steps, Tensor x,
                 const BudgetOptions& o, bool top, bool packed_by_checkpoint = false) {
  // Neighbours compressed by the same codec share one scope, so a boundary both save is packed once
  // (budget_solver.h, invariant 7).
  std::optional<autograd::CompressSaved> compress;
  int compress_codec = -1;
  for (const PlanStep& s : *steps) {
    if (s.kind != StepKind::Compress || s.codec != compress_codec) {
      compress.reset();
      compress_codec = -1;
    }
    switch (s.kind) {
      case StepKind::Keep: {
        Module& m = *(*mods)[static_cast<size_t>(s.first)];
        x = top ? m.call_owned(std::move(x)) : m(x);
        break;
      }
      case StepKind::Offload: {
        auto hooks = offload_hooks(x, o);
        x = (*(*mods)[static_cast<size_t>(s.first)])(x);
        break;
      }
      case StepKind::Compress: {
        if (!compress && !packed_by_checkpoint) {
          compress.emplace(autograd::CompressOptions{.codec = o.codecs[static_cast<size_t>(s.codec)]});
          compress_codec = s.codec;
        }
        Module& m = *(*mods)[static_cast<size_t>(s.first)];
        x = top ? m.call_owned(std::move(x)) : m(x);
        break;
      }
      case StepKind::Segment: {
        // The re-run needs the steps after this call returned: they travel with the closure.
        auto inner = std::make_shared<const std::vector<PlanStep>>(s.inner);
        int first = s.first, last = s.last;
        const int codec = rerun_codec(s);
        autograd::CheckpointOptions co;
        if (codec >= 0) {
          const autograd::SavedCodec c = o.codecs[static_cast<size_t>(codec)];
          co.recompute_hooks = [c] { return std::make_unique<autograd::CompressSaved>(autograd::CompressOptions{.codec = c}); };
        }
        x = autograd::checkpoint(
            [mods, inner, first, last, o, codec](const Tensor& in) {
              if (!inner->empty()) return run_steps(mods, inner, in, o, /*top=*/false, codec >= 0);
              Tensor h = in;
              for (int i = first; i <= last; ++i) h = (*(*mods)[static_cast<size_t>(i)])(h);
              return h;
            },
            x, co);
        break;
      }
      case StepKind::Chunked:
      case StepKind::Sliced: {
        // budget_solver.h, invariants 12 and 13: the layers' parameters get their gradients through
        // the step's node, summed over the slices. Chunked re-runs each slice in backward; Sliced
        // keeps the slices' saves (under the codec's hooks when it has one) and differentiates them.
        std::vector<Tensor> params;
        for (int i = s.first; i <= s.last; ++i)
          for (const Tensor& p : (*mods)[static_cast<size_t>(i)]->parameters())
            if (p.requires_grad()) params.push_back(p);
        std::optional<autograd::CompressSaved> hooks;
        if (s.kind == StepKind::Sliced && s.codec >= 0)
          hooks.emplace(autograd::CompressOptions{.codec = o.codecs[static_cast<size_t>(s.codec)]});
        int first = s.first, last = s.last;
        x = autograd::checkpoint_rows(
            [mods, first, last](const Tensor& in) {
              Tensor h = in;
              for (int i = first; i <= last; ++i) h = (*(*mods)[static_cast<size_t>(i)])(h);
              return h;
            },
            x, params, s.chunks, autograd::RowsOptions{.recompute = s.kind == StepKind::Chunked});
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
  GRAFT_CHECK(options.outside_bytes >= 0, "plan_checkpoint: BudgetOptions::outside_bytes must be at least 0, got ",
              options.outside_bytes);
  // What the step itself may use: the budget less what is held outside the plan's reach.
  const int64_t outside = options.outside_bytes +
                          (options.input_in_budget ? static_cast<int64_t>(example_input.nbytes()) : 0);
  const int64_t step_budget = budget_bytes - outside;
  auto outside_note = [&] {
    return outside == 0 ? std::string()
                        : " (" + mib(outside) + " of it held outside the step: the optimizer's state and the input)";
  };
  Generator& gen = default_generator(example_input.device());
  RngState rng = gen.get_state();
  std::vector<LayerProfile> L;
  std::vector<CodecCheck> checks;
  BudgetOptions measured = options;
  try {
    const Tensor input = example_input.detach();
    L = measure_within(model, input, example_input.requires_grad(), measured, step_budget);
    // Measuring a layer's backward holds its boundaries, the gradient handed to it and its own
    // work: about twice what keeping everything holds at that layer. Where that would break the
    // budget, the backward figures come from chunks of the batch (measure_scaled), small enough
    // that the larger one needs at most half the budget by the same estimate.
    const int64_t rows = input.dim() > 0 ? input.size(0) : 1;
    const int64_t plain_estimate = evaluate_plan(L, sequential_plan(static_cast<int>(L.size()), 1)).peak_bytes;
    int64_t chunk = 0;
    if (rows >= 4 && 2 * plain_estimate > step_budget)
      chunk = std::clamp<int64_t>(rows * std::max<int64_t>(step_budget, 0) / (4 * std::max<int64_t>(plain_estimate, 1)),
                                  1, rows / 4);
    measure_scaled(model, input, {}, /*backward=*/true, chunk, L);
    if (!options.codecs.empty()) {
      // The check runs whole forwards and backwards: in as many chunks of the batch as keeping
      // everything needs budgets, so that it too stays about within the budget. What the budget
      // leaves for a chunk is less the check's three sets of parameter gradients (exact, summed,
      // the chunk's), and at least a quarter of it.
      const int64_t plain = evaluate_plan(L, sequential_plan(static_cast<int>(L.size()), 1)).peak_bytes;
      int64_t param_bytes = 0;
      for (const Tensor& t : model.parameters()) param_bytes += static_cast<int64_t>(t.nbytes());
      const int64_t room = std::max(step_budget - 3 * param_bytes, std::max<int64_t>(step_budget, 4) / 4);
      const int64_t chunks = std::max<int64_t>(1, (plain + room - 1) / std::max<int64_t>(room, 1));
      gen.set_state(rng);
      checks = check_codecs(model, input, options, gen, rng, chunks);
      measured.codecs.clear();
      for (const CodecCheck& c : checks)
        if (c.accepted) measured.codecs.push_back(c.codec);
      gen.set_state(rng);
      if (!measured.codecs.empty()) measure_scaled(model, input, measured.codecs, /*backward=*/false, chunk, L);
    }
  } catch (...) {
    gen.set_state(rng);
    throw;
  }
  gen.set_state(rng);

  CheckpointPlan p;
  p.budget_bytes = budget_bytes;
  p.step_budget_bytes = step_budget;
  p.options = measured;
  p.codec_checks = checks;
  p.profiles = L;
  p.plain_peak_bytes = evaluate_plan(L, sequential_plan(static_cast<int>(L.size()), 1)).peak_bytes;
  SolvedPlan s;
  s.cost.peak_bytes = -1;
  if (step_budget > 0) s = solve_plan(L, step_budget, options.units);
  if (s.cost.peak_bytes < 0) {
    // Figures a user can pass back as a budget: the step's plus what is held outside it.
    int64_t minimum = min_peak_bytes(L) + outside;
    GRAFT_ERROR("plan_checkpoint: no plan fits a budget of ", mib(budget_bytes), " (", budget_bytes, " bytes)",
                outside_note(), ": the minimum any plan reaches is ", mib(minimum), " (", minimum,
                " bytes); keeping everything needs ", mib(p.plain_peak_bytes + outside));
  }
  p.steps = s.steps;
  p.predicted_peak_bytes = s.cost.peak_bytes;
  double fwd = 0;
  for (const auto& l : L) fwd += l.forward_seconds;
  p.predicted_extra_forward = fwd > 0 ? s.cost.extra_seconds / fwd : 0;
  p.decisions.assign(L.size(), autograd::CheckpointPolicy::MustSave);
  p.depth.assign(L.size(), 0);
  p.codec.assign(L.size(), "");
  p.chunks.assign(L.size(), 0);
  for (const auto& l : L) p.layers.push_back(l.name);
  mark(p.steps, 0, p);
  return p;
}

Tensor run_plan(Sequential& model, const CheckpointPlan& plan, const Tensor& input) {
  GRAFT_CHECK(plan.layers.size() == model.size(), "run_plan: the plan has ", plan.layers.size(),
              " layers but the model has ", model.size());
  auto mods = std::make_shared<const std::vector<std::shared_ptr<Module>>>(model.begin(), model.end());
  return run_steps(mods, std::make_shared<const std::vector<PlanStep>>(plan.steps), input, plan.options,
                   /*top=*/true);
}

std::string CheckpointPlan::table() const {
  std::ostringstream os;
  os << "memory budget plan: budget " << mib(budget_bytes);
  if (step_budget_bytes != budget_bytes)
    os << " (" << mib(step_budget_bytes) << " for the step; " << mib(budget_bytes - step_budget_bytes)
       << " held outside it: the optimizer's state and the input)";
  os << ", predicted peak " << mib(predicted_peak_bytes)
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
    std::string what = decision_name(decisions[i]);
    // A layer re-run under a codec's hooks (budget_solver.h, invariant 7): "recompute+int8".
    if (i < codec.size() && !codec[i].empty())
      what = decisions[i] == autograd::CheckpointPolicy::MustRecompute ? "recompute+" + codec[i] : "compress " + codec[i];
    if (i < chunks.size() && chunks[i] > 0 && decisions[i] == autograd::CheckpointPolicy::MustRecompute)
      what = "recompute/" + std::to_string(chunks[i]);
    if (i < chunks.size() && chunks[i] > 0 && decisions[i] != autograd::CheckpointPolicy::MustRecompute)
      what = "sliced/" + std::to_string(chunks[i]) + (codec[i].empty() ? "" : "+" + codec[i]);
    os << std::left << std::setw(static_cast<int>(w)) << layers[i] << "  " << std::setw(13) << what
       << "  " << std::setw(5) << depth[i] << "  " << std::right << std::setw(12) << mib(saved) << "  " << std::setw(12)
       << mib(l.output_bytes) << "  " << std::setw(10) << std::setprecision(3) << l.forward_seconds * 1e3 << "\n";
  }
  bool rerun_sliced = false, kept_sliced = false;
  for (size_t i = 0; i < chunks.size() && i < decisions.size(); ++i) {
    if (chunks[i] == 0) continue;
    (decisions[i] == autograd::CheckpointPolicy::MustRecompute ? rerun_sliced : kept_sliced) = true;
  }
  if (rerun_sliced) os << "recompute/k: run by k slices of the batch, in forward and in backward\n";
  if (kept_sliced)
    os << "sliced/k: run by k slices of the batch, their saves kept (packed by the codec after +), "
          "backward a slice at a time\n";
  bool rerun_packed = false;
  for (size_t i = 0; i < codec.size() && i < decisions.size(); ++i)
    rerun_packed = rerun_packed || (!codec[i].empty() && decisions[i] == autograd::CheckpointPolicy::MustRecompute);
  if (rerun_packed) os << "recompute+codec: re-run in backward under the codec, which packs what the re-run saves\n";
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
