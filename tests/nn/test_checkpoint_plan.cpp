// Training under a memory budget (nn/checkpoint_plan.h): plans give gradients bit-identical to
// plain for every mix of decisions, the measured activation peak stays near the predicted one and
// within the budget, a budget below the minimum names it, AutoCheckpoint replans on a new shape,
// and planning leaves the random stream alone.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "graft.h"
#include "support/budget_step.h"
#include "support/temp_dir.h"

using namespace graft;
using namespace graft::nn;

namespace {

// Linear + Tanh pairs of uneven widths: boundaries from 8 to 96 features.
std::shared_ptr<Sequential> uneven_chain() {
  manual_seed(11);
  auto m = std::make_shared<Sequential>();
  std::vector<int64_t> widths = {32, 96, 16, 64, 8, 80, 24, 48, 32};
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    m->emplace_back<Linear>(widths[i], widths[i + 1]);
    m->emplace_back<Tanh>();
  }
  return m;
}

// `pairs` of Linear(width, width) + Tanh.
std::shared_ptr<Sequential> tanh_chain(uint64_t seed, int pairs, int64_t width) {
  manual_seed(seed);
  auto m = std::make_shared<Sequential>();
  for (int i = 0; i < pairs; ++i) {
    m->emplace_back<Linear>(width, width);
    m->emplace_back<Tanh>();
  }
  return m;
}

Tensor batch(int64_t n = 64) {
  manual_seed(5);
  return randn({n, 32});
}

using test::StepResult;
// budget_step preallocates .grad (a loop after its first zero_grad() without set_to_none): plans for
// it leave the parameters' gradients out (BudgetOptions::gradients_preallocated).
BudgetOptions preallocated(BudgetOptions o = {}) {
  o.gradients_preallocated = true;
  return o;
}
// The four decisions whose gradients are plain's bit for bit (invariant 2): no slices of the batch.
BudgetOptions exact(BudgetOptions o = preallocated()) {
  o.allow_chunks = false;
  return o;
}
template <class Forward>
StepResult step(Sequential& model, const Tensor& x, Forward&& forward) {
  return test::budget_step(model, x, std::forward<Forward>(forward));
}

bool same_bits(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].to_vector<float>() != b[i].to_vector<float>()) return false;
  return true;
}

int count(const CheckpointPlan& p, autograd::CheckpointPolicy d) {
  return static_cast<int>(std::count(p.decisions.begin(), p.decisions.end(), d));
}

}  // namespace

TEST_CASE("plan_checkpoint: every decision mix gives gradients bit-identical to plain, within budget") {
  auto model = uneven_chain();
  Tensor x = batch();
  StepResult plain = step(*model, x, [&](const Tensor& in) { return (*model)(in); });
  CheckpointPlan all = plan_checkpoint(*model, x, plain.activation_peak * 4, exact());
  INFO(all.table());
  CHECK(count(all, autograd::CheckpointPolicy::MustRecompute) == 0);
  int64_t lo = min_peak_bytes(all.profiles), hi = all.plain_peak_bytes;
  for (double frac : {0.7, 0.4, 0.0}) {
    int64_t budget = lo + static_cast<int64_t>(frac * static_cast<double>(hi - lo));
    CheckpointPlan p = plan_checkpoint(*model, x, budget, exact());
    StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
    INFO(p.table() << "measured activation peak " << r.activation_peak << " bytes (plain: measured "
                   << plain.activation_peak << ", predicted " << all.plain_peak_bytes << ")");
    CHECK(p.predicted_peak_bytes <= budget);
    CHECK(count(p, autograd::CheckpointPolicy::MustRecompute) > 0);
    CHECK(same_bits(r.grads, plain.grads));
    // The model leaves out only transients of single ops (tanh's and mm's temporaries): the
    // measured peak stays within two of the widest boundaries of the prediction.
    int64_t widest = 64 * 96 * 4;
    CHECK(r.activation_peak <= p.predicted_peak_bytes + 2 * widest);
  }
}

