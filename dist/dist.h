#pragma once
// The distributed runtime: which process this is, and collectives on tensors.
//
// Invariants:
// 1. init() calls MPI_Init only when a launcher started this process (mpirun/orterun/PMIx set
//    OMPI_COMM_WORLD_SIZE, PMIX_RANK or PMI_SIZE). Without one the world is rank 0 of 1 and no MPI
//    function is ever called: a singleton MPI_Init costs 0.4 s and is never needed for one rank.
// 2. Collectives pick their group by the tensor's device: CPU -> MPI (or local at world size 1),
//    CUDA -> NCCL, made on first use with its unique id broadcast over MPI.
// 3. Every collective runs on the thread that called init() (MPI_THREAD_FUNNELED): autograd runs
//    backward on the caller's thread, so DDP's hooks satisfy this without a communication thread.
// 4. finalize() is idempotent and also runs at exit when init() did not see a finalize.
#include <memory>
#include <vector>

#include "dist/process_group.h"

namespace graft::dist {

void init();
void finalize();
bool is_initialized();
// Before init() these read the launcher's environment (0 / 1 / 0 without a launcher).
int rank();
int world_size();
int local_rank();
// True when a launcher started this process (whether or not init() ran).
bool launched_by_mpi();

std::shared_ptr<Work> all_reduce(Tensor& t, ReduceOp op = ReduceOp::Sum, bool async = false);
std::shared_ptr<Work> broadcast(Tensor& t, int src, bool async = false);
std::vector<Tensor> all_gather(const Tensor& t);
void barrier();

// The group that serves tensors on `device` (init() must have run).
ProcessGroup& process_group(Device device);
// MPI calls made by this process so far (0 for a world of one; tests pin that).
int64_t num_mpi_calls();
// Ends every rank's process: MPI_Abort when a world of more than one is running (a rank that
// failed must not leave the others waiting in a collective), else _Exit.
[[noreturn]] void abort(int code);

}  // namespace graft::dist
