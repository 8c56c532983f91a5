#pragma once
// Unpack prefetch: the engine's lookahead over saved tensors that live off the device.
//
// While node N runs, the engine predicts the next K nodes it will run (the ready queue plus the
// nodes N's gradients will make ready, in the engine's own order: highest sequence number first)
// and starts the unpack hooks of their saved tensors on one background thread. When a node's rule
// unpacks a tensor, it takes the prefetched result instead of calling the hook.
//
//   autograd::set_unpack_prefetch(2);     // two nodes ahead; 0 (the default) is off
//   { autograd::SaveOnDisk disk("/scratch"); loss = model.forward(x).sum(); }
//   loss.backward();                      // file reads overlap the matmuls of the nodes before
//
// Invariants:
// 1. Only hooks that declare themselves prefetchable (SaveOnCpu, SaveOnDisk, the budget plan's
//    offload) are run ahead: their unpack is a pure function of the packed value, safe on another
//    thread. A user's hook runs where it always ran, on the engine thread, at unpack time.
// 2. A hook's unpack runs exactly once per unpack a rule performs: a prefetch is claimed by the next
//    unpack() of that SavedVariable, which then does not call the hook; a SavedVariable is
//    prefetched at most once at a time. Retain_graph backwards unpack (and may prefetch) again.
// 3. Results are identical to prefetch off: the same hook on the same packed value, and an error
//    the hook throws reaches the rule at unpack time, unchanged.
// 4. A graph task waits for every prefetch it started before it returns, also when it throws, so
//    nothing a prefetch holds (a file, a host copy) outlives the backward that asked for it.
// 5. Prefetch never runs under create_graph (the hooks' results would need history), and costs one
//    relaxed load per node when off.
#include <condition_variable>
#include <functional>
#include <future>
#include <memory>
#include <mutex>

#include "runtime/tensor.h"

namespace graft::autograd {

// How many nodes ahead the engine prefetches; 0 = off. Process-wide.
void set_unpack_prefetch(int lookahead);
int unpack_prefetch();

// The prefetches one graph task started. It counts them rather than keeping their futures: a
// future holds its result, and a result kept past its unpack would hold every prefetched tensor
// until the end of backward.
class PrefetchGroup {
 public:
  void add();
  void finish();
  void wait();  // until every added prefetch finished

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int pending_ = 0;
};

// Runs `job` on the prefetch thread (started on first use) and returns its result's future; the
// group counts it until its captures are destroyed. For SavedVariable::start_prefetch.
std::shared_future<Tensor> submit_unpack_prefetch(std::function<Tensor()> job, std::shared_ptr<PrefetchGroup> group);

}  // namespace graft::autograd