TEST_CASE("plan_checkpoint: nested segments appear at small budgets and still match plain") {
  auto model = tanh_chain(12, 24, 48);
  manual_seed(5);
  Tensor x = randn({64, 48});
  StepResult plain = step(*model, x, [&](const Tensor& in) { return (*model)(in); });
  CheckpointPlan probe = plan_checkpoint(*model, x, plain.activation_peak * 4, exact());
  CheckpointPlan p = plan_checkpoint(*model, x, min_peak_bytes(probe.profiles), exact());
  INFO(p.table());
  CHECK(*std::max_element(p.depth.begin(), p.depth.end()) >= 2);
  StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
  CHECK(same_bits(r.grads, plain.grads));
}

TEST_CASE("plan_checkpoint: offloading to disk gives the same gradients and leaves no file") {
  auto model = uneven_chain();
  Tensor x = batch();
  StepResult plain = step(*model, x, [&](const Tensor& in) { return (*model)(in); });
  graft::test::TempDir tmp;
  const std::string& dir = tmp.path();
  BudgetOptions o = preallocated();
  o.allow_offload = true;
  o.offload_dir = dir;
  CheckpointPlan p = plan_checkpoint(*model, x, plain.activation_peak * 4, o);
  for (const auto& l : p.profiles) CHECK(l.offload_seconds > 0);  // measured through SaveOnDisk
  // A hand-made mix, as the solver may emit it: offload, keep, a nested segment, a plain one.
  p.steps = {{StepKind::Offload, 0, 0, {}},
             {StepKind::Keep, 1, 1, {}},
             {StepKind::Offload, 2, 2, {}},
             {StepKind::Segment, 3, 8, {{StepKind::Segment, 3, 5, {}}, {StepKind::Keep, 6, 6, {}}, {StepKind::Keep, 7, 7, {}}, {StepKind::Keep, 8, 8, {}}}},
             {StepKind::Offload, 9, 9, {}},
             {StepKind::Segment, 10, 13, {}},
             {StepKind::Keep, 14, 14, {}},
             {StepKind::Offload, 15, 15, {}}};
  StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
  CHECK(same_bits(r.grads, plain.grads));
  CHECK(std::filesystem::is_empty(dir));
  // The engine's prefetch brings the offloaded tensors back ahead of their nodes: same bits.
  for (int k : {1, 2, 8}) {
    autograd::set_unpack_prefetch(k);
    StepResult rk = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
    autograd::set_unpack_prefetch(0);
    CHECK(same_bits(rk.grads, plain.grads));
    CHECK(std::filesystem::is_empty(dir));
  }
}

TEST_CASE("plan_checkpoint: a budget below the minimum names the minimum") {
  auto model = uneven_chain();
  CHECK_THROWS_WITH(plan_checkpoint(*model, batch(), 1024),
                    Catch::Contains("plan_checkpoint: no plan fits a budget of 0.00 MiB (1024 bytes): the minimum any "
                                    "plan reaches is"));
  CHECK_THROWS_WITH(plan_checkpoint(*model, batch(), 0), Catch::Contains("the budget must be positive"));
}

TEST_CASE("AutoCheckpoint plans on the first forward and once per new input shape") {
  auto model = uneven_chain();
  CheckpointPlan probe = plan_checkpoint(*model, batch(64), 1 << 30);
  int64_t budget = (min_peak_bytes(probe.profiles) + probe.plain_peak_bytes) / 2;
  AutoCheckpoint auto_ckpt(model, budget);
  CHECK_THROWS_WITH(auto_ckpt.plan(), Catch::Contains("no plan yet"));
  auto_ckpt(batch(64)).sum().backward();
  CHECK(auto_ckpt.replans() == 1);
  auto_ckpt(batch(64)).sum().backward();
  CHECK(auto_ckpt.replans() == 1);
  auto_ckpt(batch(32)).sum().backward();  // smaller: the same budget still fits
  CHECK(auto_ckpt.replans() == 2);
  CHECK(auto_ckpt.plan().budget_bytes == budget);
  auto_ckpt(batch(64)).sum().backward();  // a shape seen before keeps its plan
  CHECK(auto_ckpt.replans() == 2);
}

