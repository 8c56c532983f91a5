#pragma once
// Checkpointing by rows of the batch: checkpoint_rows(fn, input, params, chunks) runs fn on
// `chunks` slices of the batch (dimension 0) one after another, in forward and again in backward,
// so that neither pass holds more than one slice's activations. It is the memory planner's fifth
// lever (nn/checkpoint_plan.h): where a layer's whole-batch activations or gradients alone break
// a budget, no choice of keep, recompute, offload or compress helps, but running that stretch of
// layers a slice at a time divides them by the slice count.
//
//   Tensor y = autograd::checkpoint_rows([&](const Tensor& x) { return pool(relu(conv(x))); }, x,
//                                        conv->parameters(), 4);
//
// Invariants:
// 1. fn computes each output row from its input row alone and draws no random numbers
//    (nn::Module::splits_by_rows says which layers do). Then y is fn(input) up to the kernels'
//    rounding: a kernel may block a smaller batch differently. Checked: each slice's output keeps
//    the slice's row count.
// 2. Forward runs without recording and holds the whole input, the whole output (allocated once,
//    in the first slice's layout, and written slice by slice) and one slice's intermediates. The
//    node saves only `input`, as a saved variable of the enclosing context, so enclosing
//    saved-tensor hooks, version checks and release after backward apply to it as to any save.
// 3. Backward re-runs fn slice by slice with grad mode on, in a fresh context (no enclosing
//    saved-tensor hooks) and under the forward's autocast state, as checkpoint's recomputation
//    does, and differentiates each slice at once: it holds the output's gradient, the input's
//    gradient (when the input needs one, written slice by slice in the input's layout), the
//    parameters' summed gradients and one slice's graph.
// 4. The gradients of `input` and of `params` leave through the node's edges, one per backward,
//    like any op's: autograd::grad, tensor hooks and gradient-ready hooks (DDP) see each
//    parameter's gradient once, never per slice. Parameters fn uses but `params` does not list get
//    no gradient from it. A parameter's gradient is the sum of its slices' gradients: the
//    unchunked gradient up to rounding, not bit for bit.
// 5. The backward is once-differentiable: differentiating it (create_graph) raises an error.
// 6. With RowsOptions::recompute = false, forward runs each slice with grad mode on under the
//    hooks open at the call (a codec's, say) and keeps each slice's graph: what its ops save, the
//    slice's output itself not (its data is copied into the output and dropped; the graph is
//    reached through a stand-in of the slice output's geometry that holds no data). Backward differentiates the slices' graphs
//    one at a time with no re-run, and frees each after it unless the graph task keeps its graph.
//    The node saves nothing of its own. Forward then holds, beside the whole input and output,
//    everything the slices saved; backward, the output's and input's gradients, the summed
//    parameters' gradients and one slice's working set. fn's saves see each slice's input as a
//    leaf: a codec keeps it exact (a view of the input, which the caller holds).
#include <cstdint>
#include <functional>
#include <vector>

#include "runtime/tensor.h"

namespace graft::autograd {

struct RowsOptions {
  // false: keep each slice's graph from forward in place of re-running fn in backward (invariant 6).
  bool recompute = true;
};

Tensor checkpoint_rows(const std::function<Tensor(const Tensor&)>& fn, const Tensor& input,
                       const std::vector<Tensor>& params, int64_t chunks, RowsOptions options = {});

}  // namespace graft::autograd
