#pragma once
// OpProfiler: per-op call counts and times, like torch.profiler's key_averages() table.
//
//   OpProfiler prof;
//   {
//     OpProfiler::Scope on(prof);            // profiles ops dispatched on this thread
//     train_step();                          // forward, backward (same thread), optimizer
//   }
//   std::cout << prof.table();               // name, calls, total, mean, % of the profiled time
//
// Invariants:
// 1. It is a dispatch mode, so it sees every op call dispatched on the thread that holds the Scope
//    (backward runs on that thread too); other threads (a prefetch thread) are not seen. Unprofiled
//    code pays nothing: with no mode pushed, dispatch takes its usual fast path.
// 2. An op's time is the wall time of its call below the profiler: the modes under it and the
//    kernel. Kernels dispatch no ops (dispatcher.h), so op times never nest and their sum is the
//    time spent in ops. Whatever the profiled scopes took beyond that is reported as one row,
//    "(outside ops)": autograd graph building, the engine, hooks, Python-free glue, data loading.
// 3. On CUDA a kernel call returns when the work is queued, so its time is host-side launch time.
// 4. Rows accumulate over every Scope opened on the profiler until reset().
#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <string>
#include <vector>

#include "runtime/dispatcher.h"

namespace graft {

class OpProfiler : public DispatchMode {
 public:
  struct Row {
    std::string name;
    int64_t calls = 0;
    double total_us = 0;
    double mean_us() const { return calls ? total_us / static_cast<double>(calls) : 0; }
  };

  class Scope {
   public:
    explicit Scope(OpProfiler& p);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    OpProfiler& p_;
    DispatchModeGuard guard_;
    std::chrono::steady_clock::time_point start_;
  };

  OpResult on_op(const Op& op, Stack& args, const DispatchNext& next) override;

  // Ops by total time, largest first.
  std::vector<Row> rows() const;
  double profiled_us() const { return wall_us_; }  // wall time inside Scopes
  double ops_us() const;                            // sum of the rows
  // The table: one line per op (the `max_rows` largest, the rest summed in one line), then
  // "(outside ops)" and the total.
  std::string table(size_t max_rows = 25) const;
  void reset();

 private:
  std::unordered_map<const Op*, Row> rows_;  // Ops never move (dispatcher.h): a stable key
  double wall_us_ = 0;
};

}  // namespace graft
