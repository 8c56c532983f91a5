// The planner's fourth decision (nn/budget_solver.h invariant 7, nn/checkpoint_plan.h): compress a
// layer's saved tensors with a codec. The solver's arithmetic, the codec check against exact
// gradients, measured peaks within the budget, and bit-identical gradients for the layers whose
// gradients do not pass through a compressed one.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "graft.h"
#include "support/budget_step.h"
#include "support/check_close.h"

using namespace graft;
using namespace graft::nn;

namespace {

std::shared_ptr<Sequential> tanh_chain(int pairs, int64_t width) {
  manual_seed(21);
  auto m = std::make_shared<Sequential>();
  for (int i = 0; i < pairs; ++i) {
    m->emplace_back<Linear>(width, width);
    m->emplace_back<Tanh>();
  }
  return m;
}

using test::StepResult;
// budget_step preallocates .grad (a loop after its first zero_grad() without set_to_none): plans for
// it leave the parameters' gradients out (BudgetOptions::gradients_preallocated).
BudgetOptions preallocated(BudgetOptions o = {}) {
  o.gradients_preallocated = true;
  return o;
}
template <class Forward>
StepResult step(Sequential& model, const Tensor& x, Forward&& forward) {
  return test::budget_step(model, x, std::forward<Forward>(forward));
}

double rel_err(const Tensor& a, const Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
}

// Two conv-relu-pool stages and a linear head, on [N, 1, 28, 28].
std::shared_ptr<Sequential> small_cnn(uint64_t seed = 6) {
  manual_seed(seed);
  auto m = std::make_shared<Sequential>();
  m->push_back(std::make_shared<Conv2d>(1, 16, 3, 1, 1));
  m->push_back(std::make_shared<ReLU>());
  m->push_back(std::make_shared<MaxPool2d>(2));
  m->push_back(std::make_shared<Conv2d>(16, 16, 3, 1, 1));
  m->push_back(std::make_shared<ReLU>());
  m->push_back(std::make_shared<MaxPool2d>(2));
  m->push_back(std::make_shared<Flatten>());
  m->push_back(std::make_shared<Linear>(16 * 7 * 7, 10));
  return m;
}

// One step as graft train runs it (gradients start as none): the step's peak from the memory log,
// and each parameter's gradient.
int64_t logged_step(Sequential& m, const Tensor& x, const Tensor& target,
                    const std::function<Tensor(const Tensor&)>& forward, std::vector<Tensor>* grads) {
  for (Tensor& p : m.parameters()) p.mutable_grad() = Tensor();
  memory_log_start(kCPU);
  {
    Tensor out = forward(x);
    functional::cross_entropy(out, target).backward();
  }
  int64_t peak = 0;
  for (const MemoryEvent& e : memory_log_stop()) peak = std::max(peak, e.bytes);
  if (grads)
    for (Tensor& p : m.parameters()) grads->push_back(p.grad().clone());
  return peak;
}

}  // namespace

TEST_CASE("budget solver: a compressed layer holds its codec's bytes and costs its codec's time") {
  // Three layers that save only their own 1000 bytes; boundaries of 100 bytes.
  std::vector<LayerProfile> L(3);
  for (auto& l : L) {
    l.own_bytes = 1000;
    l.input_bytes = l.output_bytes = 100;
    l.forward_seconds = 1.0;
    l.codecs = {{"bf16", 500, 0.1}};
  }
  // Plain: 3000 held and the caller's 100-byte output (invariant 8), then the last layer's backward
  // adds its two gradients.
  CHECK(evaluate_plan(L, sequential_plan(3, 1)).peak_bytes == 3000 + 100 + 200);
  std::vector<PlanStep> plan = {{StepKind::Keep, 0, 0, {}}, {StepKind::Compress, 1, 1, {}, 0}, {StepKind::Keep, 2, 2, {}}};
  PlanCost c = evaluate_plan(L, plan);
  CHECK(c.held_bytes == 1000 + 500 + 1000 + 100);
  CHECK(c.extra_seconds == Approx(0.1));
  // At the compressed layer's backward: layers 0 and 1 held (1500), the output (100), its saved
  // bytes decoded (1000) and its gradients (200): 2800, above the last layer's 2600 + 200.
  CHECK(c.peak_bytes == 2800);
  // A budget that recomputing one layer would also meet: compressing is cheaper (0.1 s < 1 s).
  SolvedPlan s = solve_plan(L, 2900);
  REQUIRE(s.cost.peak_bytes >= 0);
  CHECK(s.cost.peak_bytes <= 2900);
  CHECK(std::any_of(s.steps.begin(), s.steps.end(), [](const PlanStep& p) { return p.kind == StepKind::Compress; }));
  CHECK(s.cost.extra_seconds < 1.0);
  // Without codecs the same budget needs a recomputation.
  for (auto& l : L) l.codecs.clear();
  SolvedPlan r = solve_plan(L, 2900);
  REQUIRE(r.cost.peak_bytes >= 0);
  CHECK(r.cost.extra_seconds >= 1.0);
}

