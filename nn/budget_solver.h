#pragma once
// The memory-budget solver: from each layer's measured profile, choose per layer of a chain keep,
// recompute (in segments, nested allowed) or offload, so that the predicted activation peak fits
// the budget at the least extra time. Pure arithmetic: plan_checkpoint (nn/checkpoint_plan.h)
// measures the profiles and runs the plan.
//
// Memory model (bytes of activation memory: what a training step holds above its starting point,
// parameters and their gradients excluded):
// 1. Boundary k is the activation between layer k-1 and layer k. A layer saves `own_bytes` of its
//    own intermediates, and may also save its input and/or its output boundary.
// 2. At the end of forward the device holds the own bytes of every kept layer, every boundary a
//    kept neighbour saves (once, however many save it), and the input of every recomputed segment
//    (the checkpoint keeps it). An offloaded layer holds nothing on the device.
// 3. Backward visits the steps of a plan last to first and frees a step's tensors once it ran. At a
//    step it holds what the steps before it hold, the step's own share, and its working set: a kept
//    layer its measured `backward_bytes` (the incoming gradient, the kernels' transients and the
//    gradient it hands on; unmeasured: its output's and input's gradients), which is less than
//    that for a layer whose backward writes in place (relu) and more for one with temporaries; an
//    offloaded layer also its saved bytes, back on the device; a segment the peak of re-running
//    its layers under its inner plan (plain: all kept), on top of what is held.
// 4. The predicted peak is the largest of those sums. Every size is exact bytes in evaluate_plan;
//    solve_plan works in units of budget/units bytes, rounding every size up, so a plan it returns
//    never has a predicted peak above the budget (it may miss a plan within a few units of it).
// 5. Extra time is the forward time of every recomputed layer, once per level of nesting it is
//    inside, plus each offloaded layer's offload_seconds.
// 6. Offload happens only outside segments: a checkpoint's re-run saves through its own hooks.
// 7. A compressed layer (a codec of autograd/compress_saved.h) holds its codec's `held_bytes` at
//    the end of forward: its packed tensors and the ones its codec keeps exactly, boundaries
//    included, so a boundary a kept neighbour also saves counts twice (both copies exist). It
//    holds no boundary in full for its neighbours. The exception is a boundary between two layers
//    compressed by the same codec, where the first packs its output (`shares_output`) and the
//    second its input: the plan runs such neighbours under one CompressSaved, whose deduplication
//    packs the boundary once, so the second layer's `input_bytes` are not counted again. So the
//    boundary state is three-way: not held, held in full, or held packed by codec c. In backward
//    a compressed layer adds its codec's measured `backward_bytes` (decoding included; unmeasured:
//    like an offloaded layer, its saved bytes decoded and its gradients). Its extra time is the
//    codec's measured pack and unpack time. Compression also happens inside a segment's re-run,
//    whole: the checkpoint packs everything the re-run saves through one codec's hooks
//    (CheckpointOptions::recompute_hooks), so every layer the re-run runs directly is a Compress
//    step of that one codec (rerun_codec) and is counted as at the top level, its input boundary
//    included (the re-run packs its own copy of the segment's input, which the checkpoint holds in
//    full). The segment's input itself stays exact, so a compressed re-run gives the gradients of the
//    same layers compressed in a plain forward, bit for bit: the planner's codec check covers it.
// 8. The chain's output (the last layer's output boundary) is the caller's: it holds it from the end
//    of forward to the end of backward (the loss reads it), so it is held at every backward step.
//    A kept last layer that saves its output saves that same tensor; a recomputed one saves a
//    second copy.
// 9. Forward has its own largest points: while a layer runs, what the steps before it hold, its
//    input (unless held already), its own intermediates and its output are all alive; a segment's
//    forward runs its layers without saving, so it reaches its input plus the largest layer's input
//    and output. A segment's re-run in backward is a forward too, and it happens while the gradient
//    of the segment's output waits: on a CNN's first convolution that gradient and the re-run's
//    two activations are three 12 MiB tensors at once. The search itself does not see these
//    points; solve_plan checks its plan against them and searches again with a smaller budget
//    while they break the budget.
// 10. A step whose gradients start as none (zero_grad(set_to_none), as graft train runs) makes
//    each layer's parameter gradients in its backward and holds them to the step's end: at a
//    layer's backward, and in a segment's re-run, the gradients of every layer after it are held.
// 11. A layer that works in place (`in_place`: nn::Module::works_in_place: ReLU, Tanh, Sigmoid), kept or
//    compressed by a step of the plan itself, writes its output over its input where that input is
//    not held in full (no neighbour saved it and it starts no segment; run_plan hands it over by
//    Module::call_owned): its forward then holds the one buffer. Offloaded, or in a segment's
//    re-run, it runs out of place like any layer. Backward is unchanged: the layer saves the same
//    tensor either way.
// 12. A chunked step (`Chunked`) is a segment run by k slices of the batch (autograd/
//    checkpoint_rows.h), at the plan's top level, over layers that all split by rows (`rows` > 0:
//    nn::Module::splits_by_rows). It holds its input as a segment does. Its forward holds its
//    input, its whole output and one slice's share of the segment's forward point. Its backward
//    holds, above what is held, the later layers' parameter gradients, its output's gradient and
//    its input's (unless that needs none: `input_needs_grad`), both whole, its own layers' summed
//    parameter gradients (`param_bytes`), and one slice's re-run: the plain re-run of the segment
//    with every activation figure divided by k and rounded up, making its layers' parameter
//    gradients afresh (`param_bytes`, not divided), with the slice's output held through all of
//    its backward (it is the inner backward's root): at every earlier layer's point too, where a
//    plain backward has freed the last layer's saves, even if that layer saves its output. The
//    root's gradient is a view of the whole output's gradient, so the last layer's own point
//    leaves out the output gradient its measured backward allocated. The last slice's re-run is
//    the largest: the earlier slices' gradients are summed by then. It
//    runs out of place. Its extra time is its forward's, once, plus twice invariant 13's
//    estimate of what running by slices costs (its forward and its re-run both run by slices; on
//    a ViT block, 16 slices measured 3.5 forwards, where one forward predicted 1). Slices can take a layer whose
//    whole-batch gradients alone break the budget (a CNN's first convolution) below it, which no
//    other decision can.
// 13. A sliced step (`Sliced`) is the same stretch by k slices at the top level, without the
//    re-run: forward runs each slice under its codec's hooks (`codec`, or none: kept as saved) and
//    keeps what the slices save (autograd::checkpoint_rows with RowsOptions::recompute = false);
//    backward differentiates one slice at a time. It holds its input as a segment does, and from
//    its forward to its backward what its layers save, as Compress steps (or Keep steps) of a
//    re-run would, summed over the slices: the whole batch's figures. Its forward point is the
//    last slice's largest: its whole output, the other slices' saves, and a k-th of what the
//    stretch saves before a layer plus that layer's input (unless a save before it holds it),
//    intermediates, output and packed save (the whole batch's). Its backward point, above what is
//    held, adds the later layers' parameter gradients and its output's gradient whole, and the
//    largest of three: the first slice's backward, with every other slice's saves still held (at
//    layer j of the slice: its saves through j, the later layers' fresh parameter gradients and
//    j's backward figure, divided by k; the last layer's without its output gradient, a view of
//    the whole one, and with no root to hold: a stand-in without data); the moment after it, when
//    its input's gradient and its parameter gradients (which become the sums) are held and the
//    whole input gradient is made; and a later slice's backward, with the sums and the input's
//    gradient, and one slice's saves fewer. Its
//    extra time is the codec's pack and unpack time and an estimate of what smaller kernels cost:
//    a tenth of the stretch's forward per slice after the first (measured on the CNN's first two
//    stages: 4 slices cost a third of their forward, 8 about a half).
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace graft::nn {

struct LayerProfile {
  std::string name;
  int64_t own_bytes = 0;     // saved tensors that are neither its input nor its output
  int64_t input_bytes = 0;   // its input boundary
  int64_t output_bytes = 0;  // its output boundary
  bool saves_input = false;
  bool saves_output = false;
  bool in_place = false;  // invariant 11
  // The peak of its backward above what is held when it starts (invariant 3); < 0: not measured.
  int64_t backward_bytes = -1;
  // Its parameters' gradients, made by its backward and held to the end of the step (invariant
  // 10); 0 when they are preallocated (accumulated in place).
  int64_t param_grad_bytes = 0;
  // Invariant 12: the rows of its input's batch when it may run by slices of them, else 0.
  int64_t rows = 0;
  // Its parameters that require grad: a chunked step makes their gradients afresh (one slice's
  // and the running sum), whether or not the step's own gradients are preallocated.
  int64_t param_bytes = 0;
  bool input_needs_grad = true;  // false for a chain input that does not require grad
  double forward_seconds = 0;
  double offload_seconds = -1;  // writing out and reading back what it saves; < 0: cannot offload
  // One entry per candidate codec (the same codecs, in the same order, for every layer).
  struct Codec {
    std::string name;          // "bf16", "int8"
    int64_t held_bytes = 0;    // invariant 7
    double seconds = 0;        // pack + unpack
    int64_t input_bytes = 0;   // of held_bytes: the packing of its input boundary (0: not packed)
    bool shares_output = false;  // its output boundary is packed, and a later save of it deduplicates
    int64_t backward_bytes = -1;  // invariant 7, measured under the codec; < 0: not measured
  };
  std::vector<Codec> codecs;
};

enum class StepKind { Keep, Offload, Segment, Compress, Chunked, Sliced };

// One step of a plan over layers [first, last]: Keep and Offload cover one layer; a Segment is a
// checkpoint over its layers, re-run in backward under `inner` (empty: every layer kept); a
// Chunked step is a plain segment run by `chunks` slices of the batch (invariant 12); a Sliced step
// runs its layers by `chunks` slices, keeping what they save under `codec` (-1: none), with no
// re-run (invariant 13).
struct PlanStep {
  StepKind kind = StepKind::Keep;
  int first = 0, last = 0;
  std::vector<PlanStep> inner;
  int codec = -1;  // Compress, Sliced: the index into the layer's codecs (Sliced: -1 for none)
  int chunks = 0;  // Chunked, Sliced: the number of slices
};

// The slice counts the search tries for a Chunked step.
inline constexpr int kChunkCounts[] = {2, 4, 8, 16};

struct PlanCost {
  int64_t held_bytes = 0;  // at the end of forward (above the starting point)
  int64_t peak_bytes = 0;  // the largest point of forward and backward
  double extra_seconds = 0;
};

// The model's prediction for `steps`, a plan over all of `layers`.
PlanCost evaluate_plan(const std::vector<LayerProfile>& layers, const std::vector<PlanStep>& steps);

struct SolvedPlan {
  std::vector<PlanStep> steps;
  PlanCost cost;
};

// The plan with the least extra time whose predicted peak is at most budget_bytes, or nothing
// (steps empty and cost.peak_bytes = -1) when no plan of the model reaches it. Segments nest to any
// depth. The search is memoized over (first layer, last layer, units left, boundary held): about
// n^2 * units * 2 states of 6 bytes, and n^3 * units steps at most. `min_peak_bytes` is the
// smallest budget (within 0.1%) for which solve_plan finds a plan (for the error message).
SolvedPlan solve_plan(const std::vector<LayerProfile>& layers, int64_t budget_bytes, int units = 256);
int64_t min_peak_bytes(const std::vector<LayerProfile>& layers);

// Segments nest; Keep, Offload and Compress cover one layer each.
// The codec a segment's re-run saves through (invariant 7): that of its inner Compress steps, or -1
// when it has none. A re-run that mixes Keep and Compress steps, or two codecs, or holds an Offload
// or Chunked step, is a graft::Error: one pair of hooks packs the whole re-run.
int rerun_codec(const PlanStep& segment);
// Plans a user could pick by hand, through the same model: checkpoint_sequential's `segments`
// chunks (the last one plain).
std::vector<PlanStep> sequential_plan(int num_layers, int segments);

}  // namespace graft::nn