TEST_CASE("planning leaves the random stream as it was (dropout draws the same numbers)") {
  manual_seed(1);
  auto model = std::make_shared<Sequential>();
  model->emplace_back<Linear>(32, 64);
  model->emplace_back<Dropout>(0.5);
  model->emplace_back<Linear>(64, 8);
  Tensor x = batch();
  manual_seed(42);
  Tensor plain = (*model)(x);
  manual_seed(42);
  AutoCheckpoint auto_ckpt(model, 1 << 30);
  Tensor planned = auto_ckpt(x);
  CHECK(planned.to_vector<float>() == plain.to_vector<float>());
}

TEST_CASE("planning itself stays about within the budget (invariant 4): it never holds the whole forward") {
  // A deep chain where one layer's tensors are a small share of the whole: measuring by running the
  // plain forward and backward would peak at the plain step's peak, three times this budget.
  auto model = tanh_chain(3, 24, 64);
  Tensor x = randn({2048, 64});
  StepResult plain = step(*model, x, [&](const Tensor& in) { return (*model)(in); });
  const int64_t budget = plain.activation_peak / 3;
  for (bool with_codec : {false, true}) {
    INFO("with a codec: " << with_codec);
    BudgetOptions o = preallocated();
    if (with_codec) o.codecs = {autograd::SavedCodec::kBf16};
    Allocator* a = get_allocator(kCPU);
    a->reset_peak_stats();
    const int64_t base = a->stats().allocated_bytes;
    CheckpointPlan p = plan_checkpoint(*model, x, budget, o);
    const int64_t planning_peak = a->stats().peak_allocated_bytes - base;
    INFO("plain step peak " << plain.activation_peak << ", budget " << budget << ", planning peak " << planning_peak);
    // The profiles are those of the plain forward, measured without holding it.
    CHECK(p.plain_peak_bytes >= plain.activation_peak * 9 / 10);
    CHECK(planning_peak <= budget);
    CHECK(p.predicted_peak_bytes <= budget);
    INFO(p.table());
    StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
    // + the sum and a bias gradient (256 bytes) that the model leaves out.
    CHECK(r.activation_peak <= p.predicted_peak_bytes + 4096);
    CHECK(r.activation_peak >= p.predicted_peak_bytes * 9 / 10);  // and not far above it either
    CHECK(r.activation_peak <= budget);
  }
}

TEST_CASE("a chunked step's backward holds the slice's output, its inner root, even where its last layer saves it") {
  // Invariant 12: the slice's output is the root of the slice's own backward, held until that
  // backward ends. A stretch ending at a Tanh (which saves its output) used to count it only at the
  // Tanh's own point, and measured one Linear's gradients' worth above its prediction when the
  // Linear's point was the peak. Each stretch, ending at a Tanh or at a Linear, by 2 and 4 slices:
  // the step measures its prediction to a few bytes (the loss's sum).
  auto model = tanh_chain(3, 6, 64);
  Tensor x = randn({2048, 64});
  (void)step(*model, x, [&](const Tensor& in) { return (*model)(in); });  // allocates the grads
  CheckpointPlan p = plan_checkpoint(*model, x, int64_t{1} << 40, preallocated());
  for (int last : {9, 10}) {
    for (int k : {2, 4}) {
      INFO("chunked layers 6-" << last << " by " << k << " slices");
      std::vector<PlanStep> steps;
      for (int i = 0; i < 12; ++i) {
        if (i == 6) {
          PlanStep c{StepKind::Chunked, 6, last, {}};
          c.chunks = k;
          steps.push_back(c);
          i = last;
        } else {
          steps.push_back({StepKind::Keep, i, i, {}});
        }
      }
      CheckpointPlan forced = p;
      forced.steps = steps;
      const int64_t predicted = evaluate_plan(p.profiles, steps).peak_bytes;
      StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, forced, in); });
      CHECK(std::llabs(r.activation_peak - predicted) <= 64);
    }
  }
}