TEST_CASE("budget solver: a boundary two neighbours compress with the same codec counts once") {
  // Four layers with 4000 own bytes that save their 1000-byte input and output. bf16 holds half of
  // everything: 2000 own + 500 input + 500 output.
  std::vector<LayerProfile> L(4);
  for (auto& l : L) {
    l.own_bytes = 4000;
    l.input_bytes = l.output_bytes = 1000;
    l.saves_input = l.saves_output = true;
    l.forward_seconds = 1.0;
    LayerProfile::Codec c{"bf16", 3000, 0.1};
    c.input_bytes = 500;
    c.shares_output = true;
    l.codecs = {c};
  }
  std::vector<PlanStep> all(4);
  for (int i = 0; i < 4; ++i) all[static_cast<size_t>(i)] = {StepKind::Compress, i, i, {}, 0};
  // Five boundaries of 500 packed bytes each, 4 x 2000 own, and the caller's output (invariant 8).
  const int64_t out = 1000;
  CHECK(evaluate_plan(L, all).held_bytes == 4 * 2000 + 5 * 500 + out);
  // A kept neighbour saves the boundary in full, beside the packed copy.
  std::vector<PlanStep> mixed = all;
  mixed[2] = {StepKind::Keep, 2, 2, {}};
  CHECK(evaluate_plan(L, mixed).held_bytes == 2 * 3000 - 500 + (4000 + 1000 + 1000) + 3000 + out);
  // A layer whose output is not packed shares nothing with the next one.
  L[0].codecs[0].shares_output = false;
  CHECK(evaluate_plan(L, all).held_bytes == 4 * 2000 + 5 * 500 + 500 + out);
  L[0].codecs[0].shares_output = true;
  // A second codec is a different packing: no sharing across codecs.
  for (auto& l : L) {
    LayerProfile::Codec c{"int8", 2000, 0.05};
    c.input_bytes = 250;
    c.shares_output = true;
    l.codecs.push_back(c);
  }
  std::vector<PlanStep> two = all;
  two[1].codec = 1;
  CHECK(evaluate_plan(L, two).held_bytes == 3000 + 2000 + 3000 + 3000 - 500 + out);
  // The solver sees the saving: every plan it returns is what evaluate_plan predicts, within budget.
  for (int64_t budget : {23000, 21000, 19000, 17000, 15000}) {
    SolvedPlan sp = solve_plan(L, budget);
    INFO("budget " << budget);
    if (sp.cost.peak_bytes < 0) continue;
    CHECK(sp.cost.peak_bytes <= budget);
    CHECK(evaluate_plan(L, sp.steps).peak_bytes == sp.cost.peak_bytes);
  }
  // The smallest budget a codec-only plan (no recomputation) meets is lower when shared boundaries
  // count once: the solver can use compression where it could not before.
  auto least_codec_only_budget = [&] {
    for (int64_t b = 8000; b <= 24000; b += 100) {
      SolvedPlan sp = solve_plan(L, b);
      if (sp.cost.peak_bytes >= 0 && sp.cost.extra_seconds < 1.0) return b;
    }
    return int64_t{-1};
  };
  const int64_t shared = least_codec_only_budget();
  for (auto& l : L) l.codecs[0].shares_output = l.codecs[1].shares_output = false;
  const int64_t unshared = least_codec_only_budget();
  INFO("least codec-only budget: " << shared << " shared, " << unshared << " not shared");
  REQUIRE(shared > 0);
  CHECK(unshared > shared);
}

