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
// the RNG state of the original call, collecting the saved tensors in order. With early_stop it
// stops as soon as the last tensor still needed by the graph is back. Results are kept per graph
// task and dropped once consumed; a retained graph recomputes again in the next backward. A nested
// checkpoint's inputs are placeholders of its parent, so recomputing it first recomputes the parent,
// only as far as those inputs.
#include <functional>
#include <string_view>
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

enum class CheckpointPolicy { MustSave, PreferSave, MustRecompute, PreferRecompute };

struct CheckpointOptions {
  bool early_stop = true;         // stop recomputing once every needed tensor is back
  bool determinism_check = true;  // recomputed tensors must match the saved count, shapes, dtypes, devices
  // Selective checkpointing: ops whose policy is *Save keep their outputs from the forward and are
  // not run again by the recomputation. Empty: recompute everything.
  std::function<CheckpointPolicy(std::string_view op_name)> policy;
};

std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs, CheckpointOptions options = {});
Tensor checkpoint(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input, CheckpointOptions options = {});

}  // namespace graft::autograd