TEST_CASE("planning stays within the budget when one layer alone is most of it: chunks of the batch, extrapolated") {
  // Wide Tanh layers: measuring one's backward on the whole batch holds its input, its output, the
  // gradient handed to it and its result, which this budget does not allow. The planner measures
  // backwards (and codecs) on chunks of the batch instead and extrapolates along a line. The
  // figures it gets are those measured on the whole batch, and the plan runs as predicted.
  manual_seed(12);
  auto model = std::make_shared<Sequential>();
  model->emplace_back<Linear>(32, 1024);
  for (int i = 0; i < 6; ++i) model->emplace_back<Tanh>();
  model->emplace_back<Linear>(1024, 8);
  Tensor x = randn({512, 32});
  for (bool with_codec : {false, true}) {
    INFO("with a codec: " << with_codec);
    BudgetOptions o = preallocated();
    if (with_codec) o.codecs = {autograd::SavedCodec::kBf16};
    const CheckpointPlan whole = plan_checkpoint(*model, x, int64_t{1} << 40, o);  // measured on the whole batch
    const int64_t budget = whole.plain_peak_bytes * 45 / 100;
    Allocator* a = get_allocator(kCPU);
    a->reset_peak_stats();
    const int64_t base = a->stats().allocated_bytes;
    CheckpointPlan p = plan_checkpoint(*model, x, budget, o);
    const int64_t planning_peak = a->stats().peak_allocated_bytes - base;
    INFO("keeping everything " << whole.plain_peak_bytes << ", budget " << budget << ", planning peak " << planning_peak);
    INFO(p.table());
    CHECK(planning_peak <= budget);
    auto near = [](int64_t got, int64_t want) { return std::llabs(got - want) <= 4096 + std::llabs(want) / 100; };
    REQUIRE(p.profiles.size() == whole.profiles.size());
    for (size_t i = 0; i < p.profiles.size(); ++i) {
      const LayerProfile &c = p.profiles[i], &w = whole.profiles[i];
      INFO(c.name);
      CHECK(near(c.backward_bytes, w.backward_bytes));
      REQUIRE(c.codecs.size() == w.codecs.size());
      for (size_t k = 0; k < c.codecs.size(); ++k) {
        CHECK(near(c.codecs[k].held_bytes, w.codecs[k].held_bytes));
        CHECK(near(c.codecs[k].input_bytes, w.codecs[k].input_bytes));
        CHECK(near(c.codecs[k].backward_bytes, w.codecs[k].backward_bytes));
      }
    }
    StepResult r = step(*model, x, [&](const Tensor& in) { return run_plan(*model, p, in); });
    CHECK(r.activation_peak <= budget);
    CHECK(r.activation_peak <= p.predicted_peak_bytes + 4096);
    CHECK(r.activation_peak >= p.predicted_peak_bytes * 8 / 10);
  }
}

TEST_CASE("a budget's outside bytes (the optimizer's state, the input) leave the step less, and the error counts them") {
  auto model = uneven_chain();
  Tensor x = batch();
  CheckpointPlan probe = plan_checkpoint(*model, x, 1 << 30, preallocated());
  const int64_t budget = probe.plain_peak_bytes;  // keeps everything when nothing is outside
  BudgetOptions o = preallocated();
  o.outside_bytes = probe.plain_peak_bytes / 4;
  o.input_in_budget = true;
  CheckpointPlan p = plan_checkpoint(*model, x, budget, o);
  CHECK(p.step_budget_bytes == budget - o.outside_bytes - static_cast<int64_t>(x.nbytes()));
  CHECK(p.predicted_peak_bytes <= p.step_budget_bytes);
  CHECK(count(p, autograd::CheckpointPolicy::MustRecompute) > 0);
  CHECK(p.table().find("held outside it") != std::string::npos);
  // The minimum the error names is one a user can pass back: the step's plus what is outside.
  try {
    plan_checkpoint(*model, x, o.outside_bytes + 1, o);
    FAIL("expected no plan");
  } catch (const Error& e) {
    const std::string msg = e.what();
    CHECK(msg.find("held outside the step") != std::string::npos);
    const auto at = msg.find("the minimum any plan reaches is ");
    REQUIRE(at != std::string::npos);
    const auto open = msg.find('(', at);
    const int64_t minimum = std::stoll(msg.substr(open + 1));
    CHECK(plan_checkpoint(*model, x, minimum + minimum / 50, o).predicted_peak_bytes >= 0);
  }
}