TEST_CASE("plan_checkpoint with a codec: compressed layers, the peak within budget, exact layers bit-identical") {
  auto model = tanh_chain(8, 64);
  manual_seed(5);
  Tensor x = randn({128, 64});
  StepResult plain = step(*model, x, [&](const Tensor& in) { return (*model)(in); });
  BudgetOptions o = preallocated();
  o.codecs = {autograd::SavedCodec::kBf16};
  CheckpointPlan probe = plan_checkpoint(*model, x, plain.activation_peak * 4, o);
  const int64_t budget = probe.plain_peak_bytes * 7 / 10;
  CheckpointPlan p = plan_checkpoint(*model, x, budget, o);
  // Which layers the solver compresses depends on measured times, so the plan is set by hand: the
  // first half compressed (neighbours sharing their boundaries' packing), the rest kept. What is
  // tested is that such a plan runs, stays within the model's prediction (invariant 7) and keeps
  // the exact layers exact.
  const int n = static_cast<int>(p.profiles.size());
  p.steps.clear();
  for (int i = 0; i < n; ++i)
    p.steps.push_back(i < n / 2 ? PlanStep{StepKind::Compress, i, i, {}, 0} : PlanStep{StepKind::Keep, i, i, {}});
  p.predicted_peak_bytes = evaluate_plan(p.profiles, p.steps).peak_bytes;
  std::fill(p.decisions.begin(), p.decisions.end(), autograd::CheckpointPolicy::MustSave);
  std::fill(p.depth.begin(), p.depth.end(), 0);
  std::fill(p.chunks.begin(), p.chunks.end(), 0);
  for (int i = 0; i < n; ++i) p.codec[static_cast<size_t>(i)] = i < n / 2 ? "bf16" : "";
  INFO(p.table());
  REQUIRE(p.codec_checks.size() == 1);
  CHECK(p.codec_checks[0].accepted);
  CHECK(p.codec_checks[0].grad_error > 0);
  CHECK(p.codec_checks[0].grad_error < 1e-2);
  CHECK(p.table().find("compress bf16") != std::string::npos);
  int last_compressed = -1;
  for (size_t i = 0; i < p.codec.size(); ++i)
    if (p.codec[i] == "bf16") last_compressed = static_cast<int>(i);
  REQUIRE(last_compressed >= 0);
  (void)budget;
  StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
  // + the loss and its gradient, outside the model: 4 bytes each
  CHECK(r.activation_peak <= p.predicted_peak_bytes + 8);
  // Parameters are [weight, bias] per Linear, one Linear per two layers. A Linear after the last
  // compressed layer, and not compressed itself, sees only exact tensors.
  size_t checked_exact = 0;
  for (size_t layer = 0; layer < p.codec.size(); layer += 2) {
    const size_t w = layer;  // parameter index of layer `layer`'s weight: 2 per Linear
    const Tensor& got = r.grads[w], &want = plain.grads[w];
    if (static_cast<int>(layer) > last_compressed) {
      CHECK(got.to_vector<float>() == want.to_vector<float>());
      ++checked_exact;
    } else {
      CHECK(rel_err(got, want) < 1e-2);
    }
  }
  CHECK(checked_exact + static_cast<size_t>(last_compressed / 2 + 1) == p.codec.size() / 2);
}

