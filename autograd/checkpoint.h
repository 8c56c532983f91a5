#pragma once
// Activation checkpointing with recomputation on unpack, nestable to any depth.
//
// Inside checkpoint(fn, inputs), every tensor fn's ops save for backward becomes a placeholder that
// records only its shape, dtype and device; when fn returns, the checkpoint owns only its inputs,
// saved as ordinary saved tensors of the enclosing context (so an outer SavedTensorsHooks,
// SaveOnCpu or checkpoint sees exactly those inputs).
//
// The first unpack of a placeholder in a graph task re-runs fn under grad mode, in a fresh context
// (no enclosing hooks), on the saved inputs (detached, with their original requires_grad) and with
// the RNG state and autocast state (autograd/autocast.h) of the original call, collecting the
// saved tensors in order. With early_stop it
// stops as soon as the last tensor still needed by the graph is back. Results are kept per graph
// task and dropped once consumed; a retained graph recomputes again in the next backward. A nested
// checkpoint's inputs are placeholders of its parent, so recomputing it first recomputes the parent,
// only as far as those inputs.
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/saved_tensor_hooks.h"
#include "runtime/tensor.h"

namespace graft::autograd {

// *Offload (memory budget): the output is saved off the device instead of kept or recomputed. The
// budget planner (nn/checkpoint_plan.h) applies it per layer; in an op policy it is not supported
// yet and raises an error.
enum class CheckpointPolicy { MustSave, PreferSave, MustRecompute, PreferRecompute, MustOffload, PreferOffload };

// What an op-level policy sees: the op's name and its tensor inputs.
struct OpCall {
  std::string_view name;
  std::vector<Tensor> inputs;
};

struct CheckpointOptions {
  bool early_stop = true;         // stop recomputing once every needed tensor is back
  bool determinism_check = true;  // recomputed tensors must match the saved count, shapes, dtypes, devices
  // Selective checkpointing: ops whose policy is *Save keep their outputs from the forward and are
  // not run again by the recomputation. Empty: recompute everything.
  std::function<CheckpointPolicy(std::string_view op_name)> policy;
  // The same, seeing the op's inputs too; used instead of `policy` when set.
  std::function<CheckpointPolicy(const OpCall&)> op_policy;
  // Replay the RNG states of the original call in the recomputation (off: the recomputation draws
  // from wherever the generators are, as torch's preserve_rng_state=False).
  bool preserve_rng_state = true;
  // Record the op sequence of the forward and of each recomputation; a determinism failure then
  // lists both side by side with shapes and marks the first difference.
  bool debug = false;
  // Selective checkpointing: allow an output kept by the policy to be written in place after the
  // forward (the recomputation then sees the written value). Off: that is an error.
  bool allow_cache_entry_mutation = false;
  // Hooks that pack what a recomputation hands back, such as CompressSaved: made afresh in each
  // recomputation's context, they see every tensor fn saves there (with its save site, so a codec
  // reads each slot's tolerance), and the recomputed tensors then wait for their backward in packed
  // form, each unpacked by the same pair when backward reads it. A segment's re-run then holds its
  // activations compressed, as a compressed forward would. Empty: kept as recomputed.
  std::function<std::unique_ptr<SavedTensorsHooks>()> recompute_hooks;
  // What the checkpoint's own save of its inputs tolerates (they are saved into the enclosing
  // context). kLossy lets an enclosing compressing hook pack them (CompressSaved); the
  // recomputation then starts from their unpacked approximation, so the recomputed tensors, and the
  // gradients made from them, approximate the forward's. kExact (the default): kept as they are.
  SaveTolerance input_tolerance = SaveTolerance::kExact;
};

// A policy from an op list: MustSave for these ops, PreferRecompute for every other.
std::function<CheckpointPolicy(const OpCall&)> save_ops(std::vector<std::string> op_names);

// Overrides every checkpoint's early_stop for checkpoints called in this scope (thread-local,
// nests; torch.utils.checkpoint.set_checkpoint_early_stop).
class CheckpointEarlyStop {
 public:
  explicit CheckpointEarlyStop(bool enabled);
  ~CheckpointEarlyStop();
  CheckpointEarlyStop(const CheckpointEarlyStop&) = delete;
  CheckpointEarlyStop& operator=(const CheckpointEarlyStop&) = delete;

 private:
  int prev_;
};

std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs, CheckpointOptions options = {});
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, CheckpointOptions options = {});

}  // namespace graft::autograd
