#pragma once
// ProcessGroup: one communicator over all ranks, for tensors of one device type. graft never
// implements a transport itself: MpiProcessGroup wraps Open MPI (CPU tensors), NcclProcessGroup
// wraps NCCL (CUDA tensors), and LocalProcessGroup is world size 1 without any library call.
//
// Invariants:
// 1. Collectives are matched by call order: every rank issues the same collectives, on tensors of
//    the same dtype and element count, in the same order. A group checks what it can see locally
//    (dtype, device, contiguity handled by a staging copy) and names the op, shape, dtype and
//    device in its error; a mismatch between ranks is the caller's contract (DDP checks its
//    parameters once, with a collective whose size does not depend on the model).
// 2. A Work owns everything its collective touches (the tensor, a staging copy, the request or
//    event) until wait() returns or the Work is destroyed. Destroying an unfinished Work waits, so
//    memory is never freed under a running collective.
// 3. Async collectives return at once; progress happens in test() and wait() (Open MPI here has no
//    progress thread: a caller that wants overlap polls test()). Sync ones are async + wait().
// 4. Avg is Sum followed by a division on the calling rank, so every rank does the same
//    arithmetic on the same summed bits and ends bit-identical.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace graft::dist {

enum class ReduceOp { Sum, Avg, Max, Min };
const char* reduce_op_name(ReduceOp op);
// all_reduce's argument check every group shares: Avg divides, so it needs a floating dtype.
void check_reduce(const Tensor& t, ReduceOp op);

class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the collective finished and its result is in the tensor (for NCCL: until the
  // caller's current stream is ordered after it, as torch's Work::wait).
  virtual void wait() = 0;
  // True once finished (then wait() returns at once); drives progress on transports that need it.
  virtual bool test() = 0;
};

// A Work that is already complete (world size 1, or a sync collective done inline).
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;
  virtual std::string name() const = 0;  // "mpi", "nccl", "local"
  int rank() const { return rank_; }
  int size() const { return size_; }
  // In place on `t` (any layout; a non-contiguous tensor goes through a contiguous copy).
  virtual std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) = 0;
  virtual std::shared_ptr<Work> broadcast(Tensor& t, int src) = 0;
  // One tensor per rank, in rank order, each shaped like `t` (same shape on every rank).
  virtual std::vector<Tensor> all_gather(const Tensor& t) = 0;
  virtual void barrier() = 0;
  // Collectives this group has issued (tests check that no_sync issues none).
  int64_t num_collectives() const { return num_collectives_; }

 protected:
  int rank_ = 0, size_ = 1;  // set once by the group's constructor
  int64_t num_collectives_ = 0;
};

// World size 1: every collective is complete at once and touches nothing (Sum/Avg/Max/Min of one
// rank is the tensor itself); all_gather returns a copy.
class LocalProcessGroup final : public ProcessGroup {
 public:
  std::string name() const override { return "local"; }
  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor& t, int src) override;
  std::vector<Tensor> all_gather(const Tensor& t) override;
  void barrier() override { ++num_collectives_; }
};

}  // namespace graft::dist