TEST_CASE("plan_checkpoint rejects a codec whose gradient error exceeds the limit, and says so") {
  auto model = tanh_chain(4, 32);
  manual_seed(6);
  Tensor x = randn({64, 32});
  BudgetOptions o = preallocated();
  o.codecs = {autograd::SavedCodec::kInt8};
  o.max_grad_error = 1e-9;
  CheckpointPlan all = plan_checkpoint(*model, x, 1 << 30, o);
  REQUIRE(all.codec_checks.size() == 1);
  CHECK_FALSE(all.codec_checks[0].accepted);
  CHECK(all.table().find("codec int8: largest parameter-gradient error") != std::string::npos);
  CHECK(all.table().find("(rejected") != std::string::npos);
  CheckpointPlan tight = plan_checkpoint(*model, x, min_peak_bytes(all.profiles), o);
  CHECK(std::all_of(tight.codec.begin(), tight.codec.end(), [](const std::string& c) { return c.empty(); }));
}

TEST_CASE("the codec check also covers weights a layer captures instead of registering") {
  manual_seed(8);
  Tensor w1 = (randn({32, 32}) * 0.2).requires_grad_(), w2 = (randn({32, 32}) * 0.2).requires_grad_();
  auto model = std::make_shared<Sequential>();
  for (const Tensor& w : {w1, w2}) {
    model->push_back(std::make_shared<Functional>([w](const Tensor& x) { return graft::tanh(graft::mm(x, w)); }));
  }
  REQUIRE(model->parameters().empty());
  Tensor x = randn({64, 32});
  BudgetOptions o = preallocated();
  o.codecs = {autograd::SavedCodec::kInt8};
  CheckpointPlan p = plan_checkpoint(*model, x, 1 << 30, o);
  REQUIRE(p.codec_checks.size() == 1);
  CHECK(p.codec_checks[0].grad_error > 0);
  CHECK(p.codec_checks[0].grad_error < 5e-2);
}

TEST_CASE("a whole-step budget on a small channels-last CNN: gradients start as none, the peak is predicted and kept") {
  // As graft train runs a step: parameters' gradients made by backward (zero_grad(set_to_none)),
  // relu in place forward and backward, channels-last activations. The plan's prediction covers all of it.
  auto m = small_cnn(4);
  m->to(MemoryFormat::ChannelsLast);
  Tensor x = randn({64, 1, 28, 28});
  Tensor target = ops::zeros({64}, kInt64);
  auto step_peak = [&](const std::function<Tensor(const Tensor&)>& forward) {
    for (Tensor& p : m->parameters()) p.mutable_grad() = Tensor();
    memory_log_start(kCPU);
    {
      Tensor out = forward(x);
      functional::cross_entropy(out, target).backward();
    }
    int64_t peak = 0;
    for (const MemoryEvent& e : memory_log_stop()) peak = std::max(peak, e.bytes);
    return peak;
  };
  const int64_t plain = step_peak([&](const Tensor& in) { return (*m)(in); });
  BudgetOptions o;
  o.codecs = {autograd::SavedCodec::kBf16, autograd::SavedCodec::kInt8};
  CheckpointPlan all = plan_checkpoint(*m, x, 1 << 30, o);
  INFO(all.table());
  // The plain prediction is the plain step's peak (the loss's few bytes aside).
  CHECK(std::abs(static_cast<double>(all.plain_peak_bytes - plain)) <= 0.02 * static_cast<double>(plain));
  const int64_t minimum = min_peak_bytes(all.profiles);
  // The first ReLU writes over the first convolution's output (Sequential and run_plan hand each
  // activation on), and the pool saves one-byte offsets: the smallest plan is well under plain.
  REQUIRE(minimum < plain * 7 / 10);
  for (int64_t budget : {plain * 9 / 10, plain * 7 / 10, (minimum + plain * 7 / 10) / 2}) {
    CheckpointPlan p = plan_checkpoint(*m, x, budget, o);
    INFO("budget " << budget << " of plain " << plain << "\n" << p.table());
    const int64_t measured = step_peak([&](const Tensor& in) { return run_plan(*m, p, in); });
    CHECK(measured <= budget);
    CHECK(std::abs(static_cast<double>(measured - p.predicted_peak_bytes)) <= 0.03 * static_cast<double>(plain));
  }
  // Below the minimum: the error names it.
  CHECK_THROWS_WITH(plan_checkpoint(*m, x, minimum / 2, o), Catch::Contains("minimum"));
}

