#pragma once
// NcclProcessGroup: collectives on CUDA tensors of one device over an NCCL communicator. Built only
// when the CUDA build finds NCCL (GRAFT_HAVE_NCCL); this header names no CUDA or NCCL type, so
// dist.cpp includes it without their headers.
//
// Invariants:
// 1. Collectives run on the group's own non-blocking stream, ordered after the caller's work: each
//    one records an event on the caller's current stream and makes the NCCL stream wait on it, so
//    the tensor NCCL reads is the one the caller's queued kernels produced, and the caller's
//    stream keeps running while NCCL works.
// 2. Work::wait() is stream-ordered, as torch's ProcessGroupNCCL: it makes the caller's current
//    stream wait on the collective's completion event and queues what follows the transfer (Avg's
//    division, the copy back from a staging buffer) on that stream; the host never blocks. So the
//    result is in the tensor for every kernel queued on that stream after wait(). test() is
//    cudaEventQuery; once it sees the collective done it queues the same finish, so a Work polled
//    to true is as good as a waited one. A Work destroyed unwaited finishes the same way
//    (process_group.h, invariant 2).
// 3. The caching allocator never reuses memory under a running collective: every tensor NCCL
//    touches is record_stream'ed on the NCCL stream, and the Work holds its tensors until wait().
//    This is why the NCCL stream is one per device per process and never destroyed: a tensor
//    all-reduced in place (a gradient) is freed long after its group may be gone, and at that free
//    the allocator records an event on every stream it was used on.
// 4. Avg is an NCCL sum followed by a division on the caller's stream (process_group.h, invariant 4),
//    so it needs a floating dtype; Bool reduces as uint8 (Sum and Max: any, Min: all).
// 5. Every CUDA and NCCL return code is checked; a failure is a graft::Error naming the call, the
//    op, the tensor (shape, dtype, device) and NCCL's own error string and last-error text.
#include <cstdint>
#include <memory>
#include <vector>

#include "dist/process_group.h"

namespace graft::dist {

// ncclGetUniqueId's NCCL_UNIQUE_ID_BYTES (128) bytes: made by one rank, carried to the others
// (dist.cpp uses MPI). Needs no GPU.
std::vector<uint8_t> nccl_unique_id();

// Rank `rank` of `size` in the communicator named by `unique_id`, on CUDA device `device_index`.
// Blocks until every rank has joined (ncclCommInitRank).
std::unique_ptr<ProcessGroup> make_nccl_process_group(int rank, int size, int device_index,
                                                      const std::vector<uint8_t>& unique_id);

}  // namespace graft::dist
