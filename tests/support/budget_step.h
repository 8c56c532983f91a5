#pragma once
// One training step of a Sequential for the memory-budget tests: weight gradients of
// sum(forward(x)), with .grad preallocated (as a training loop after its first step), and the
// activation peak, the CPU allocator's peak above the start of forward.
#include <vector>

#include "graft.h"

namespace graft::test {

struct StepResult {
  std::vector<Tensor> grads;
  int64_t activation_peak = 0;
};

template <class Forward>
StepResult budget_step(nn::Sequential& model, const Tensor& x, Forward&& forward) {
  for (Tensor& p : model.parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = zeros_like(p);
    else p.mutable_grad().zero_();
  }
  Allocator* a = get_allocator(kCPU);
  a->reset_peak_stats();
  const int64_t base = a->stats().allocated_bytes;
  forward(x).sum().backward();
  StepResult r;
  r.activation_peak = a->stats().peak_allocated_bytes - base;
  for (Tensor& p : model.parameters()) r.grads.push_back(p.grad().clone());
  return r;
}

}  // namespace graft::test