TEST_CASE("below what the four exact decisions reach, a CNN runs by slices of the batch, within the budget") {
  // The fifth decision (budget_solver.h, invariant 12), on a step as graft train runs it
  // (gradients start as none): the first stage's whole-batch tensors bound every exact plan.
  auto m = small_cnn();
  Tensor x = randn({64, 1, 28, 28});
  Tensor target = ops::zeros({64}, kInt64);
  // Which layers say they split by rows: batched convolutions and pools, a flatten that keeps the
  // batch, linear and activations; not an unbatched convolution, nor a flatten of the batch.
  CHECK((*m)[0]->splits_by_rows(x));
  CHECK_FALSE((*m)[0]->splits_by_rows(randn({1, 28, 28})));
  CHECK((*m)[6]->splits_by_rows(x));
  CHECK_FALSE(Flatten(0).splits_by_rows(x));
  CHECK_FALSE(Dropout(0.1).splits_by_rows(x));
  auto run_step = [&](const std::function<Tensor(const Tensor&)>& forward, std::vector<Tensor>* grads) {
    return logged_step(*m, x, target, forward, grads);
  };
  std::vector<Tensor> plain_grads;
  const int64_t plain = run_step([&](const Tensor& in) { return (*m)(in); }, &plain_grads);
  BudgetOptions exact;
  exact.allow_chunks = false;
  const int64_t exact_min = min_peak_bytes(plan_checkpoint(*m, x, 1 << 30, exact).profiles);
  const int64_t sliced_min = min_peak_bytes(plan_checkpoint(*m, x, 1 << 30).profiles);
  INFO("plain " << plain << ", exact minimum " << exact_min << ", with slices " << sliced_min);
  REQUIRE(sliced_min < exact_min * 8 / 10);
  const int64_t budget = (sliced_min + exact_min) / 2;
  CHECK_THROWS_WITH(plan_checkpoint(*m, x, budget, exact), Catch::Contains("minimum"));
  CheckpointPlan p = plan_checkpoint(*m, x, budget);
  INFO(p.table());
  CHECK(std::any_of(p.chunks.begin(), p.chunks.end(), [](int k) { return k > 1; }));
  CHECK(p.table().find("recompute/") != std::string::npos);
  std::vector<Tensor> grads;
  const int64_t measured = run_step([&](const Tensor& in) { return run_plan(*m, p, in); }, &grads);
  CHECK(measured <= budget);
  CHECK(std::abs(static_cast<double>(measured - p.predicted_peak_bytes)) <= 0.03 * static_cast<double>(plain));
  // Sums over slices: plain's gradients up to rounding.
  REQUIRE(grads.size() == plain_grads.size());
  for (size_t i = 0; i < grads.size(); ++i) CHECK(rel_err(grads[i], plain_grads[i]) < 1e-5);
}

