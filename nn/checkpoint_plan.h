#pragma once
// Training under a memory budget: measure a Sequential model once, solve for the plan with the
// least recomputation whose predicted activation peak fits the budget (nn/budget_solver.h), and run
// it.
//
//   auto plan = nn::plan_checkpoint(*model, x, 16 << 20);   // measure + solve; prints as a table
//   Tensor y = nn::run_plan(*model, plan, x);               // keep / recompute (nested) / offload
//   auto auto_ckpt = std::make_shared<nn::AutoCheckpoint>(model, 16 << 20);  // both, per shape
//
// Activation bytes are what a training step allocates above its start: activations, the gradients
// flowing through backward, the backward kernels' transients and, unless
// BudgetOptions::gradients_preallocated, the parameters' gradients as backward makes them. The
// budget bounds that peak; the optimizer's state and the model's own bytes are outside it.
//
// Invariants:
// 1. Planning does not change training: it runs the model on the example input through
//    autograd::grad (no .grad is touched) and restores the default generator of the input's
//    device, so dropout draws the same numbers with or without planning.
// 2. A plan runs the model's own children in order: the arithmetic is the plain forward's, so
//    gradients are bit-identical to plain for every mix of decisions (checkpoint re-runs preserve
//    the RNG state; offloaded tensors come back byte for byte), with one exception: layers run by
//    slices of the batch (budget_solver.h, invariant 12; only where a budget needs them) sum their
//    parameters' gradients over the slices, and a kernel may round a smaller batch differently, so
//    their gradients equal plain's up to rounding. Their hooks fire once per slice.
// 3. A budget below the smallest peak any plan reaches throws graft::Error naming that minimum.
// 4. Planning holds about what the plan may: it measures layer by layer (recording hooks that keep
//    nothing, each layer's graph freed before the next runs), so it never holds the whole forward's
//    activations. Where one layer's whole-batch forward alone would break half the budget (a plan
//    may still meet it by slices of the batch), the forward figures too come from two chunks of
//    the batch, extrapolated. Measuring one layer's backward holds its boundaries and the gradient handed to
//    it as well, about twice what keeping everything holds there: where that would break the
//    budget, backwards and codecs are measured on two chunks of the batch (r and 2r rows, after a
//    warm-up pass so once-filled caches do not bend the line) and extrapolated along the line
//    through them. The bytes measured are affine in the rows (activations and their packings grow
//    with the batch; parameters' gradients and per-channel scales do not), so two points fix them.
//    The codec check, which needs whole backwards, runs the batch in as many chunks as keeping
//    everything needs budgets. (Offload's one probe is 8 MiB.)
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "autograd/checkpoint.h"
#include "autograd/compress_saved.h"
#include "nn/budget_solver.h"
#include "nn/sequential.h"

namespace graft::nn {

struct BudgetOptions {
  // Where offloaded activations go on a CPU device (SaveOnDisk); empty: offload is not considered.
  // On a CUDA device offload goes to pinned host memory and needs no directory.
  std::string offload_dir;
  bool allow_offload = false;
  int units = 256;  // the solver's resolution (nn/budget_solver.h)
  // Codecs a layer may be compressed with (autograd::CompressSaved); empty: compression is not
  // considered. Each is first tried on the whole model: a codec whose parameter gradients differ
  // from the exact ones by more than max_grad_error (relative 2-norm, the worst parameter) is
  // rejected for this plan.
  std::vector<autograd::SavedCodec> codecs;
  double max_grad_error = 1e-2;
  // Whether the step's parameter gradients exist before it (zero_grad() without set_to_none, or
  // preallocated): then they are not part of the peak. By default a step starts from none, as
  // after zero_grad(set_to_none) in PyTorch and graft train, and each layer's backward makes its
  // parameters' gradients, held to the step's end (nn/budget_solver.h, invariant 10).
  bool gradients_preallocated = false;
  // Bytes held through every step outside the plan's reach, such as the optimizer's state
  // (optim::Optimizer::state_bytes()): the step is planned for the budget less these.
  int64_t outside_bytes = 0;
  // Whether layers that split by rows (nn::Module::splits_by_rows) may run by slices of the batch
  // where the budget needs it (budget_solver.h, invariant 12). Their gradients then equal plain's
  // up to rounding, not bit for bit (invariant 2). Off: the plan keeps, recomputes, offloads and
  // compresses only, and the minimum it can reach is that of those four.
  bool allow_chunks = true;
  // Whether the example input is made inside the step (a training loop's prepared batch), so that
  // it too counts against the budget.
  bool input_in_budget = false;
};

// What the planner measured of one candidate codec on the example batch.
struct CodecCheck {
  autograd::SavedCodec codec = autograd::SavedCodec::kNone;
  double grad_error = 0;  // the largest relative error of a parameter's gradient
  bool accepted = false;
};

struct CheckpointPlan {
  std::vector<std::string> layers;                       // one per child: "3: Linear"
  std::vector<autograd::CheckpointPolicy> decisions;     // MustSave, MustRecompute or MustOffload
  std::vector<int> depth;                                // how many checkpoints re-run the layer
  std::vector<std::string> codec;                        // "bf16" / "int8" for a compressed layer, else ""
  std::vector<int> chunks;  // k for a layer run by k slices of the batch (budget_solver.h, invariant 12), else 0
  std::vector<CodecCheck> codec_checks;                  // one per BudgetOptions::codecs
  int64_t predicted_peak_bytes = 0;
  double predicted_extra_forward = 0;  // recompute + offload time, as a fraction of one forward
  int64_t budget_bytes = 0;
  int64_t step_budget_bytes = 0;       // budget_bytes less BudgetOptions::outside_bytes (and the input)
  int64_t plain_peak_bytes = 0;        // the model's prediction for keeping everything
  std::vector<LayerProfile> profiles;  // what was measured
  std::vector<PlanStep> steps;         // the solved plan, as run_plan runs it
  BudgetOptions options;
  std::string table() const;
};

CheckpointPlan plan_checkpoint(Sequential& model, const Tensor& example_input, int64_t budget_bytes,
                               const BudgetOptions& options = {});
// Runs `model` on `input` under `plan` (which must have been made for this model).
Tensor run_plan(Sequential& model, const CheckpointPlan& plan, const Tensor& input);

// Plans on the first forward and on each new input shape; a plan is kept per shape, so a short
// last batch does not make every epoch plan twice.
class AutoCheckpoint : public Module {
 public:
  AutoCheckpoint(std::shared_ptr<Sequential> model, int64_t budget_bytes, BudgetOptions options = {});
  Tensor forward(const Tensor& input) override;
  std::string name() const override { return "AutoCheckpoint"; }
  const CheckpointPlan& plan() const;  // the plan of the latest forward's shape
  int replans() const { return replans_; }  // plans made (one per distinct input shape)

 private:
  std::shared_ptr<Sequential> model_;
  int64_t budget_;
  BudgetOptions options_;
  std::map<Shape, CheckpointPlan> plans_;
  const CheckpointPlan* current_ = nullptr;
  int replans_ = 0;
};

}  // namespace graft::nn
