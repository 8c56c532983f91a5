#pragma once
// MpiProcessGroup: collectives on CPU tensors over an MPI communicator (Open MPI).
//
// Invariants:
// 1. The group owns a duplicate of MPI_COMM_WORLD, so no other library's messages on the world
//    communicator can match graft's collectives.
// 2. Every MPI call goes through one checked helper that counts it (dist::num_mpi_calls), so a
//    test can prove that a world of one made none.
// 3. CUDA tensors are refused with an error naming the op: Open MPI here is not CUDA-aware, and a
//    silent host round trip would hide the cost; they belong to NcclProcessGroup.
// 4. Int counts: MPI counts are int, so a tensor of more than INT_MAX elements is refused, never
//    truncated.
#include <memory>

#include "dist/process_group.h"

namespace graft::dist {

class MpiProcessGroup final : public ProcessGroup {
 public:
  MpiProcessGroup();  // MPI must be initialised
  ~MpiProcessGroup() override;
  std::string name() const override { return "mpi"; }
  std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op) override;
  std::shared_ptr<Work> broadcast(Tensor& t, int src) override;
  std::vector<Tensor> all_gather(const Tensor& t) override;
  void barrier() override;
  // Broadcasts raw bytes from `src` (NCCL's unique id travels this way).
  void broadcast_bytes(void* data, int bytes, int src);

 private:
  struct Comm;
  std::unique_ptr<Comm> comm_;
};

// Counted, checked MPI: throws graft::Error naming `what` and MPI's error string when rc != MPI_SUCCESS.
void mpi_check(int rc, const char* what);
void count_mpi_call();

}  // namespace graft::dist