TEST_CASE("stretches by slices, re-run or kept, packed or not, from the first layer or a later one, run as predicted") {
  // Invariants 12 and 13 on the channels-last CNN as graft train runs it. Each case once broke
  // its prediction: a re-run by 2 slices over-predicted by a slice's output gradient (a view of the
  // whole one), and a search at 70% of plain that chose it failed the whole-step test's 3%; kept
  // slices over-predicted by the later layers' saves, a relu's input counted twice, and the
  // summed gradients, and under-predicted a codec's packed bytes and the whole input gradient
  // made after the first slice.
  auto m = small_cnn(4);
  m->to(MemoryFormat::ChannelsLast);
  Tensor x = randn({64, 1, 28, 28});
  Tensor target = ops::zeros({64}, kInt64);
  const int64_t plain = logged_step(*m, x, target, [&](const Tensor& in) { return (*m)(in); }, nullptr);
  BudgetOptions o;
  o.codecs = {autograd::SavedCodec::kBf16};
  const CheckpointPlan all = plan_checkpoint(*m, x, 1 << 30, o);
  REQUIRE(all.codec_checks.size() == 1);
  REQUIRE(all.codec_checks[0].accepted);
  struct Case {
    StepKind kind;
    int first, last, chunks, codec;
  };
  for (const Case& c : {Case{StepKind::Chunked, 0, 2, 2, -1}, Case{StepKind::Chunked, 0, 7, 4, -1},
                        Case{StepKind::Chunked, 1, 4, 2, -1}, Case{StepKind::Sliced, 0, 2, 2, -1},
                        Case{StepKind::Sliced, 0, 5, 2, -1}, Case{StepKind::Sliced, 0, 2, 2, 0},
                        Case{StepKind::Sliced, 1, 4, 2, -1}, Case{StepKind::Sliced, 1, 4, 4, 0}}) {
    CheckpointPlan q = all;
    q.steps.clear();
    for (int i = 0; i < 8; ++i) {
      if (i < c.first || i > c.last) q.steps.push_back({StepKind::Keep, i, i, {}});
      if (i == c.first) {
        PlanStep s{c.kind, c.first, c.last, {}};
        s.chunks = c.chunks;
        s.codec = c.codec;
        q.steps.push_back(s);
      }
    }
    q.predicted_peak_bytes = evaluate_plan(q.profiles, q.steps).peak_bytes;
    const int64_t measured = logged_step(*m, x, target, [&](const Tensor& in) { return run_plan(*m, q, in); }, nullptr);
    INFO((c.kind == StepKind::Chunked ? "re-run" : "kept") << " layers " << c.first << "-" << c.last << " by " << c.chunks
         << " slices, codec " << c.codec << ": measured " << measured << ", predicted " << q.predicted_peak_bytes
         << " (plain " << plain << ")");
    CHECK(std::abs(static_cast<double>(measured - q.predicted_peak_bytes)) <= 0.005 * static_cast<double>(plain));
  }
}

TEST_CASE("budget solver: a segment re-run under a codec holds its packed bytes, and the search uses it") {
  // Layers that save their 1000-byte input and output (a linear followed by tanh, as one layer);
  // int8 holds a quarter of each, and neighbours share the packed boundary.
  auto layers = [](int n) {
    std::vector<LayerProfile> L(static_cast<size_t>(n));
    for (auto& l : L) {
      l.input_bytes = l.output_bytes = 1000;
      l.saves_input = l.saves_output = true;
      l.forward_seconds = 1.0;
      LayerProfile::Codec c{"int8", 500, 0.05};
      c.input_bytes = 250;
      c.shares_output = true;
      l.codecs = {c};
    }
    return L;
  };
  std::vector<LayerProfile> L = layers(3);
  // Segment 0-1 re-run under int8, then layer 2 kept (it saves the caller's output: invariant 8).
  // The segment's input is the chain's, held already. Its re-run, above the caller's 1000: layer 0
  // packs its input and output (500) and layer 1 only its output (250, the shared boundary counts
  // once); the worst point is layer 1's backward: 1000 + 750 + its saved bytes decoded and its two
  // gradients (2000 + 2000), as an unmeasured codec backward is modelled.
  PlanStep seg{StepKind::Segment, 0, 1, {{StepKind::Compress, 0, 0, {}, 0}, {StepKind::Compress, 1, 1, {}, 0}}};
  std::vector<PlanStep> plan = {seg, {StepKind::Keep, 2, 2, {}}};
  CHECK(rerun_codec(seg) == 0);
  PlanCost c = evaluate_plan(L, plan);
  CHECK(c.peak_bytes == 1000 + 750 + 4000);
  CHECK(c.held_bytes == 1000 + 1000);  // layer 2's input, and the caller's output
  CHECK(c.extra_seconds == Approx(2.0 + 2 * 0.05));
  // A re-run saves through one pair of hooks: keeping and compressing in it, or two codecs, is an
  // error that says so.
  PlanStep mixed{StepKind::Segment, 0, 1, {{StepKind::Keep, 0, 0, {}}, {StepKind::Compress, 1, 1, {}, 0}}};
  CHECK_THROWS_WITH(evaluate_plan(L, {mixed, {StepKind::Keep, 2, 2, {}}}), Catch::Contains("both keeps and compresses"));
  CHECK_THROWS_WITH(rerun_codec(mixed), Catch::Contains("segment 0-1"));
  // On a longer chain, a budget between what a compressed re-run reaches and what exact segments
  // reach at the same recomputation: the search picks a re-run under the codec, and its plan is
  // faster than the best one without codecs.
  L = layers(16);
  for (auto& l : L) l.codecs[0].backward_bytes = 2500;  // measured: less than the model's bound
  std::vector<LayerProfile> bare = L;
  for (auto& l : bare) l.codecs.clear();
  int picked = 0;
  for (int64_t budget = 6000; budget <= 16000; budget += 1000) {
    INFO("budget " << budget);
    SolvedPlan with = solve_plan(L, budget), without = solve_plan(bare, budget);
    if (with.cost.peak_bytes < 0) continue;
    CHECK(with.cost.peak_bytes <= budget);
    CHECK(evaluate_plan(L, with.steps).peak_bytes == with.cost.peak_bytes);
    if (without.cost.peak_bytes >= 0) CHECK(with.cost.extra_seconds <= without.cost.extra_seconds + 1e-9);
    const bool rerun = std::any_of(with.steps.begin(), with.steps.end(), [](const PlanStep& s) {
      return s.kind == StepKind::Segment && rerun_codec(s) >= 0;
    });
    if (rerun && (without.cost.peak_bytes < 0 || with.cost.extra_seconds < without.cost.extra_seconds)) ++picked;
  }
  CHECK(picked > 0);
}

TEST_CASE("a segment re-run under a codec runs within its prediction, with a compressed forward's gradients") {
  auto model = tanh_chain(8, 64);
  manual_seed(9);
  Tensor x = randn({512, 64});
  BudgetOptions o = preallocated();
  o.codecs = {autograd::SavedCodec::kBf16};
  CheckpointPlan p = plan_checkpoint(*model, x, 1 << 30, o);
  REQUIRE(p.codec_checks.size() == 1);
  REQUIRE(p.codec_checks[0].accepted);
  const int n = static_cast<int>(p.profiles.size());
  // The first half as one segment re-run under bf16, against the same layers compressed at the top
  // level: the same tensors packed by the same codec (one scope each, so a boundary once), so the
  // gradients agree to rounding (a weight gradient's sum over the batch may be ordered differently
  // from one run to the next on a loaded machine; a packed value that differed would show far
  // above it), and the second half is kept in both.
  auto set = [&](CheckpointPlan q, bool segment) {
    q.steps.clear();
    PlanStep seg{StepKind::Segment, 0, n / 2 - 1, {}};
    for (int i = 0; i < n / 2; ++i) (segment ? seg.inner : q.steps).push_back(PlanStep{StepKind::Compress, i, i, {}, 0});
    if (segment) q.steps.push_back(seg);
    for (int i = n / 2; i < n; ++i) q.steps.push_back(PlanStep{StepKind::Keep, i, i, {}});
    q.predicted_peak_bytes = evaluate_plan(q.profiles, q.steps).peak_bytes;
    for (int i = 0; i < n; ++i) {
      q.codec[static_cast<size_t>(i)] = i < n / 2 ? "bf16" : "";
      q.decisions[static_cast<size_t>(i)] =
          segment && i < n / 2 ? autograd::CheckpointPolicy::MustRecompute : autograd::CheckpointPolicy::MustSave;
    }
    return q;
  };
  CheckpointPlan rerun = set(p, true), top = set(p, false);
  INFO(rerun.table());
  CHECK(rerun.table().find("recompute+bf16") != std::string::npos);
  StepResult a = step(*model, x, [&](const Tensor& in) { return run_plan(*model, rerun, in); });
  StepResult b = step(*model, x, [&](const Tensor& in) { return run_plan(*model, top, in); });
  REQUIRE(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size(); ++i) test::check_close(a.grads[i], b.grads[i]);
  // + the loss and its gradient, outside the model: 4 bytes each
  CHECK(a.activation_peak <= rerun.predicted_peak_bytes + 8);
  CHECK(a.activation_peak >= rerun.predicted_peak_bytes - static_cast<int64_t>(x.nbytes()) / 8);
  // The re-run holds the first half packed only while it is backpropagated: less than keeping them
  // packed through the whole step.
  CHECK(rerun.predicted_peak_bytes < top.predicted_peak_bytes);
}

TEST_CASE("a sliced step keeps its slices' saves (packed by a codec) and runs backward a slice at a time, within its prediction") {
  // Invariant 13 of budget_solver.h on the small CNN: the two conv stages by 4 slices, no re-run.
  auto m = small_cnn();
  Tensor x = randn({64, 1, 28, 28});
  Tensor target = ops::zeros({64}, kInt64);
  std::vector<Tensor> plain_grads;
  const int64_t plain = logged_step(*m, x, target, [&](const Tensor& in) { return (*m)(in); }, &plain_grads);
  BudgetOptions o;
  o.codecs = {autograd::SavedCodec::kBf16};
  CheckpointPlan p = plan_checkpoint(*m, x, 1 << 30, o);
  REQUIRE(p.codec_checks.size() == 1);
  REQUIRE(p.codec_checks[0].accepted);
  auto with = [&](StepKind kind, int codec) {
    CheckpointPlan q = p;
    PlanStep s{kind, 0, 5, {}};
    s.chunks = 4;
    s.codec = codec;
    q.steps = {s, {StepKind::Keep, 6, 6, {}}, {StepKind::Keep, 7, 7, {}}};
    q.predicted_peak_bytes = evaluate_plan(q.profiles, q.steps).peak_bytes;
    for (int i = 0; i < 8; ++i) {
      q.chunks[static_cast<size_t>(i)] = i <= 5 ? 4 : 0;
      q.codec[static_cast<size_t>(i)] = i <= 5 && codec >= 0 ? "bf16" : "";
      q.decisions[static_cast<size_t>(i)] = i <= 5 && kind == StepKind::Chunked ? autograd::CheckpointPolicy::MustRecompute
                                                                             : autograd::CheckpointPolicy::MustSave;
    }
    return q;
  };
  // Kept exactly, the slices' gradients are the re-run's (the same slices' graphs), to rounding.
  CheckpointPlan exact = with(StepKind::Sliced, -1), rerun = with(StepKind::Chunked, -1);
  CHECK(exact.table().find("sliced/4 ") != std::string::npos);
  std::vector<Tensor> ge, gr;
  (void)logged_step(*m, x, target, [&](const Tensor& in) { return run_plan(*m, exact, in); }, &ge);
  (void)logged_step(*m, x, target, [&](const Tensor& in) { return run_plan(*m, rerun, in); }, &gr);
  REQUIRE(ge.size() == gr.size());
  for (size_t i = 0; i < ge.size(); ++i) test::check_close(ge[i], gr[i]);
  // Under bf16: relu's masks, the second conv's input packed; the peak as predicted, well under
  // plain's, and the gradients within the codec's error.
  CheckpointPlan packed = with(StepKind::Sliced, 0);
  INFO(packed.table());
  CHECK(packed.table().find("sliced/4+bf16") != std::string::npos);
  std::vector<Tensor> gp;
  const int64_t measured = logged_step(*m, x, target, [&](const Tensor& in) { return run_plan(*m, packed, in); }, &gp);
  INFO("plain " << plain << ", sliced+bf16 " << measured << " (predicted " << packed.predicted_peak_bytes << ")");
  CHECK(measured < plain / 2);
  CHECK(std::abs(static_cast<double>(measured - packed.predicted_peak_bytes)) <= 0.01 * static_cast<double>(plain));
  CHECK(packed.predicted_peak_bytes < exact.predicted_peak_bytes);
  for (size_t i = 0; i < gp.size(); ++i) CHECK(rel_err(gp[i], plain_grads[i]) < 1e-2);
  // Slices are a top-level decision: a re-run holding one is an error.
  PlanStep inner{StepKind::Sliced, 0, 1, {}};
  inner.chunks = 2;
  PlanStep seg{StepKind::Segment, 0, 1, {inner}};
  CHECK_THROWS_WITH(rerun_codec(seg), Catch::Contains("sliced step"));
}
